package esbperf.monitor;

import java.io.IOException;
import java.net.BindException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.hyperic.sigar.Sigar;
import org.hyperic.sigar.SigarException;

/**
 * The host monitor's entry point: samples the host once a second (watched processes every
 * 2 s), keeps two hours of samples in memory and serves them over HTTP until SIGTERM.
 * Failures at start print one line starting "monitor: error:" and exit with status 2.
 */
public final class Monitor {

  static final long INTERVAL_MS = 1000;
  static final int KEEP_TICKS = 2 * 3600;   // two hours at one tick a second

  private Monitor() {
  }

  public static void main(String[] args) {
    try {
      run(Options.parse(args));
    }
    catch (Options.UsageError e) {
      fail(e.getMessage());
    }
  }

  private static void run(Options options) throws Options.UsageError {
    final Sigar sigar = openSigar();
    final HostSampler host;
    final ProcessWatcher processes;
    try {
      for (long pid : options.pids()) {
        try {
          sigar.getProcState(pid);
        }
        catch (SigarException e) {
          throw new Options.UsageError("--pid " + pid + ": no such process");
        }
      }
      host = new HostSampler(sigar);
      processes = new ProcessWatcher(sigar, options.pids(), options.matches());
    }
    catch (SigarException e) {
      fail("sigar cannot read this host's statistics: " + e.getMessage());
      return;
    }

    final SampleRing ring = new SampleRing(KEEP_TICKS);
    final SampleServer server;
    // Small answers would otherwise wait for the peer's delayed ACK (KNOWN-TRAPS.md).
    System.setProperty("sun.net.httpserver.nodelay", "true");
    try {
      server = new SampleServer(options.listen(), ring, options.role(), sigar.getPid(), processes.labels());
    }
    catch (BindException e) {
      fail("cannot listen on " + hostPort(options) + ": " + e.getMessage());
      return;
    }
    catch (IOException e) {
      fail("cannot listen on " + hostPort(options) + ": " + e);
      return;
    }

    final ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor(r -> new Thread(r, "monitor-sampler"));
    final Map<List<Tick.Key>, List<Tick.Key>> keyLists = new HashMap<>();
    final Runnable tick = () -> {
      final long now = System.currentTimeMillis();
      final Tick.Builder values = new Tick.Builder();
      try {
        host.sample(values);
        if (processes.due(now)) {
          processes.sample(now, values);
        }
        ring.add(values.build(now, keyLists));
      }
      catch (SigarException | RuntimeException e) {
        // One bad reading must not end the schedule; the missing second shows as a gap.
        System.err.println("monitor: sample at " + now + " failed: " + e);
      }
    };
    // Ticks on whole seconds, so the samples of all hosts line up in the step's CSV files.
    final long delay = INTERVAL_MS - System.currentTimeMillis() % INTERVAL_MS;
    sampler.scheduleAtFixedRate(tick, delay, INTERVAL_MS, TimeUnit.MILLISECONDS);
    server.start();

    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      server.stop();
      sampler.shutdownNow();
      try {
        sampler.awaitTermination(5, TimeUnit.SECONDS);
      }
      catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      sigar.close();
      System.out.println("monitor: stopped");
    }, "monitor-stop"));

    System.out.println("monitor: " + options.role() + " listening on http://" + hostPort(options)
        + "/samples?from=MS&to=MS" + (processes.watchesAnything() ? "; watching " + processes.labels() : ""));
  }

  /** sigar's JNI library is found through -Dorg.hyperic.sigar.path; a missing or broken one
   * shows only when sigar is first used, as an UnsatisfiedLinkError or a SigarException. */
  private static Sigar openSigar() {
    try {
      final Sigar sigar = new Sigar();
      sigar.getMem();   // the first native call
      return sigar;
    }
    catch (LinkageError | SigarException e) {
      final String where = System.getProperty("org.hyperic.sigar.path", System.getProperty("java.library.path"));
      fail("sigar's native library (libsigar-*.so) could not be loaded from " + where + " (" + firstLine(e.getMessage())
          + "); run `esbperf build` to unpack it into agents/monitor/target/native, "
          + "or name its folder with -Dorg.hyperic.sigar.path");
      return null;
    }
  }

  private static String hostPort(Options options) {
    final String host = options.listen().getAddress().getHostAddress();
    return (host.contains(":") ? "[" + host + "]" : host) + ":" + options.listen().getPort();
  }

  private static String firstLine(String text) {
    return text == null ? "no detail" : text.lines().findFirst().orElse("no detail");
  }

  private static void fail(String message) {
    System.err.println("monitor: error: " + message);
    System.exit(2);
  }
}
