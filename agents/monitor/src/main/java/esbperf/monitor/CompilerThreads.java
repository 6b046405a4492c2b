package esbperf.monitor;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The CPU a JVM's JIT compiler threads use, read from the process's own threads in /proc
 * (Linux): HotSpot names them "C1 CompilerThread<n>" and "C2 CompilerThread<n>", which the
 * kernel keeps as the first 15 characters ({@code /proc/PID/task/TID/comm}). On one core the
 * compiler is two threads among an engine's busy request threads: its share is what tells a JVM
 * still compiling from a warm one ({@code proc.jit}; docs/monitoring.md).
 *
 * <p>One instance per watched label (its processes' threads are its own state). Each reading
 * lists the process's threads, reads the name of a thread once (cached by tid),
 * and the CPU time of the compiler threads only; a thread's growth since the previous reading is
 * counted, so a compiler thread HotSpot starts or stops meanwhile (its compiler threads come and
 * go with the queue) neither goes negative nor counts its whole life twice.
 */
final class CompilerThreads {

  /** /proc's stat times are in USER_HZ, which the kernel's ABI fixes at 100 a second. */
  static final long MS_PER_TICK = 10;
  private static final String[] PREFIXES = {"C1 CompilerThre", "C2 CompilerThre"};

  private final Path proc;
  private final Map<Long, Boolean> isCompiler = new HashMap<>();   // tid -> named as a compiler thread
  private final Map<Long, Long> lastTicks = new HashMap<>();       // compiler tid -> CPU ticks last read
  private Set<Long> lastPids = Set.of();

  CompilerThreads(Path proc) {
    this.proc = proc;
  }

  /** On this machine's /proc, or null where there is none (not Linux). */
  static CompilerThreads ofThisMachine() {
    final Path proc = Path.of("/proc");
    return Files.isDirectory(proc.resolve("self/task")) ? new CompilerThreads(proc) : null;
  }

  /**
   * The CPU ms the compiler threads of {@code pids} used since the previous call, or -1 when none
   * of them has a compiler thread (a native process, or one that exited). A process seen for the
   * first time counts 0: its threads' earlier CPU is before the interval; a compiler thread new in
   * a process seen before counts whole: it started within the interval.
   */
  long growthMs(List<Long> pids) {
    long ms = 0;
    boolean any = false;
    final Set<Long> live = new HashSet<>();
    final Map<Long, Long> read = new HashMap<>();
    for (long pid : pids) {
      try (DirectoryStream<Path> threads = Files.newDirectoryStream(proc.resolve(Long.toString(pid)).resolve("task"))) {
        for (Path thread : threads) {
          final long tid;
          try {
            tid = Long.parseLong(thread.getFileName().toString());
          }
          catch (NumberFormatException e) {
            continue;
          }
          live.add(tid);
          if (!isCompiler.computeIfAbsent(tid, t -> named(thread))) {
            continue;
          }
          final long ticks = cpuTicks(thread);
          if (ticks < 0) {
            continue;   // ended while we looked
          }
          any = true;
          read.put(tid, ticks);
          final Long before = lastTicks.get(tid);
          if (before != null && ticks >= before) {
            ms += (ticks - before) * MS_PER_TICK;
          }
          else if (before == null && lastPids.contains(pid)) {
            ms += ticks * MS_PER_TICK;
          }
        }
      }
      catch (IOException e) {
        // the process is gone
      }
    }
    // Names are kept for live threads only: a tid may come back as another thread.
    isCompiler.keySet().retainAll(live);
    lastTicks.clear();
    lastTicks.putAll(read);
    lastPids = Set.copyOf(pids);
    return any ? ms : -1;
  }

  private static boolean named(Path thread) {
    try {
      final String comm = Files.readString(thread.resolve("comm"), StandardCharsets.UTF_8).strip();
      for (String prefix : PREFIXES) {
        if (comm.startsWith(prefix)) {
          return true;
        }
      }
      return false;
    }
    catch (IOException e) {
      return false;
    }
  }

  /** utime + stime of a thread, in ticks; -1 when it cannot be read. */
  private static long cpuTicks(Path thread) {
    try {
      final String stat = Files.readString(thread.resolve("stat"), StandardCharsets.UTF_8);
      // The name, in parentheses, may hold spaces: the fields start after its last ')'.
      final String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
    }
    catch (IOException | RuntimeException e) {
      return -1;
    }
  }
}
