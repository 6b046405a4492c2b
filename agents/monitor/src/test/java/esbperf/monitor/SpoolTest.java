package esbperf.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SpoolTest {

  private static final long DAY_MS = 24L * 3600 * 1000;

  @TempDir
  Path dir;

  private final Map<List<Tick.Key>, List<Tick.Key>> known = new HashMap<>();

  private Tick tick(long time, double cpu) {
    final Tick.Builder b = new Tick.Builder();
    b.add("cpu.total", "", cpu);
    b.add("net.rx_bytes", "lo", 1234567890123L);
    return b.build(time, known);
  }

  private static String csv(Spool spool, long from, long to) throws IOException {
    final StringWriter out = new StringWriter();
    spool.between(from, to, out);
    return out.toString();
  }

  private static List<Long> times(String csv) {
    return csv.lines().skip(1).filter(l -> l.contains(",cpu.total,")).map(l -> Long.parseLong(l.split(",")[0])).toList();
  }

  private long spoolBytes() throws IOException {
    try (Stream<Path> files = Files.list(dir)) {
      return files.filter(p -> p.getFileName().toString().startsWith("samples-")).mapToLong(p -> p.toFile().length()).sum();
    }
  }

  private Path newestSegment() throws IOException {
    try (Stream<Path> files = Files.list(dir)) {
      return files.filter(p -> p.getFileName().toString().startsWith("samples-")).sorted().reduce((a, b) -> b).orElseThrow();
    }
  }

  @Test
  void servesHalfOpenWindowsAsCsvWithCountersAsIntegersAndOddSubjectsQuoted() throws Exception {
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 0)) {
      for (long t = 1000; t <= 5000; t += 1000) {
        spool.append(tick(t, t / 100.0 + 0.3456));
      }
      final Tick.Builder b = new Tick.Builder();
      b.add("proc.cpu", "Main,\"x\"\ttab\nline\\", 100.0);
      spool.append(b.build(6000, known));

      assertEquals(List.of(2000L, 3000L, 4000L), times(csv(spool, 2000, 5000)));
      assertEquals("time_ms,metric,subject,value\n"
          + "3000,cpu.total,,30.35\n"
          + "3000,net.rx_bytes,lo,1234567890123\n", csv(spool, 3000, 4000));
      assertEquals("time_ms,metric,subject,value\n"
          + "6000,proc.cpu,\"Main,\"\"x\"\"\ttab\nline\\\",100\n", csv(spool, 6000, 6001));
      final Spool.Summary summary = spool.summary();
      assertEquals(6, summary.ticks());
      assertEquals(1000L, summary.oldestMs());
      assertEquals(6000L, summary.newestMs());
    }
  }

  @Test
  void equalKeyListsAreShared() {
    assertSame(tick(1000, 1).keys(), tick(2000, 2).keys());
  }

  @Test
  void aReopenedSpoolServesWhatWasWrittenAndWritesANewSegment() throws Exception {
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 0)) {
      spool.append(tick(1000, 10));
      spool.append(tick(2000, 20));
    }
    final Path first = newestSegment();
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 3000)) {
      assertEquals(List.of(1000L, 2000L), times(csv(spool, 0, 10_000)));
      spool.append(tick(3000, 30));
      assertEquals(List.of(1000L, 2000L, 3000L), times(csv(spool, 0, 10_000)));
      assertTrue(newestSegment().compareTo(first) > 0, "a restart starts a segment of its own");
    }
  }

  @Test
  void aLineCutShortOrGarbledIsNeverServed() throws Exception {
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 0)) {
      spool.append(tick(1000, 10));
      spool.append(tick(2000, 20));
    }
    // As a kill mid-write (or a power loss) leaves it: a whole line that parses, one that does
    // not (a value lost), zeros, and a last line without its newline.
    Files.writeString(newestSegment(), "T\t2500\t0\t25\t99\n" + "T\t2600\t0\t26\n" + "\0\0\0\0\n"
        + "T\t3000\t0\t30\t1234567890123", StandardCharsets.UTF_8, StandardOpenOption.APPEND);
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 4000)) {
      assertEquals(List.of(1000L, 2000L, 2500L), times(csv(spool, 0, 10_000)));
      assertEquals(3, spool.summary().ticks());
      spool.append(tick(4000, 40));   // not glued behind the cut line: it goes to a new segment
      assertEquals(List.of(1000L, 2000L, 2500L, 4000L), times(csv(spool, 0, 10_000)));
    }
  }

  @Test
  void staysWithinItsSizeDroppingTheOldestFirst() throws Exception {
    final long max = 4096;
    try (Spool spool = Spool.open(dir, max, DAY_MS, 0)) {
      for (long t = 1000; t <= 300_000; t += 1000) {
        spool.append(tick(t, 50));
        assertTrue(spoolBytes() <= max, spoolBytes() + " bytes at " + t);
      }
      final List<Long> kept = times(csv(spool, 0, Long.MAX_VALUE));
      assertEquals(300_000L, kept.get(kept.size() - 1));
      assertTrue(kept.size() > 20 && kept.get(0) > 100_000, kept.toString());
      for (int i = 1; i < kept.size(); i++) {
        assertEquals(kept.get(i - 1) + 1000, kept.get(i), "the newest ticks, none missing");
      }
      assertEquals(spoolBytes(), spool.summary().bytes());
    }
  }

  @Test
  void dropsSegmentsOlderThanItsAge() throws Exception {
    final long maxAge = 60_000;
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, maxAge, 0)) {
      for (long t = 1000; t <= 3_000_000; t += 1000) {
        spool.append(tick(t, 50));
      }
      // Whole segments go: the oldest tick kept is at most one segment older than the age.
      final long oldest = spool.summary().oldestMs();
      assertTrue(oldest >= 3_000_000 - maxAge - Spool.SEGMENT_TICKS * 1000L && oldest <= 3_000_000 - maxAge, "" + oldest);
    }
    // The age applies to what an earlier monitor left as well.
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, maxAge, 10_000_000)) {
      assertEquals(0, spool.summary().ticks());
    }
  }

  @Test
  void aSecondMonitorCannotUseTheSameFolder() throws Exception {
    try (Spool spool = Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 0)) {
      final Spool.InUse e = assertThrows(Spool.InUse.class, () -> Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 0));
      assertTrue(e.getMessage().contains("in use by another monitor (pid " + ProcessHandle.current().pid() + ")"),
          e.getMessage());
    }
    Spool.open(dir, Spool.DEFAULT_MAX_BYTES, DAY_MS, 0).close();   // free again once closed
  }

  @Test
  void escapesRoundTrip() {
    final List<String> texts = new ArrayList<>(List.of("", "plain", "a\tb", "a\\tb", "x\ny\r", "\\", "end\\"));
    for (String text : texts) {
      final StringBuilder out = new StringBuilder();
      Spool.escape(text, out);
      assertTrue(out.indexOf("\t") < 0 && out.indexOf("\n") < 0, out.toString());
      assertEquals(text, Spool.unescape(out.toString()));
    }
  }
}
