package esbperf.echo;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.util.Locale;

/**
 * The HTTP rules both runtimes share: the routing header, the body-size limit and reading a
 * request body (fixed length or chunked) without ever holding more than the limit.
 */
public final class Bodies {

    /** On every answer, so routing can be checked even when the body is an unchanged echo. */
    public static final String BACKEND_HEADER = "X-Echo-Backend";
    /** Names the runtime (jaxws, cxf, lean) on every answer too, so a run can record what answered. */
    public static final String RUNTIME_HEADER = "X-Echo-Runtime";
    /** A marker for "no body" (a GET): neither Content-Length nor chunked. */
    public static final long NO_BODY = 0;
    /** A marker for a chunked body, whose length is known only once read. */
    public static final long CHUNKED = -1;

    private Bodies() {
    }

    /** Thrown when a body is longer than the limit; the runtimes answer 413. */
    public static final class TooLarge extends IOException {
        public TooLarge(long limit) {
            super("request body larger than " + limit + " bytes");
        }
    }

    /** The body length the headers announce: Content-Length, CHUNKED, or NO_BODY. */
    public static long declaredLength(String contentLength, String transferEncoding) {
        if (transferEncoding != null && transferEncoding.toLowerCase(Locale.ROOT).contains("chunked")) {
            return CHUNKED;
        }
        if (contentLength == null) {
            return NO_BODY;
        }
        try {
            return Long.parseLong(contentLength.trim());
        } catch (NumberFormatException e) {
            return NO_BODY;  // both servers refuse a malformed Content-Length before we see it
        }
    }

    /**
     * Reads the whole body. A chunked body over the limit is still read to its end (up to
     * the limit again) before TooLarge, so the client gets the 413 instead of a reset.
     */
    public static byte[] read(InputStream in, long declared, long limit) throws IOException {
        if (declared > limit) {
            throw new TooLarge(limit);
        }
        if (declared >= 0) {
            byte[] body = in.readNBytes((int) declared);
            if (body.length != declared) {
                throw new EOFException("request body ended after " + body.length + " of " + declared + " bytes");
            }
            return body;
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(8192);
        byte[] buffer = new byte[8192];
        long total = 0;
        for (int n; (n = in.read(buffer)) != -1; ) {
            total += n;
            if (total <= limit) {
                out.write(buffer, 0, n);
            } else if (total > 2 * limit) {
                break;
            }
        }
        if (total > limit) {
            throw new TooLarge(limit);
        }
        return out.toByteArray();
    }
}
