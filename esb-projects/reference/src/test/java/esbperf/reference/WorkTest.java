package esbperf.reference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class WorkTest {

    @Test
    void theFactorFallsLinearlyOverTheWarmUpThenStepsAtItsTime() {
        Work.Settings s = new Work.Settings(1000, 1.5, 100, 300, 2);
        assertEquals(1.5, s.factorAt(0), 1e-12);
        assertEquals(1.25, s.factorAt(50), 1e-12);
        assertEquals(1.0, s.factorAt(100), 1e-12);
        assertEquals(1.0, s.factorAt(299.9), 1e-12);
        assertEquals(2.0, s.factorAt(300), 1e-12);
        assertEquals(1250, s.roundsAt(50));
        assertEquals(1500, s.roundsAt(-1));   // before the first request: what it would get
        Work.Settings flat = new Work.Settings(700, 1, 0, 0, 1);
        assertEquals(700, flat.roundsAt(0));
        assertEquals(700, flat.roundsAt(1e6));
    }

    @Test
    void theWorkIsDoneAndItsResultDependsOnEveryRound() {
        long[] a = Work.buffer();
        long[] b = Work.buffer();
        long once = Work.run(a, 1);
        long twice = Work.run(b, 2);
        assertNotEquals(once, twice);
        assertEquals(Work.run(Work.buffer(), 3), Work.run(Work.buffer(), 3));
    }

    @Test
    void optionsAreCheckedInOneLine() {
        ReferenceOptions o = ReferenceOptions.parse("--host", "127.0.0.1", "--port", "18330", "--ws1", "http://127.0.0.1:1",
                "--ws2", "http://[::1]:2", "--ws3", "http://h:3", "--work", "1100", "--warmup-factor", "1.25");
        assertEquals("[::1]:2", o.backends().get("ws2").hostHeader());
        assertEquals("::1", o.backends().get("ws2").host());
        assertEquals(1100, o.work().work());
        assertEquals(1.25, o.work().warmupFactor());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> ReferenceOptions.parse(
                "--host", "h", "--port", "1", "--ws1", "http://a:1", "--ws2", "http://a:1", "--ws3", "http://a:1", "--work", "-3"));
        assertTrue(bad.getMessage().startsWith("--work must be a whole number"), bad.getMessage());
    }
}
