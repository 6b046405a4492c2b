package esbperf.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

class ProcessWatcherTest {

  /** Processes whose CPU time the test sets; the watcher's own pid is 1. */
  private static final class FakeProbe implements Probe {
    final Map<Long, String> commandLines = new HashMap<>();
    final Map<Long, Long> cpuMs = new HashMap<>();
    long clockMs;                      // what the watcher's clock reads

    public String name() {
      return "fake";
    }

    public void sampleHost(Tick.Builder out) {
    }

    public int cores() {
      return 1;
    }

    public void useCores(List<Integer> cores) {
    }

    public long selfPid() {
      return 1;
    }

    public boolean exists(long pid) {
      return commandLines.containsKey(pid);
    }

    public long parent(long pid) {
      return -1;
    }

    public long[] processes() {
      return commandLines.keySet().stream().mapToLong(Long::longValue).toArray();
    }

    public String commandLine(long pid) {
      return commandLines.get(pid);
    }

    public Usage usage(long pid) {
      return exists(pid) ? new Usage(cpuMs.get(pid), 1000) : null;
    }

    public void close() {
    }
  }

  private static ProcessWatcher watcher(FakeProbe probe, List<Long> pids, List<String> matches) {
    return new ProcessWatcher(probe, pids, matches, () -> probe.clockMs, null);
  }

  /** A tick stamped nowMs whose readings are taken at readMs. */
  private static Map<String, Double> sample(ProcessWatcher watcher, FakeProbe probe, long nowMs, long readMs) {
    probe.clockMs = readMs;
    return sample(watcher, nowMs);
  }

  private static Map<String, Double> sample(ProcessWatcher watcher, long nowMs) {
    final Tick.Builder b = new Tick.Builder();
    watcher.sample(nowMs, b);
    final Tick tick = b.build(nowMs, new HashMap<>());
    final Map<String, Double> found = new HashMap<>();
    for (int i = 0; i < tick.keys().size(); i++) {
      found.put(tick.keys().get(i).metric(), tick.values()[i]);
    }
    return found;
  }

  @Test
  void aGroupWithARestartedMemberSkipsTheTickInsteadOfReadingLow() {
    final FakeProbe probe = new FakeProbe();
    probe.commandLines.put(10L, "java esb-under-test");
    probe.commandLines.put(11L, "launcher esb-under-test");
    probe.cpuMs.put(10L, 0L);
    probe.cpuMs.put(11L, 0L);
    final ProcessWatcher watcher = watcher(probe, List.of(), List.of("esb-under-test"));

    assertEquals(null, sample(watcher, probe, 0, 0).get("proc.cpu"), "first sight: no interval yet");
    probe.cpuMs.put(10L, 2000L);   // a busy core for 2 s
    probe.cpuMs.put(11L, 20L);
    assertEquals(101.0, sample(watcher, probe, 2000, 2000).get("proc.cpu"), 1e-9);

    probe.commandLines.remove(10L);             // the ESB restarts under a new pid
    probe.commandLines.put(12L, "java esb-under-test");
    probe.cpuMs.put(12L, 50L);
    probe.cpuMs.put(11L, 40L);
    final Map<String, Double> restarted = sample(watcher, probe, 4000, 4000);
    assertEquals(null, restarted.get("proc.cpu"), "the new JVM has no interval: the group's sum would read 1 %");
    assertEquals(2000.0, restarted.get("proc.rss"), 1e-9);

    probe.cpuMs.put(12L, 2050L);
    probe.cpuMs.put(11L, 60L);
    assertEquals(101.0, sample(watcher, probe, 6000, 6000).get("proc.cpu"), 1e-9);
  }

