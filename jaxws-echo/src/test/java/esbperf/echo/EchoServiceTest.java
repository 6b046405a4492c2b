package esbperf.echo;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class EchoServiceTest {

    @Test
    void answersIdMessageAndTheBackendName() {
        EchoService service = new EchoService(EchoOptions.parse("--id", "ws2", "--port", "1"));
        assertEquals("7 hello [echoed by ws2]", service.echoMessage(7, "hello"));
    }

    @Test
    void delaysTheAnswerWhenTold() {
        EchoService service = new EchoService(EchoOptions.parse("--id", "ws1", "--port", "1", "--delay-ms", "50"));
        long start = System.nanoTime();
        service.echoMessage(1, "x");
        assertTrue(System.nanoTime() - start >= 50_000_000L);
    }
}
