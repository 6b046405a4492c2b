package esbperf.client;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Reads HTTP answers off one connection. It parses bytes in its own buffer (no per-byte
 * synchronised reads, no String per header line) because everything it does before the
 * answer's last byte arrives is inside the measured time; headers are kept as raw bytes and
 * looked up only when asked ({@link Response#header}).
 */
final class AnswerReader {

  static final int MAX_HEAD = 64 * 1024;
  private static final int BUFFER = 16 * 1024;
  private static final byte[] CONTENT_LENGTH = ascii("content-length");
  private static final byte[] TRANSFER_ENCODING = ascii("transfer-encoding");
  private static final byte[] CONNECTION = ascii("connection");
  private static final byte[] CHUNKED = ascii("chunked");
  private static final byte[] CLOSE = ascii("close");
  private static final byte[] KEEP_ALIVE = ascii("keep-alive");
  private static final byte[] HTTP_1_0 = ascii("HTTP/1.0");

  private final InputStream in;
  private byte[] buf = new byte[BUFFER];
  private int pos;   // first byte not consumed yet
  private int lim;   // end of the bytes read so far
  private int lineStart;   // where the line lineLength() consumed last starts

  AnswerReader(InputStream in) {
    this.in = in;
  }

  /** One whole answer; its clock runs from {@code startNanos} to the moment its last byte was read. */
  Response read(long startNanos) throws IOException {
    if (pos == lim && fill() < 0) {
      throw new Response.NoAnswer("connection closed by the server before answering");
    }
    final int headLength = headLength();
    final byte[] head = Arrays.copyOfRange(buf, pos, pos + headLength);
    pos += headLength;
    final int[] lines = lineStarts(head);
    final int status = status(head, lines);
    long contentLength = -1;
    boolean chunked = false;
    Boolean connectionKeepsAlive = null;
    for (int i = 1; i + 1 < lines.length; i++) {
      final int start = lines[i];
      final int end = lineEnd(head, lines[i + 1]);
      final int colon = indexOf(head, (byte) ':', start, end);
      if (colon < 0) {
        continue;
      }
      if (nameIs(head, start, colon, CONTENT_LENGTH)) {
        contentLength = number(head, colon + 1, end);
      }
      else if (nameIs(head, start, colon, TRANSFER_ENCODING)) {
        chunked |= contains(head, colon + 1, end, CHUNKED);
      }
      else if (nameIs(head, start, colon, CONNECTION)) {
        if (contains(head, colon + 1, end, CLOSE)) {
          connectionKeepsAlive = Boolean.FALSE;
        }
        else if (contains(head, colon + 1, end, KEEP_ALIVE) && connectionKeepsAlive == null) {
          connectionKeepsAlive = Boolean.TRUE;
        }
      }
    }
    final byte[] body;
    final boolean delimited;
    if (status / 100 == 1 || status == 204 || status == 304) {
      body = new byte[0];
      delimited = true;
    }
    else if (chunked) {
      body = chunked();
      delimited = true;
    }
    else if (contentLength >= 0) {
      if (contentLength > Integer.MAX_VALUE - 16) {
        throw new IOException("answer body too large: " + contentLength + " bytes");
      }
      body = new byte[(int) contentLength];
      readFully(body);
      delimited = true;
    }
    else {
      body = untilClosed();   // delimited by the server closing the connection
      delimited = false;
    }
    final long endNanos = System.nanoTime();
    final boolean http10 = startsWith(head, HTTP_1_0);
    final boolean keepsAlive = delimited && (connectionKeepsAlive != null ? connectionKeepsAlive : !http10);
    return new Response(status, head, lines, body, keepsAlive, startNanos, endNanos);
  }

  /** Length of the head (status line, headers, empty line) starting at pos; reads more as needed. */
  private int headLength() throws IOException {
    // Offsets relative to pos: a fill may move the unconsumed bytes to the buffer's start.
    int scan = 0;
    int line = 0;   // start of the current line
    while (true) {
      final int newline = indexOf(buf, (byte) '\n', pos + scan, lim);
      if (newline < 0) {
        scan = lim - pos;
        if (fill() < 0) {
          throw new EOFException("connection closed in the middle of the answer's head");
        }
        continue;
      }
      final int relative = newline - pos;
      final int length = relative - line;
      if (length == 0 || (length == 1 && buf[pos + line] == '\r')) {
        return relative + 1;
      }
      line = relative + 1;
      scan = line;
    }
  }

  /** Read at least one more byte into the buffer, keeping [pos, lim); -1 at the end of the stream. */
  private int fill() throws IOException {
    if (lim == buf.length) {
      if (pos > 0) {
        System.arraycopy(buf, pos, buf, 0, lim - pos);
        lim -= pos;
        pos = 0;
      }
      else if (buf.length >= MAX_HEAD) {
        throw new IOException("answer head or chunk line longer than " + MAX_HEAD + " bytes");
      }
      else {
        buf = Arrays.copyOf(buf, Math.min(MAX_HEAD, buf.length * 2));
      }
    }
    final int n = in.read(buf, lim, buf.length - lim);
    if (n > 0) {
      lim += n;
    }
    return n;
  }

  private void readFully(byte[] into) throws IOException {
    readFully(into, 0, into.length);
  }

  private void readFully(byte[] into, int off, int length) throws IOException {
    final int buffered = Math.min(length, lim - pos);
    System.arraycopy(buf, pos, into, off, buffered);
    pos += buffered;
    int n = buffered;
    while (n < length) {
      final int got = in.read(into, off + n, length - n);
      if (got < 0) {
        throw new EOFException("connection closed after " + n + " of " + length + " body bytes");
      }
      n += got;
    }
  }

  private byte[] chunked() throws IOException {
    byte[] out = new byte[4096];
    int length = 0;
    while (true) {
      final long size = chunkSize();
      if (size == 0) {
        while (lineLength() > 0) {
          // trailers: ignored
        }
        return Arrays.copyOf(out, length);
      }
      if (length + size > Integer.MAX_VALUE - 16) {
        throw new IOException("chunked answer too large");
      }
      if (length + size > out.length) {
        out = Arrays.copyOf(out, (int) Math.max(out.length * 2L, length + size));
      }
      readFully(out, length, (int) size);
      length += (int) size;
      if (lineLength() != 0) {
        throw new IOException("chunk not followed by CRLF");
      }
    }
  }

  private long chunkSize() throws IOException {
    final int length = lineLength();
    final int start = lineStart;
    long size = 0;
    int digits = 0;
    for (int i = start; i < start + length; i++) {
      final int d = Character.digit(buf[i], 16);
      if (d < 0) {
        if (buf[i] == ';' || buf[i] == ' ' || buf[i] == '\t') {
          break;
        }
        throw new IOException("bad chunk size: " + new String(buf, start, length, StandardCharsets.ISO_8859_1));
      }
      size = size * 16 + d;
      if (++digits > 8) {
        throw new IOException("chunk too large");
      }
    }
    if (digits == 0) {
      throw new IOException("bad chunk size line");
    }
    return size;
  }

  /**
   * Consume one line and return its length without CR LF; the line itself stays at
   * buf[lineStart, lineStart + length) until the next fill.
   */
  private int lineLength() throws IOException {
    int scan = 0;   // relative to pos, as in headLength
    while (true) {
      final int newline = indexOf(buf, (byte) '\n', pos + scan, lim);
      if (newline >= 0) {
        lineStart = pos;
        final int end = newline > pos && buf[newline - 1] == '\r' ? newline - 1 : newline;
        pos = newline + 1;
        return end - lineStart;
      }
      scan = lim - pos;
      if (fill() < 0) {
        throw new EOFException("connection closed in the middle of a chunked answer");
      }
    }
  }

  private byte[] untilClosed() throws IOException {
    byte[] out = Arrays.copyOfRange(buf, pos, Math.max(lim, pos + 4096));
    int length = lim - pos;
    pos = lim;
    while (true) {
      if (length == out.length) {
        out = Arrays.copyOf(out, out.length * 2);
      }
      final int n = in.read(out, length, out.length - length);
      if (n < 0) {
        return Arrays.copyOf(out, length);
      }
      length += n;
    }
  }

  // --- byte helpers (shared with Response) ---------------------------------------------------

  static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.ISO_8859_1);
  }

  static int indexOf(byte[] b, byte c, int from, int to) {
    for (int i = from; i < to; i++) {
      if (b[i] == c) {
        return i;
      }
    }
    return -1;
  }

  /**
   * Start offsets of the head's lines: the status line, each header line, and last the empty
   * line that ends the head (so line i ends where line i + 1 starts).
   */
  static int[] lineStarts(byte[] head) {
    int count = 0;
    for (byte b : head) {
      if (b == '\n') {
        count++;
      }
    }
    final int[] starts = new int[count];
    int n = 1;
    for (int i = 0; i < head.length - 1; i++) {
      if (head[i] == '\n') {
        starts[n++] = i + 1;
      }
    }
    return starts;
  }

  /** End of the line that ends just before {@code nextLineStart}, without CR LF. */
  static int lineEnd(byte[] head, int nextLineStart) {
    int end = nextLineStart - 1;   // the '\n'
    if (end > 0 && head[end - 1] == '\r') {
      end--;
    }
    return end;
  }

  /** The header name in b[start, colon), trimmed, equals {@code lowerName} ignoring ASCII case. */
  static boolean nameIs(byte[] b, int start, int colon, byte[] lowerName) {
    int end = colon;
    while (end > start && (b[end - 1] == ' ' || b[end - 1] == '\t')) {
      end--;
    }
    if (end - start != lowerName.length) {
      return false;
    }
    for (int i = 0; i < lowerName.length; i++) {
      int c = b[start + i];
      if (c >= 'A' && c <= 'Z') {
        c += 'a' - 'A';
      }
      if (c != lowerName[i]) {
        return false;
      }
    }
    return true;
  }

  /** b[from, to) contains {@code lowerWord} ignoring ASCII case. */
  static boolean contains(byte[] b, int from, int to, byte[] lowerWord) {
    outer:
    for (int i = from; i + lowerWord.length <= to; i++) {
      for (int j = 0; j < lowerWord.length; j++) {
        int c = b[i + j];
        if (c >= 'A' && c <= 'Z') {
          c += 'a' - 'A';
        }
        if (c != lowerWord[j]) {
          continue outer;
        }
      }
      return true;
    }
    return false;
  }

  private static boolean startsWith(byte[] b, byte[] prefix) {
    return b.length >= prefix.length && Arrays.equals(b, 0, prefix.length, prefix, 0, prefix.length);
  }

  private static long number(byte[] b, int from, int to) throws IOException {
    long n = 0;
    int digits = 0;
    for (int i = from; i < to; i++) {
      final byte c = b[i];
      if (c >= '0' && c <= '9') {
        n = n * 10 + (c - '0');
        if (++digits > 18) {
          throw new IOException("Content-Length too large");
        }
      }
      else if (c != ' ' && c != '\t') {
        throw new IOException("bad Content-Length: " + new String(b, from, to - from, StandardCharsets.ISO_8859_1).trim());
      }
    }
    if (digits == 0) {
      throw new IOException("empty Content-Length");
    }
    return n;
  }

  private static int status(byte[] head, int[] lines) throws IOException {
    final int end = lines.length > 1 ? lineEnd(head, lines[1]) : lineEnd(head, head.length);
    final String statusLine = new String(head, 0, Math.max(0, end), StandardCharsets.ISO_8859_1);
    final int space = statusLine.indexOf(' ');
    if (!statusLine.startsWith("HTTP/") || space < 0) {
      throw new IOException("not an HTTP status line: " + statusLine);
    }
    int i = space;
    while (i < statusLine.length() && statusLine.charAt(i) == ' ') {
      i++;
    }
    int status = 0;
    int digits = 0;
    while (i < statusLine.length() && Character.isDigit(statusLine.charAt(i)) && digits < 4) {
      status = status * 10 + (statusLine.charAt(i++) - '0');
      digits++;
    }
    if (digits != 3 || (i < statusLine.length() && statusLine.charAt(i) != ' ')) {
      throw new IOException("bad HTTP status: " + statusLine);
    }
    return status;
  }
}
