package esbperf.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An HTTP answer read in full, with the time its exchange took. Getters are Jython
 * properties: r.status, r.text, r.length, r.micros. Headers stay raw bytes until asked for.
 */
public final class Response {

  private final int status;
  private final byte[] head;       // status line + headers + empty line, as received
  private final int[] lines;       // start of each line of head (AnswerReader.lineStarts)
  private final byte[] body;
  private final boolean keepsAlive;
  private final long startNanos;
  private final long endNanos;

  Response(int status, byte[] head, int[] lines, byte[] body, boolean keepsAlive, long startNanos, long endNanos) {
    this.status = status;
    this.head = head;
    this.lines = lines;
    this.body = body;
    this.keepsAlive = keepsAlive;
    this.startNanos = startNanos;
    this.endNanos = endNanos;
  }

  public int getStatus() {
    return status;
  }

  /** The header the echo back ends name themselves in (what the fast checks compare). */
  static final byte[] ECHO_BACKEND = AnswerReader.ascii("x-echo-backend");

  /** A header's value, whatever the case of its name (repeated headers joined by ", "); null if absent. */
  public String header(String name) {
    return header(AnswerReader.ascii(name.toLowerCase(java.util.Locale.ROOT)));
  }

  /** {@link #header(String)} by the name's lower-case ASCII bytes, made once by the caller. */
  String header(byte[] lower) {
    String value = null;
    for (int i = 1; i + 1 < lines.length; i++) {
      final int start = lines[i];
      final int end = AnswerReader.lineEnd(head, lines[i + 1]);
      final int colon = AnswerReader.indexOf(head, (byte) ':', start, end);
      if (colon > start && AnswerReader.nameIs(head, start, colon, lower)) {
        final String v = new String(head, colon + 1, end - colon - 1, StandardCharsets.ISO_8859_1).trim();
        value = value == null ? v : value + ", " + v;
      }
    }
    return value;
  }

  public byte[] getBody() {
    return body;
  }

  public int getLength() {
    return body.length;
  }

  public String getText() {
    return new String(body, StandardCharsets.UTF_8);
  }

  public boolean bodyEquals(byte[] expected) {
    return Arrays.equals(body, expected);
  }

  /** The body holds {@code part} somewhere (a byte search, no decoding). */
  public boolean bodyContains(byte[] part) {
    final int n = part.length;
    if (n == 0) {
      return true;
    }
    final byte first = part[0];
    for (int i = 0, last = body.length - n; i <= last; i++) {
      if (body[i] == first && Arrays.equals(body, i, i + n, part, 0, n)) {
        return true;
      }
    }
    return false;
  }

  /** System.nanoTime() right before the request's first byte was written (or its connection opened). */
  public long getStartNanos() {
    return startNanos;
  }

  /** System.nanoTime() right after the answer's last byte was read. */
  public long getEndNanos() {
    return endNanos;
  }

  /** The exchange's time in whole microseconds (truncated). */
  public long getMicros() {
    return (endNanos - startNanos) / 1000;
  }

  boolean keepsAlive() {
    return keepsAlive;
  }

  /** The connection ended before any byte of an answer: the request can safely be sent again. */
  static final class NoAnswer extends IOException {
    NoAnswer(String message) {
      super(message);
    }
  }
}
