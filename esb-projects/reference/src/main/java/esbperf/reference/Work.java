package esbperf.reference;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Locale;

/**
 * The set amount of work per request: rounds of a fixed computation on a small buffer, on the
 * request's own thread. A round is one pass over the buffer in which every word depends on the one
 * before (a multiply-xorshift chain), so the compiler can neither vectorise nor skip it and its cost
 * is the same from one request to the next; each pass writes the buffer back and its last value
 * goes into a checksum the stats report, so none of it is dead code.
 *
 * How many rounds a request gets is `work` × the factor of the moment: a warm-up curve (from
 * `warmupFactor` falling linearly to 1 over the first `warmupS` seconds after the first proxied
 * request) times a step (× `stepFactor` from `stepAtS` seconds on).
 */
final class Work {

    /** Words of the buffer one round passes over (512 bytes). */
    static final int WORDS = 64;
    /** A bound that keeps a mistyped setting from holding a thread for minutes per request. */
    static final int MAX_ROUNDS = 10_000_000;
    private static final long MIX = 0x9E3779B97F4A7C15L;
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    /** The work settings as given (esb-projects/reference/engine.yaml's settings). */
    record Settings(int work, double warmupFactor, double warmupS, double stepAtS, double stepFactor) {

        /** The factor on `work` at `seconds` after the first proxied request (before it: at 0). */
        double factorAt(double seconds) {
            double t = Math.max(0, seconds);
            double factor = warmupS > 0 && t < warmupS ? warmupFactor + (1 - warmupFactor) * t / warmupS : 1;
            return stepFactor != 1 && t >= stepAtS ? factor * stepFactor : factor;
        }

        /** The rounds a request gets at that factor. */
        int roundsAt(double seconds) {
            return (int) Math.min(MAX_ROUNDS, Math.round(work * factorAt(seconds)));
        }

        String describe() {
            String text = String.format(Locale.ROOT, "work %d rounds per request", work);
            boolean warmup = warmupS > 0 && warmupFactor != 1;
            if (warmup) {
                text += String.format(Locale.ROOT, ", from %s× falling to 1× over the first %s s", plain(warmupFactor),
                        plain(warmupS));
            }
            if (stepFactor != 1) {
                text += String.format(Locale.ROOT, ", × %s from %s s on", plain(stepFactor), plain(stepAtS));
            }
            return warmup || stepFactor != 1 ? text + " (seconds after the first proxied request)" : text + ", flat";
        }

        private static String plain(double value) {
            return java.math.BigDecimal.valueOf(value).stripTrailingZeros().toPlainString();
        }
    }

    /** What the start-up measurement found over `runs` warmed runs of `rounds` rounds: cpuNanos is the median block's cost a run times `runs`. */
    record Calibration(int rounds, int runs, long cpuNanos) {

        double microsPerRequest() {
            return runs == 0 ? 0 : cpuNanos / 1000.0 / runs;
        }
    }

    private Work() {
    }

    /** A buffer for one thread, filled with the same start values everywhere. */
    static long[] buffer() {
        long[] words = new long[WORDS];
        long h = 1;
        for (int i = 0; i < WORDS; i++) {
            h = mix(h + i);
            words[i] = h;
        }
        return words;
    }

    /** `rounds` passes over `words`, each word chained to the one before; returns the last value. */
    static long run(long[] words, int rounds) {
        long h = words[WORDS - 1];
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < WORDS; i++) {
                h = mix(h ^ words[i]);
                words[i] = h;
            }
        }
        return h;
    }

    private static long mix(long h) {
        h *= MIX;
        return h ^ (h >>> 29);
    }

    /** This thread's CPU time in ns (the JVM's own clock; -1 where the platform has none). */
    static long threadCpuNanos() {
        return THREADS.getCurrentThreadCpuTime();
    }

    static boolean clockWorks() {
        return THREADS.isCurrentThreadCpuTimeSupported() && THREADS.isThreadCpuTimeEnabled();
    }

    /**
     * The thread CPU time a request's work costs at `rounds` rounds here. First it runs the work for
     * at least 2,000 runs and 0.5 s of CPU (at most 2 s), so the JIT is done with it. Then 3,000 timed
     * runs in 5 blocks (at least 20 runs, at most ~2 s of CPU); the cost is the median block's, so
     * one block slowed by something else on the machine does not move it. It is still one moment's
     * figure: on a VM the cost a round moves some ±10 % from minute to minute. The checksum of the runs goes
     * to `sink`, so none is dead code.
     */
    static Calibration calibrate(int rounds, java.util.function.LongConsumer sink) {
        if (rounds == 0 || !clockWorks()) {
            return new Calibration(rounds, 0, 0);
        }
        long[] words = buffer();
        long checksum = 0;
        long start = threadCpuNanos();
        for (int i = 0; ; i++) {
            long spent = threadCpuNanos() - start;
            if (spent >= 2_000_000_000L || (i >= 2000 && spent >= 500_000_000L)) {
                break;
            }
            checksum ^= run(words, rounds);
        }
        int blocks = 5;
        double[] perRun = new double[blocks];
        int runs = 0;
        for (int b = 0; b < blocks; b++) {
            int inBlock = 0;
            long began = threadCpuNanos();
            long now = began;
            while (inBlock < 600 && (inBlock < 4 || now - began < 400_000_000L)) {
                checksum ^= run(words, rounds);
                inBlock++;
                if ((inBlock & 15) == 0 || rounds > 10_000) {
                    now = threadCpuNanos();
                }
            }
            perRun[b] = (double) (threadCpuNanos() - began) / inBlock;
            runs += inBlock;
        }
        sink.accept(checksum);
        java.util.Arrays.sort(perRun);
        return new Calibration(rounds, runs, Math.round(perRun[blocks / 2] * runs));
    }
}
