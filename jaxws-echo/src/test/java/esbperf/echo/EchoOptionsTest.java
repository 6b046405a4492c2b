package esbperf.echo;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class EchoOptionsTest {

    @Test
    void defaultsToLoopbackTheRiAndSixteenMegabytes() {
        EchoOptions options = EchoOptions.parse("--id", "ws1", "--port", "18001");
        assertEquals("127.0.0.1", options.host());
        assertEquals("jaxws", options.runtime());
        assertEquals(0, options.delayMs());
        assertEquals(16L * 1024 * 1024, options.maxBodyBytes());
        assertEquals("http://127.0.0.1:18001", options.baseUrl());
    }

    @Test
    void readsEveryOption() {
        EchoOptions options = EchoOptions.parse("--id", "ws3", "--host", "::1", "--port", "9", "--runtime", "cxf",
                "--delay-ms", "25", "--max-body-mb", "2", "--threads", "50");
        assertEquals("cxf", options.runtime());
        assertEquals(25, options.delayMs());
        assertEquals(2L * 1024 * 1024, options.maxBodyBytes());
        assertEquals(50, options.threads());
        assertEquals("http://[::1]:9", options.baseUrl());
        assertEquals("lean", EchoOptions.parse("--id", "ws1", "--port", "9", "--runtime", "lean").runtime());
    }

    @Test
    void refusesBadInputWithTheOptionNamed() {
        assertMessage("--port is required", "--id", "ws1");
        assertMessage("--id must be", "--id", "ws 1", "--port", "1");
        assertMessage("--runtime must be one of", "--id", "ws1", "--port", "1", "--runtime", "axis");
        assertMessage("--delay-ms must be a whole number", "--id", "ws1", "--port", "1", "--delay-ms", "x");
        assertMessage("--max-body-mb must be 1-1024", "--id", "ws1", "--port", "1", "--max-body-mb", "0");
        assertMessage("unknown option --verbose", "--id", "ws1", "--port", "1", "--verbose", "yes");
        assertMessage("unexpected argument", "--id", "ws1", "--port");
    }

    private static void assertMessage(String expected, String... args) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> EchoOptions.parse(args));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }
}
