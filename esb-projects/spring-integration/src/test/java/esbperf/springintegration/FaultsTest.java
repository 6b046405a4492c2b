package esbperf.springintegration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;

import org.apache.hc.client5.http.ConnectTimeoutException;
import org.apache.hc.core5.http.NoHttpResponseException;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.messaging.MessageHandlingException;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.GenericMessage;
import org.springframework.web.client.ResourceAccessException;

class FaultsTest {

    /** As a flow sees a back-end failure: the outbound gateway's exception around RestTemplate's. */
    private static Throwable backendFailure(Throwable io) {
        return new MessagingException("gateway", new MessageHandlingException(new GenericMessage<>("x"),
                "HTTP request execution failed", new ResourceAccessException("I/O error", (java.io.IOException) io)));
    }

    @Test
    void timeoutsAre504() {
        assertEquals(HttpStatus.GATEWAY_TIMEOUT, Faults.statusFor(backendFailure(new SocketTimeoutException("Read timed out"))));
    }

    @Test
    void unreachableBackEndsAre502() {
        assertEquals(HttpStatus.BAD_GATEWAY, Faults.statusFor(backendFailure(new ConnectException("Connection refused"))));
        assertEquals(HttpStatus.BAD_GATEWAY, Faults.statusFor(backendFailure(new SocketException("Connection reset"))));
        assertEquals(HttpStatus.BAD_GATEWAY, Faults.statusFor(backendFailure(new NoHttpResponseException("no answer"))));
        ConnectTimeoutException connect = new ConnectTimeoutException("Connect timed out");
        connect.initCause(new SocketTimeoutException("Connect timed out"));
        assertEquals(HttpStatus.BAD_GATEWAY, Faults.statusFor(backendFailure(connect)));
    }

    @Test
    void everythingElseIs500() {
        assertEquals(HttpStatus.INTERNAL_SERVER_ERROR, Faults.statusFor(new MessagingException("failed to parse")));
        assertEquals(HttpStatus.INTERNAL_SERVER_ERROR, Faults.statusFor(new IllegalStateException(new SocketTimeoutException())));
    }

    @Test
    void summaryIsOneLine() {
        String line = Faults.summary(new MessagingException("outer", new IllegalStateException("a\n  b\r\nc")));
        assertFalse(line.contains("\n") || line.contains("\r"));
        assertEquals("java.lang.IllegalStateException: a b c", line);
    }
}
