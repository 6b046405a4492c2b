package esbperf.monitor;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.net.BindException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.hyperic.sigar.SigarException;

/**
 * The host monitor's entry point: samples the host once a second (watched processes every
 * 2 s, their JIT compilers every second) with sigar, or OSHI where sigar cannot load, keeps the samples in a bounded spool on disk
 * and serves them over HTTP until SIGTERM. Failures at start print one line starting
 * "monitor: error:" and exit with status 2.
 */
public final class Monitor {

  static final long INTERVAL_MS = 1000;

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
    final Probe probe = openProbe(options);
    if (!options.cpus().isEmpty()) {
      final int cores = probe.cores();
      final int beyond = options.cpus().get(options.cpus().size() - 1);
      if (beyond >= cores) {
        throw new Options.UsageError("--cpus: CPU " + beyond + " is not on this machine (CPUs 0-" + (cores - 1) + ")");
      }
      probe.useCores(options.cpus());
    }
    for (long pid : options.pids()) {
      if (!probe.exists(pid)) {
        throw new Options.UsageError("--pid " + pid + ": no such process");
      }
    }
    final ProcessWatcher processes = new ProcessWatcher(probe, options.pids(), options.matches());

    final Spool spool;
    try {
      spool = Spool.open(options.spool(), options.spoolMaxBytes(), options.spoolMaxAgeMs(), System.currentTimeMillis());
    }
    catch (Spool.InUse e) {
      fail(e.getMessage());
      return;
    }
    catch (IOException e) {
      fail("cannot use the spool folder " + options.spool().toAbsolutePath() + ": " + e);
      return;
    }

    final SampleServer server;
    // The JDK HttpServer's small answers would otherwise wait ~40 ms for the peer's delayed ACK.
    System.setProperty("sun.net.httpserver.nodelay", "true");
    try {
      server = new SampleServer(options.listen(), spool, probe.name(), options.role(), probe.selfPid(),
          processes.labels(), options.cpus());
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
        probe.sampleHost(values);
        if (processes.due(now)) {
          processes.sample(now, values);
        }
        processes.sampleCompilers(values);
        spool.append(values.build(now, keyLists));
      }
      catch (Probe.ReadingFailed | RuntimeException e) {
        // One bad reading must not end the schedule; the missing second shows as a gap.
        System.err.println("monitor: sample at " + now + " failed: " + e);
      }
      catch (IOException e) {
        System.err.println("monitor: sample at " + now + " could not be written to " + spool.dir() + ": " + e);
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
      spool.close();
      probe.close();
      System.out.println("monitor: stopped");
    }, "monitor-stop"));

    System.out.println("monitor: " + options.role() + " listening on http://" + hostPort(options)
        + "/samples?from=MS&to=MS" + (processes.watchesAnything() ? "; watching " + processes.labels() : "")
        + "; sampler " + probe.name() + (options.cpus().isEmpty() ? "" : "; CPU of cores " + options.cpus())
        + "; spool " + spool.dir().toAbsolutePath());
  }

  /**
   * sigar, unless told otherwise or unless it cannot work here: then OSHI, saying so in one
   * line. sigar's JNI library is found through -Dorg.hyperic.sigar.path; a missing or broken one
   * shows only when sigar is first used, as an UnsatisfiedLinkError or a SigarException.
   */
  private static Probe openProbe(Options options) {
    if (options.sampler().equals("oshi")) {
      return openOshi(options, "sampling through OSHI (--sampler oshi)", null);
    }
    String why = SigarProbe.whyNotLoadable();
    if (why == null) {
      // sigar prints a stack trace of its own when its library fails to load (it wants log4j,
      // which is left out): keep it out of the log, the one line below says it.
      final PrintStream err = System.err;
      final ByteArrayOutputStream sigarSaid = new ByteArrayOutputStream();
      System.setErr(new PrintStream(sigarSaid, true, StandardCharsets.UTF_8));
      try {
        return new SigarProbe();
      }
      catch (LinkageError e) {
        // sigar's own first line names the loader's reason (wrong ELF class, ...); the error
        // itself only names the first native method that was missing.
        final String said = firstLine(sigarSaid.toString(StandardCharsets.UTF_8));
        why = (said.equals("no detail") ? firstLine(e.getMessage()) : said) + "; looked in "
            + System.getProperty("org.hyperic.sigar.path", System.getProperty("java.library.path"));
      }
      catch (SigarException e) {
        why = null;
        final String reading = "sigar cannot read this host's statistics (" + firstLine(e.getMessage()) + ")";
        return openOshi(options, reading + "; sampling through OSHI", reading);
      }
      finally {
        System.setErr(err);
      }
    }
    final String cannotLoad = "sigar's native library cannot load (" + why + ")";
    return openOshi(options, cannotLoad + "; sampling through OSHI", cannotLoad);
  }

  /** {@code why}: why sigar is not used (null when OSHI was asked for). */
  private static Probe openOshi(Options options, String announce, String why) {
    if (System.getProperty("jna.tmpdir") == null) {
      // Where JNA unpacks its own native library if it must: the monitor's folder, not the user's home.
      System.setProperty("jna.tmpdir", options.state().resolve("jna").toAbsolutePath().toString());
    }
    try {
      final Probe probe = new OshiProbe();
      System.out.println("monitor: " + announce);
      return probe;
    }
    catch (LinkageError | RuntimeException e) {
      final String reason = firstLine(e.toString());
      fail(why == null ? "OSHI cannot sample this host (" + reason + ")"
          : why + ", and OSHI cannot sample this host either (" + reason + ")");
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
