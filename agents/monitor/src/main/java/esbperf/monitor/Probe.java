package esbperf.monitor;

/**
 * Where the monitor's readings come from: sigar (the default) or OSHI (where sigar's native
 * library cannot load, or when asked for). Both give the same metrics and subjects; the
 * sampling logic above them (ticks, watched processes, the spool) is shared.
 */
interface Probe extends AutoCloseable {

  /** A reading failed; the tick is lost and shows as a gap. */
  final class ReadingFailed extends Exception {
    ReadingFailed(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** A process's CPU time so far (user + system, ms) and its resident memory (bytes). */
  record Usage(long cpuMs, long rssBytes) {
  }

  /** "sigar" or "oshi", as /status reports it. */
  String name();

  /** The whole host's readings: cpu.*, mem.*, net.* (see docs/monitoring.md). CPU percentages
   * cover the time since the previous call (the first call happens when the probe is made);
   * cpu.user, sys, idle and total are those of the host's cores ({@link #useCores}), cpu.core
   * each core's of the machine. */
  void sampleHost(Tick.Builder out) throws ReadingFailed;

  /** How many cores the machine has (cpu.core's subjects are 0 .. n-1). */
  int cores();

  /** The host's cores, when it is pinned to some of the machine's (a one-machine testbed gives
   * each host cores of its own): cpu.total and its parts cover those alone. Empty: all. */
  void useCores(java.util.List<Integer> cores);

  long selfPid();

  boolean exists(long pid);

  /** The parent's pid, or -1 when the process is gone or has none. */
  long parent(long pid);

  /** Every process's pid. */
  long[] processes();

  /** The arguments joined by spaces, or null when the process is gone or not readable. */
  String commandLine(long pid);

  /** null when the process is gone. */
  Usage usage(long pid);

  @Override
  void close();

  /** A fraction of CPU time to percent, clamped: rounding can give a hair below 0 or above 100. */
  static double percent(double fraction) {
    return Math.max(0.0, Math.min(100.0, fraction * 100.0));
  }
}
