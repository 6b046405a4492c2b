package esbperf.monitor;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.function.LongSupplier;

/**
 * The CPU (percent of one core) and resident memory of watched processes: given by pid, or by
 * a text their command line contains (re-resolved when they restart, e.g. the ESB's JVM).
 * All processes matching one text are summed under that text, so the series stays one line
 * whatever their pids. CPU is the growth of the process's CPU time between two readings, over the
 * time between the moments they were read: every other tick ({@link #MIN_INTERVAL_MS}), the pace
 * the monitor's cost was measured at. A tick's stamp is when it began; on a saturated core the
 * monitor's own thread may read a second or more later, and a rate over the stamps would then
 * read up to twice what the cores allow (192 % of the one core an echo was pinned to).
 *
 * <p>Every tick (not every other: a JVM's warm-up is judged on it second by second) also the CPU
 * of each group's JIT compiler threads, {@code proc.jit}, where the host has /proc
 * ({@link CompilerThreads}); a group without compiler threads (a native engine) has none.
 */
final class ProcessWatcher {

  static final long MIN_INTERVAL_MS = 2000;
  // Ticks begin a few ms early or late: a reading due every other tick must not slip to every third.
  static final long TICK_SLACK_MS = 500;

  private record Reading(long cpuMs, long atMs) {
  }

  private final Probe probe;
  private final List<Long> pids;
  private final List<String> matches;
  private final Set<Long> notMatchable;                       // the monitor and its launchers
  private final LongSupplier clock;                           // ms since the epoch
  private final Map<String, List<Long>> resolved = new HashMap<>();
  // Per label: a process watched both by pid and by a match text is read once for each.
  private final Map<String, Map<Long, Reading>> previous = new HashMap<>();
  private long lastSampleMs;
  private final Function<String, CompilerThreads> compilersOf;   // by label; null: no /proc here
  private final Map<String, CompilerThreads> compilers = new HashMap<>();
  private final Map<String, Long> compilersReadMs = new HashMap<>();

  ProcessWatcher(Probe probe, List<Long> pids, List<String> matches) {
    this(probe, pids, matches, System::currentTimeMillis,
        CompilerThreads.ofThisMachine() == null ? null : label -> CompilerThreads.ofThisMachine());
  }

  ProcessWatcher(Probe probe, List<Long> pids, List<String> matches, LongSupplier clock,
      Function<String, CompilerThreads> compilersOf) {
    this.probe = probe;
    this.pids = pids;
    this.matches = matches;
    this.clock = clock;
    this.compilersOf = compilersOf;
    this.notMatchable = selfAndAncestors();
  }

  boolean watchesAnything() {
    return !pids.isEmpty() || !matches.isEmpty();
  }

  boolean due(long nowMs) {
    return watchesAnything() && nowMs - lastSampleMs >= MIN_INTERVAL_MS - TICK_SLACK_MS;
  }

  void sample(long nowMs, Tick.Builder out) {
    lastSampleMs = nowMs;
    for (long pid : pids) {
      emit(Long.toString(pid), List.of(pid), nowMs, out);
    }
    for (String text : matches) {
      List<Long> group = resolved.get(text);
      if (group == null || group.isEmpty() || !group.stream().allMatch(probe::exists)) {
        group = findByCommandLine(text);   // first time, or one of them exited (a restart)
        resolved.put(text, group);
      }
      emit(text, group, nowMs, out);
    }
  }

  /** proc.jit, each watched group's compiler threads' CPU (percent of one core) since the previous
   * tick, for the groups found so far ({@link #sample} finds them); a group's first reading sets its
   * start and reports nothing. */
  void sampleCompilers(Tick.Builder out) {
    if (compilersOf == null) {
      return;
    }
    for (long pid : pids) {
      emitCompilers(Long.toString(pid), List.of(pid), out);
    }
    for (String text : matches) {
      final List<Long> group = resolved.get(text);
      if (group != null) {
        emitCompilers(text, group, out);
      }
    }
  }

  private void emitCompilers(String label, List<Long> group, Tick.Builder out) {
    final CompilerThreads threads = compilers.computeIfAbsent(label, compilersOf);
    final long readFrom = clock.getAsLong();
    final long ms = threads.growthMs(group);
    final long atMs = (readFrom + clock.getAsLong()) / 2;
    final Long before = compilersReadMs.put(label, atMs);
    if (ms >= 0 && before != null && atMs > before) {
      out.add("proc.jit", label, 100.0 * ms / (atMs - before));
    }
  }

  /** proc.rss and proc.cpu for the live processes of a group; nothing when none is alive. The row
   * is stamped with the tick; the rate is over the times the readings were actually taken. */
  private void emit(String label, List<Long> group, long nowMs, Tick.Builder out) {
    final Map<Long, Reading> before = previous.getOrDefault(label, Map.of());
    final Map<Long, Reading> readings = new HashMap<>();   // the exited drop out
    double cpuPercent = 0;
    long rss = 0;
    boolean anyAlive = false;
    boolean cpuKnown = true;
    for (long pid : group) {
      final long readFrom = clock.getAsLong();
      final Probe.Usage usage = probe.usage(pid);
      // The middle of the call: the thread may be preempted on either side of the read itself.
      final long atMs = (readFrom + clock.getAsLong()) / 2;
      if (usage == null) {
        continue;   // exited since it was found
      }
      final long cpuMs = usage.cpuMs();
      rss += usage.rssBytes();
      anyAlive = true;
      readings.put(pid, new Reading(cpuMs, atMs));
      final Reading last = before.get(pid);
      if (last != null && atMs > last.atMs) {
        cpuPercent += 100.0 * (cpuMs - last.cpuMs) / (atMs - last.atMs);
      }
      else {
        cpuKnown = false;
      }
    }
    previous.put(label, readings);
    if (anyAlive) {
      out.add("proc.rss", label, rss);
      // A process seen for the first time has no interval yet, and a group's sum without it
      // would read low (a restarted ESB beside a process that kept running read 0 %): skip the tick.
      if (cpuKnown) {
        out.add("proc.cpu", label, cpuPercent);
      }
    }
  }

  private List<Long> findByCommandLine(String text) {
    final List<Long> found = new ArrayList<>();
    for (long pid : probe.processes()) {
      if (notMatchable.contains(pid)) {
        continue;
      }
      final String commandLine = probe.commandLine(pid);   // null: exited while we looked, or not ours to read
      if (commandLine != null && commandLine.contains(text)) {
        found.add(pid);
      }
    }
    return found;
  }

  /** The monitor's own command line holds the text after --match, and so do the commands that
   * launched it (esbperf monitor, ip netns exec, …): never count those. */
  private Set<Long> selfAndAncestors() {
    final Set<Long> chain = new HashSet<>();
    long pid = probe.selfPid();
    while (pid > 1 && chain.add(pid)) {
      pid = probe.parent(pid);
    }
    return chain;
  }

  /** The labels this watcher reports under, for the status page. */
  List<String> labels() {
    final Set<String> labels = new LinkedHashSet<>();
    pids.forEach(p -> labels.add(Long.toString(p)));
    labels.addAll(matches);
    return List.copyOf(labels);
  }
}
