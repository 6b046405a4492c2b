package esbperf.reference;

import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;
import java.util.concurrent.atomic.LongAdder;

/**
 * The reference engine's own account of what it did, from the JVM's own CPU clocks: requests,
 * the work's rounds and thread CPU time, the process's CPU time, the factor of the moment, and its
 * settings with the cost of its work measured at start. GET /reference/stats answers it as JSON.
 * Counters are striped (LongAdder): the proxy path only adds to them.
 */
final class Account {

    private static final long UNSET = Long.MIN_VALUE;
    private final Work.Settings settings;
    private final int eventLoops;
    private final long startedNanos = System.nanoTime();
    private final AtomicLong firstRequestNanos = new AtomicLong(UNSET);
    private final LongAdder requests = new LongAdder();
    private final LongAdder answered = new LongAdder();
    private final LongAdder unreachable = new LongAdder();
    private final LongAdder timedOut = new LongAdder();
    private final LongAdder workRequests = new LongAdder();
    private final LongAdder workRounds = new LongAdder();
    private final LongAdder workCpuNanos = new LongAdder();
    private final LongAccumulator checksum = new LongAccumulator((a, b) -> a ^ b, 0);
    private volatile Work.Calibration calibration;

    Account(Work.Settings settings, int eventLoops) {
        this.settings = settings;
        this.eventLoops = eventLoops;
    }

    void calibrated(Work.Calibration found) {
        calibration = found;
    }

    void checksum(long value) {
        checksum.accumulate(value);
    }

    /** A proxied request arrives: the first one starts the clock of the warm-up and the step. Returns its rounds. */
    int proxied() {
        requests.increment();
        long now = System.nanoTime();
        long first = firstRequestNanos.get();
        if (first == UNSET && firstRequestNanos.compareAndSet(UNSET, now)) {
            first = now;
        } else if (first == UNSET) {
            first = firstRequestNanos.get();
        }
        return settings.roundsAt((now - first) / 1e9);
    }

    void worked(int rounds, long cpuNanos, long result) {
        workRequests.increment();
        workRounds.add(rounds);
        workCpuNanos.add(cpuNanos);
        checksum.accumulate(result);
    }

    void answered() {
        answered.increment();
    }

    void unreachable() {
        unreachable.increment();
    }

    void timedOut() {
        timedOut.increment();
    }

    /** Seconds since the first proxied request, or NaN before it. */
    double secondsSinceFirst() {
        long first = firstRequestNanos.get();
        return first == UNSET ? Double.NaN : (System.nanoTime() - first) / 1e9;
    }

    static long processCpuNanos() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getProcessCpuTime();
        }
        return -1;
    }

    /** The account as JSON (GET /reference/stats). */
    String json() {
        double since = secondsSinceFirst();
        Work.Calibration c = calibration;
        long process = processCpuNanos();
        StringBuilder out = new StringBuilder(1024).append('{');
        field(out, "engine", "\"reference\"");
        field(out, "what", "\"a measuring standard: a lean proxy that spends a set amount of CPU per request, not an ESB\"");
        out.append("\"settings\":{");
        field(out, "work", Integer.toString(settings.work()));
        field(out, "warmup-factor", number(settings.warmupFactor()));
        field(out, "warmup-s", number(settings.warmupS()));
        field(out, "step-at", number(settings.stepAtS()));
        last(out, "step-factor", number(settings.stepFactor()));
        out.append("},");
        field(out, "work_us_per_request", c == null || c.runs() == 0 ? "null" : number(c.microsPerRequest()));
        out.append("\"work_calibration\":{");
        field(out, "rounds", c == null ? "null" : Integer.toString(c.rounds()));
        field(out, "runs", c == null ? "null" : Integer.toString(c.runs()));
        last(out, "cpu_s", c == null ? "null" : number(c.cpuNanos() / 1e9));
        out.append("},");
        field(out, "requests", Long.toString(requests.sum()));
        field(out, "answered", Long.toString(answered.sum()));
        field(out, "unreachable", Long.toString(unreachable.sum()));
        field(out, "timed_out", Long.toString(timedOut.sum()));
        field(out, "work_requests", Long.toString(workRequests.sum()));
        field(out, "work_rounds", Long.toString(workRounds.sum()));
        field(out, "work_cpu_s", number(workCpuNanos.sum() / 1e9));
        field(out, "process_cpu_s", process < 0 ? "null" : number(process / 1e9));
        field(out, "factor", number(settings.factorAt(Double.isNaN(since) ? 0 : since)));
        field(out, "seconds_since_first_request", Double.isNaN(since) ? "null" : number(since));
        field(out, "uptime_s", number((System.nanoTime() - startedNanos) / 1e9));
        field(out, "event_loops", Integer.toString(eventLoops));
        last(out, "checksum", "\"" + Long.toHexString(checksum.get()) + "\"");
        return out.append("}\n").toString();
    }

    private static void field(StringBuilder out, String name, String value) {
        last(out, name, value);
        out.append(',');
    }

    private static void last(StringBuilder out, String name, String value) {
        out.append('"').append(name).append("\":").append(value);
    }

    private static String number(double value) {
        return String.format(Locale.ROOT, "%.6f", value).replaceAll("0+$", "").replaceAll("\\.$", ".0");
    }
}
