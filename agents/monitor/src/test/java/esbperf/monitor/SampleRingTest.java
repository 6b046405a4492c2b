package esbperf.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.io.StringWriter;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

class SampleRingTest {

  private final Map<List<Tick.Key>, List<Tick.Key>> known = new HashMap<>();

  private Tick tick(long time, double cpu) {
    final Tick.Builder b = new Tick.Builder();
    b.add("cpu.total", "", cpu);
    b.add("net.rx_bytes", "lo", 1234567890123L);
    return b.build(time, known);
  }

  @Test
  void keepsOnlyTheNewestTicksAndSelectsHalfOpenWindows() {
    final SampleRing ring = new SampleRing(3);
    for (long t = 1000; t <= 5000; t += 1000) {
      ring.add(tick(t, t / 100.0));
    }
    assertEquals(3, ring.size());
    assertEquals(3000, ring.oldest().timeMs());
    assertEquals(List.of(3000L, 4000L), ring.between(2000, 5000).stream().map(Tick::timeMs).toList());
  }

  @Test
  void equalKeyListsAreShared() {
    assertSame(tick(1000, 1).keys(), tick(2000, 2).keys());
  }

  @Test
  void writesCountersAsIntegersAndQuotesOddSubjects() throws Exception {
    final Tick.Builder b = new Tick.Builder();
    b.add("cpu.total", "", 12.3456);
    b.add("net.rx_bytes", "lo", 1234567890123L);
    b.add("proc.cpu", "Main,\"x\"", 100.0);
    final StringWriter out = new StringWriter();
    SampleCsv.write(List.of(b.build(7, known)), out);
    assertEquals("time_ms,metric,subject,value\n"
        + "7,cpu.total,,12.35\n"
        + "7,net.rx_bytes,lo,1234567890123\n"
        + "7,proc.cpu,\"Main,\"\"x\"\"\",100\n", out.toString());
  }
}
