package esbperf.monitor;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The CPU (percent of one core) and resident memory of watched processes: given by pid, or by
 * a text their command line contains (re-resolved when they restart, e.g. the ESB's JVM).
 * All processes matching one text are summed under that text, so the series stays one line
 * whatever their pids. CPU is the growth of the process's CPU time between two readings at
 * least {@link #MIN_INTERVAL_MS} apart: sigar caches a process's /proc data for up to 2 s,
 * and a faster reading would see no growth (the OSHI probe keeps the same pace).
 */
final class ProcessWatcher {

  static final long MIN_INTERVAL_MS = 2000;

  private record Reading(long cpuMs, long atMs) {
  }

  private final Probe probe;
  private final List<Long> pids;
  private final List<String> matches;
  private final Set<Long> notMatchable;                       // the monitor and its launchers
  private final Map<String, List<Long>> resolved = new HashMap<>();
  // Per label: a process watched both by pid and by a match text is read once for each.
  private final Map<String, Map<Long, Reading>> previous = new HashMap<>();
  private long lastSampleMs;

  ProcessWatcher(Probe probe, List<Long> pids, List<String> matches) {
    this.probe = probe;
    this.pids = pids;
    this.matches = matches;
    this.notMatchable = selfAndAncestors();
  }

  boolean watchesAnything() {
    return !pids.isEmpty() || !matches.isEmpty();
  }

  boolean due(long nowMs) {
    return watchesAnything() && nowMs - lastSampleMs >= MIN_INTERVAL_MS;
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

  /** proc.rss and proc.cpu for the live processes of a group; nothing when none is alive. */
  private void emit(String label, List<Long> group, long nowMs, Tick.Builder out) {
    final Map<Long, Reading> before = previous.getOrDefault(label, Map.of());
    final Map<Long, Reading> readings = new HashMap<>();   // the exited drop out
    double cpuPercent = 0;
    long rss = 0;
    boolean anyAlive = false;
    boolean cpuKnown = true;
    for (long pid : group) {
      final Probe.Usage usage = probe.usage(pid);
      if (usage == null) {
        continue;   // exited since it was found
      }
      final long cpuMs = usage.cpuMs();
      rss += usage.rssBytes();
      anyAlive = true;
      readings.put(pid, new Reading(cpuMs, nowMs));
      final Reading last = before.get(pid);
      if (last != null && nowMs > last.atMs) {
        cpuPercent += 100.0 * (cpuMs - last.cpuMs) / (nowMs - last.atMs);
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