  @Test
  void aReadingTakenLateIsARateOverTheTimeBetweenTheReadsNotBetweenTheStamps() {
    final FakeProbe probe = new FakeProbe();
    probe.commandLines.put(10L, "java echo");
    probe.cpuMs.put(10L, 0L);
    final ProcessWatcher watcher = watcher(probe, List.of(), List.of("java echo"));
    sample(watcher, probe, 0, 0);
    // One busy core. The tick stamped 2000 read 1850 ms late, its thread starved on that core:
    // 3850 ms of CPU over 2000 ms of stamps would be 192.5 % of the one core.
    probe.cpuMs.put(10L, 3850L);
    assertEquals(100.0, sample(watcher, probe, 2000, 3850).get("proc.cpu"), 1e-9);
    probe.cpuMs.put(10L, 4000L);   // the next one on time: 150 ms over 150 ms, not 7.5 %
    assertEquals(100.0, sample(watcher, probe, 4000, 4000).get("proc.cpu"), 1e-9);
  }

  @Test
  void readingsComeEveryOtherTickWhateverTheTicksJitter() {
    final FakeProbe probe = new FakeProbe();
    probe.commandLines.put(10L, "java echo");
    probe.cpuMs.put(10L, 0L);
    final ProcessWatcher watcher = watcher(probe, List.of(), List.of("java echo"));
    sample(watcher, probe, 1000, 1000);
    assertEquals(false, watcher.due(2001));
    assertEquals(true, watcher.due(2998), "a tick begun 2 ms early is still the second one");
  }

  @Test
  void aProcessWatchedByPidAndByMatchCountsFullyInBoth() {
    final FakeProbe probe = new FakeProbe();
    probe.commandLines.put(10L, "java esb-under-test");
    probe.cpuMs.put(10L, 0L);
    final ProcessWatcher watcher = watcher(probe, List.of(10L), List.of("esb-under-test"));
    sample(watcher, probe, 0, 0);
    probe.cpuMs.put(10L, 1000L);
    probe.clockMs = 2000;
    final Tick.Builder b = new Tick.Builder();
    watcher.sample(2000, b);
    final Tick tick = b.build(2000, new HashMap<>());
    final Map<String, Double> cpu = new HashMap<>();
    for (int i = 0; i < tick.keys().size(); i++) {
      if (tick.keys().get(i).metric().equals("proc.cpu")) {
        cpu.put(tick.keys().get(i).subject(), tick.values()[i]);
      }
    }
    assertEquals(Map.of("10", 50.0, "esb-under-test", 50.0), cpu);
  }

  @Test
  void eachTickReadsTheGroupsCompilerThreadsAsAShareOfOneCore(@org.junit.jupiter.api.io.TempDir java.nio.file.Path proc)
      throws java.io.IOException {
    final FakeProbe probe = new FakeProbe();
    probe.commandLines.put(10L, "java esb-under-test");
    probe.cpuMs.put(10L, 0L);
    final ProcessWatcher watcher = new ProcessWatcher(probe, List.of(), List.of("esb-under-test"),
        () -> probe.clockMs, label -> new CompilerThreads(proc));
    compilerThread(proc, 10, 11, 100);
    final Tick.Builder first = new Tick.Builder();
    watcher.sample(0, first);
    watcher.sampleCompilers(first);   // its start: nothing yet
    assertEquals(List.of(), first.build(0, new HashMap<>()).keys().stream().filter(k -> k.metric().equals("proc.jit")).toList());
    compilerThread(proc, 10, 11, 150);   // 50 ticks: 500 ms of compiling in the second
    probe.clockMs = 1000;
    final Tick.Builder second = new Tick.Builder();
    watcher.sampleCompilers(second);
    final Tick tick = second.build(1000, new HashMap<>());
    assertEquals(List.of(new Tick.Key("proc.jit", "esb-under-test")), tick.keys());
    assertEquals(50.0, tick.values()[0], 1e-9);
  }

  /** A C2 compiler thread `tid` of process `pid` in the fake /proc, with `ticks` of CPU so far. */
  private static void compilerThread(java.nio.file.Path proc, long pid, long tid, long ticks) throws java.io.IOException {
    final java.nio.file.Path task = proc.resolve(pid + "/task/" + tid);
    java.nio.file.Files.createDirectories(task);
    java.nio.file.Files.writeString(task.resolve("comm"), "C2 CompilerThre\n");
    java.nio.file.Files.writeString(task.resolve("stat"), tid + " (C2 CompilerThre) S 1 1 1 0 -1 0 0 0 0 0 "
        + ticks + " 0 0 0 20 0 30 0 100 0 0\n");
  }
}
