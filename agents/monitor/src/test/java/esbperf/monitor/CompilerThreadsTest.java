package esbperf.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CompilerThreadsTest {

  @TempDir
  Path proc;

  /** A thread of process `pid` in the fake /proc: its name and its user and system ticks. */
  private void thread(long pid, long tid, String name, long user, long system) throws IOException {
    final Path task = proc.resolve(pid + "/task/" + tid);
    Files.createDirectories(task);
    Files.writeString(task.resolve("comm"), name + "\n");
    // pid (comm) state, then fields 4..; utime and stime are the 14th and 15th.
    Files.writeString(task.resolve("stat"), tid + " (" + name + ") S 1 1 1 0 -1 4194624 0 0 0 0 "
        + user + " " + system + " 0 0 20 0 30 0 100 0 0\n");
  }

  @Test
  void countsOnlyTheCompilerThreadsGrowthSinceTheLastReading() throws IOException {
    thread(40, 40, "java", 500, 0);
    thread(40, 41, "C2 CompilerThre", 100, 10);
    thread(40, 42, "C1 CompilerThre", 50, 0);
    thread(40, 43, "worker (busy)", 900, 0);   // a name with spaces and parentheses
    final CompilerThreads threads = new CompilerThreads(proc);
    assertEquals(0, threads.growthMs(List.of(40L)), "a first reading counts nothing");
    thread(40, 41, "C2 CompilerThre", 130, 10);
    thread(40, 42, "C1 CompilerThre", 55, 0);
    thread(40, 43, "worker (busy)", 2000, 0);
    assertEquals((30 + 5) * CompilerThreads.MS_PER_TICK, threads.growthMs(List.of(40L)));
  }

  @Test
  void aCompilerThreadStartedOrStoppedInBetweenNeverCountsBackwards() throws IOException {
    thread(40, 41, "C2 CompilerThre", 100, 0);
    final CompilerThreads threads = new CompilerThreads(proc);
    threads.growthMs(List.of(40L));
    thread(40, 44, "C2 CompilerThre", 7, 0);   // HotSpot added a compiler thread: its whole CPU is new
    assertEquals(7 * CompilerThreads.MS_PER_TICK, threads.growthMs(List.of(40L)));
    Files.walk(proc.resolve("40/task/41")).sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    thread(40, 44, "C2 CompilerThre", 9, 0);
    assertEquals(2 * CompilerThreads.MS_PER_TICK, threads.growthMs(List.of(40L)));
  }

  @Test
  void aProcessWithoutCompilerThreadsReadsNone() throws IOException {
    thread(50, 50, "nginx", 100, 0);
    final CompilerThreads threads = new CompilerThreads(proc);
    assertEquals(-1, threads.growthMs(List.of(50L)));
    assertEquals(-1, threads.growthMs(List.of(51L)), "a process that is gone");
  }
}
