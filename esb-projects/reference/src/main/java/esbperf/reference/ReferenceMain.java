package esbperf.reference;

import java.net.BindException;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;

/**
 * `java esbperf.reference.ReferenceMain --host H --port P --ws1 URL --ws2 URL --ws3 URL [--work N ...]`:
 * the reference engine, until SIGTERM. Before it listens it measures what its work costs on this
 * machine (thread CPU time over warmed runs) and says so; its answers start once that is done.
 */
public final class ReferenceMain {

    private ReferenceMain() {
    }

    public static void main(String[] args) throws Exception {
        // Netty samples buffers for leak reports with a stack trace each: a cost per request, not the work's.
        System.setProperty("io.netty.leakDetection.level", System.getProperty("io.netty.leakDetection.level", "disabled"));
        ReferenceOptions options;
        try {
            options = ReferenceOptions.parse(args);
        } catch (IllegalArgumentException e) {
            fail(e.getMessage());
            return;
        }
        Work.Settings work = options.work();
        if (work.work() > 0 && !Work.clockWorks()) {
            fail("this JVM has no thread CPU clock (ThreadMXBean): the work's cost could not be accounted");
        }
        Account account = new Account(work, options.threads());
        Work.Calibration calibration = Work.calibrate(work.work(), account::checksum);
        account.calibrated(calibration);
        System.out.println(calibration.runs() == 0 ? "reference: work 0 rounds: no work per request"
                : String.format(Locale.ROOT, "reference: work %d rounds: %.1f µs CPU per request on this machine "
                        + "(thread CPU time over %d warmed runs)", work.work(), calibration.microsPerRequest(), calibration.runs()));
        System.out.println("reference: " + work.describe());
        ReferenceProxy proxy;
        try {
            proxy = ReferenceProxy.start(options, account);
        } catch (Exception e) {
            BindException bind = bindFailure(e);
            if (bind == null) {
                e.printStackTrace();
            }
            fail(bind != null ? "cannot listen on " + options.host() + ":" + options.port() + ": " + bind.getMessage()
                    : "cannot start: " + e);
            return;
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            proxy.close();
            System.out.println("reference: stopped; its account: " + account.json().strip());
            stopped.countDown();
        }, "reference-stop"));
        String where = options.host().contains(":") ? "[" + options.host() + "]" : options.host();
        // Not "reference: …": `esbperf esb` shows those lines, and says where it listens itself.
        System.out.println("listening at http://" + where + ":" + options.port() + " (the reference engine, "
                + options.threads() + " event loop(s)); its account at GET " + ReferenceProxy.STATS_PATH);
        stopped.await();
    }

    private static BindException bindFailure(Throwable e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause instanceof BindException bind) {
                return bind;
            }
        }
        return null;
    }

    private static void fail(String message) {
        System.err.println("reference: error: " + message);
        System.exit(2);
    }
}
