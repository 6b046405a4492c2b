package esbperf.client;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/** An HTTP answer read in full. Getters are Jython properties: r.status, r.text, r.length. */
public final class Response {

  private static final int MAX_LINE = 64 * 1024;

  private final String version;
  private final int status;
  private final Map<String, String> headers;
  private final byte[] body;

  private Response(String version, int status, Map<String, String> headers, byte[] body) {
    this.version = version;
    this.status = status;
    this.headers = headers;
    this.body = body;
  }

  public int getStatus() {
    return status;
  }

  /** A header's value, whatever the case of its name; null if absent. */
  public String header(String name) {
    return headers.get(name.toLowerCase(Locale.ROOT));
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

  boolean keepsAlive() {
    final String connection = header("connection");
    if (connection != null) {
      return !connection.equalsIgnoreCase("close");
    }
    return !"HTTP/1.0".equals(version) && (header("content-length") != null || isChunked());
  }

  private boolean isChunked() {
    final String te = header("transfer-encoding");
    return te != null && te.toLowerCase(Locale.ROOT).contains("chunked");
  }

  /** The connection ended before any byte of an answer: the request can safely be sent again. */
  static final class NoAnswer extends IOException {
    NoAnswer(String message) {
      super(message);
    }
  }

  static Response read(InputStream in) throws IOException {
    final int first = in.read();
    if (first == -1) {
      throw new NoAnswer("connection closed by the server before answering");
    }
    final String statusLine = (char) first + line(in);
    final String[] parts = statusLine.split(" ", 3);
    if (parts.length < 2 || !parts[0].startsWith("HTTP/")) {
      throw new IOException("not an HTTP status line: " + statusLine);
    }
    final int status;
    try {
      status = Integer.parseInt(parts[1]);
    }
    catch (NumberFormatException e) {
      throw new IOException("bad HTTP status: " + statusLine);
    }
    final Map<String, String> headers = new HashMap<>();
    for (String h = line(in); !h.isEmpty(); h = line(in)) {
      final int colon = h.indexOf(':');
      if (colon > 0) {
        headers.merge(h.substring(0, colon).trim().toLowerCase(Locale.ROOT),
                      h.substring(colon + 1).trim(), (a, b) -> a + ", " + b);
      }
    }
    final Response head = new Response(parts[0], status, headers, new byte[0]);
    final byte[] body;
    if (status / 100 == 1 || status == 204 || status == 304) {
      body = new byte[0];
    }
    else if (head.isChunked()) {
      body = chunked(in);
    }
    else if (head.header("content-length") != null) {
      body = exactly(in, Integer.parseInt(head.header("content-length")));
    }
    else {
      body = in.readAllBytes();   // delimited by the server closing the connection
    }
    return new Response(parts[0], status, headers, body);
  }

  private static byte[] chunked(InputStream in) throws IOException {
    final ByteArrayOutputStream out = new ByteArrayOutputStream();
    while (true) {
      final String sizeLine = line(in);
      final int semicolon = sizeLine.indexOf(';');
      final int size;
      try {
        size = Integer.parseInt((semicolon < 0 ? sizeLine : sizeLine.substring(0, semicolon)).trim(), 16);
      }
      catch (NumberFormatException e) {
        throw new IOException("bad chunk size: " + sizeLine);
      }
      if (size == 0) {
        while (!line(in).isEmpty()) {
          // trailers: ignored
        }
        return out.toByteArray();
      }
      out.write(exactly(in, size));
      line(in);   // CRLF after the chunk
    }
  }

  private static byte[] exactly(InputStream in, int n) throws IOException {
    final byte[] b = in.readNBytes(n);
    if (b.length != n) {
      throw new EOFException("connection closed after " + b.length + " of " + n + " body bytes");
    }
    return b;
  }

  /** A CRLF- (or LF-) terminated line, without the terminator. */
  private static String line(InputStream in) throws IOException {
    final StringBuilder b = new StringBuilder(64);
    int c;
    while ((c = in.read()) != '\n') {
      if (c == -1) {
        throw new EOFException("connection closed in the middle of the answer's head");
      }
      if (b.length() > MAX_LINE) {
        throw new IOException("header line longer than " + MAX_LINE + " bytes");
      }
      b.append((char) c);
    }
    final int end = b.length() > 0 && b.charAt(b.length() - 1) == '\r' ? b.length() - 1 : b.length();
    return b.substring(0, end);
  }
}
