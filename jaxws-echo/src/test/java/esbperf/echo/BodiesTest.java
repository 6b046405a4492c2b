package esbperf.echo;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.EOFException;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class BodiesTest {

    @Test
    void declaredLengthPrefersChunkedAndDefaultsToNoBody() {
        assertEquals(42, Bodies.declaredLength("42", null));
        assertEquals(Bodies.CHUNKED, Bodies.declaredLength(null, "Chunked"));
        assertEquals(Bodies.CHUNKED, Bodies.declaredLength("42", "gzip, chunked"));
        assertEquals(Bodies.NO_BODY, Bodies.declaredLength(null, null));
    }

    @Test
    void readsAFixedLengthOrChunkedBodyUpToTheLimit() throws Exception {
        byte[] body = new byte[10_000];
        for (int i = 0; i < body.length; i++) {
            body[i] = (byte) i;
        }
        assertArrayEquals(body, Bodies.read(new ByteArrayInputStream(body), body.length, body.length));
        assertArrayEquals(body, Bodies.read(new ByteArrayInputStream(body), Bodies.CHUNKED, body.length));
    }

    @Test
    void refusesBodiesOverTheLimit() {
        byte[] body = new byte[1001];
        assertThrows(Bodies.TooLarge.class, () -> Bodies.read(new ByteArrayInputStream(body), 1001, 1000));
        assertThrows(Bodies.TooLarge.class, () -> Bodies.read(new ByteArrayInputStream(body), Bodies.CHUNKED, 1000));
    }

    @Test
    void aBodyShorterThanAnnouncedIsAnError() {
        assertThrows(EOFException.class, () -> Bodies.read(new ByteArrayInputStream(new byte[5]), 10, 100));
    }
}
