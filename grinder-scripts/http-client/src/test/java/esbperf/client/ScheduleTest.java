package esbperf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ScheduleTest {

  /** The due offsets (ns after the first ticket) of the first n tickets. */
  private static long[] dues(Schedule schedule, int n) {
    final long[] out = new long[n];
    final long t0 = schedule.take();
    out[0] = 0;
    for (int i = 1; i < n; i++) {
      out[i] = schedule.take() - t0;
    }
    return out;
  }

  @Test
  void uniformArrivalsAreEvenlySpaced() {
    final long[] due = dues(new Schedule(1000, 1000), 100);
    for (int i = 1; i < due.length; i++) {
      assertEquals(1_000_000, due[i] - due[i - 1], 1);
    }
  }

  @Test
  void poissonArrivalsHaveExponentialGapsAtTheRate() {
    final int n = 50_000;
    final long[] due = dues(new Schedule(500, 1000, true, 42), n);
    double sum = 0;
    double squares = 0;
    for (int i = 1; i < n; i++) {
      final double gap = due[i] - due[i - 1];
      assertTrue(gap >= 0);
      sum += gap;
      squares += gap * gap;
    }
    final double mean = sum / (n - 1);
    final double sd = Math.sqrt(squares / (n - 1) - mean * mean);
    assertEquals(2_000_000, mean, 2_000_000 * 0.02, "mean gap: 1 / rate");
    assertEquals(1.0, sd / mean, 0.03, "coefficient of variation of an exponential: 1");
  }

  @Test
  void theSameSeedGivesTheSameScheduleAndAnotherSeedAnother() {
    final long[] a = dues(new Schedule(200, 1000, true, 7), 1000);
    final long[] b = dues(new Schedule(200, 1000, true, 7), 1000);
    final long[] c = dues(new Schedule(200, 1000, true, 8), 1000);
    assertEquals(java.util.Arrays.toString(a), java.util.Arrays.toString(b));
    assertNotEquals(java.util.Arrays.toString(a), java.util.Arrays.toString(c));
  }

  @Test
  void ticketsDueByATimeAreCountedByTheirDrawnDueTimes() {
    final Schedule schedule = new Schedule(100, 1000, true, 3);
    assertTrue(schedule.isPoisson());
    assertFalse(new Schedule(100, 1000).isPoisson());
    assertEquals(0, schedule.getDue(System.nanoTime()));
    final long t0 = schedule.take();
    final long[] due = new long[200];
    for (int i = 1; i < due.length; i++) {
      due[i] = schedule.take() - t0;
    }
    for (int i = 0; i < due.length - 1; i++) {
      assertEquals(i + 1, schedule.getDue(t0 + due[i]), "ticket " + i + " is due at its own time");
      if (due[i + 1] > due[i]) {
        assertEquals(i + 1, schedule.getDue(t0 + due[i + 1] - 1));
      }
    }
  }
}
