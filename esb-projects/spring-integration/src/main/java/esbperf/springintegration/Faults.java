package esbperf.springintegration;

import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;

import org.apache.hc.client5.http.ConnectTimeoutException;
import org.springframework.http.HttpStatus;
import org.springframework.integration.http.HttpHeaders;
import org.springframework.integration.support.MessageBuilder;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.web.client.ResourceAccessException;

/**
 * What the client gets when a request fails: an HTTP error with a short SOAP fault (or, for a
 * missing X-Route-To, a short text), never a hang and never a 200.
 */
final class Faults {

    static final String SOAP = "text/xml; charset=UTF-8";
    static final String TEXT = "text/plain; charset=UTF-8";

    private Faults() {
    }

    static byte[] soapFault(String code, String text) {
        return ("<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\"><soapenv:Body>"
                + "<soapenv:Fault><faultcode>soapenv:" + code + "</faultcode><faultstring>" + text
                + "</faultstring></soapenv:Fault></soapenv:Body></soapenv:Envelope>").getBytes(StandardCharsets.UTF_8);
    }

    static final byte[] TIMED_OUT = soapFault("Server", "the back end did not answer within the timeout");
    static final byte[] UNREACHABLE = soapFault("Server", "the back end cannot be reached");
    static final byte[] NOT_PROCESSED = soapFault("Server", "the request could not be processed");
    static final byte[] UNKNOWN_ID = soapFault("Client", "no back end for this id (expected 1, 2 or 3)");
    static final byte[] UNKNOWN_ROUTE = "the header X-Route-To must be ws1, ws2 or ws3\n".getBytes(StandardCharsets.UTF_8);

    /**
     * The status for a failed request: 504 when the back end did not answer in time, 502 when
     * it could not be reached (refused, reset, closed without an answer, no connection in
     * time), 500 for everything else (not XML, a DOCTYPE, bad JSON, ...).
     */
    static HttpStatus statusFor(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ResourceAccessException) {   // an I/O error talking to a back end
                return timedOut(t) ? HttpStatus.GATEWAY_TIMEOUT : HttpStatus.BAD_GATEWAY;
            }
        }
        return HttpStatus.INTERNAL_SERVER_ERROR;
    }

    private static boolean timedOut(Throwable ioFailure) {
        boolean readTimeout = false;
        for (Throwable t = ioFailure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ConnectTimeoutException) {
                return false;   // could not connect in time: unreachable
            }
            readTimeout |= t instanceof SocketTimeoutException;
        }
        return readTimeout;
    }

    static byte[] bodyFor(HttpStatus status) {
        return switch (status) {
            case GATEWAY_TIMEOUT -> TIMED_OUT;
            case BAD_GATEWAY -> UNREACHABLE;
            default -> NOT_PROCESSED;
        };
    }

    /** The innermost cause, for a one-line log entry. */
    static String summary(Throwable failure) {
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String text = root.getClass().getName() + ": " + root.getMessage();
        return text.replaceAll("\\s+", " ");   // one line, whatever the parser wrote
    }

    /** The answer a flow hands the inbound gateway. */
    static Message<byte[]> answer(HttpStatus status, String contentType, byte[] body) {
        return MessageBuilder.withPayload(body)
                .setHeader(HttpHeaders.STATUS_CODE, status)
                .setHeader(MessageHeaders.CONTENT_TYPE, contentType)
                .build();
    }
}
