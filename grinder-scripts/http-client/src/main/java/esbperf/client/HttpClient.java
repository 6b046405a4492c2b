package esbperf.client;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.URI;
import java.nio.charset.StandardCharsets;

/**
 * A blocking HTTP/1.1 client for one worker thread and one server: POST a body, read the
 * whole answer, and time the exchange. Made for measuring, so it does as little as possible
 * per request: the request's bytes are prepared once ({@link #prepare}) and leave in one
 * write with TCP_NODELAY on (no Nagle/delayed-ACK stall on a reused connection); answers with
 * Content-Length, chunked or close-delimited bodies are read in full.
 *
 * <p>The clock: System.nanoTime() right before the first request byte is written, or before
 * the connection is opened when the request needs a new one; stopped right after the answer's
 * last byte is read ({@link Response#getMicros}). Not thread-safe: one instance per thread.
 */
public final class HttpClient {

  private final String host;
  private final int port;
  private final String hostHeader;
  private final int timeoutMs;
  private final boolean keepAlive;
  private Socket socket;
  private OutputStream out;
  private AnswerReader reader;
  private long connections;
  private long lastStartNanos;

  /**
   * @param baseUrl   http://host:port of the server
   * @param timeoutMs connect and read timeout
   * @param keepAlive reuse the connection between requests, or open one per request
   */
  public HttpClient(String baseUrl, int timeoutMs, boolean keepAlive) {
    final URI uri = parse(baseUrl);
    this.host = uri.getHost();
    this.port = uri.getPort() == -1 ? 80 : uri.getPort();
    this.hostHeader = hostHeader(uri);
    this.timeoutMs = timeoutMs;
    this.keepAlive = keepAlive;
  }

  private static URI parse(String baseUrl) {
    final URI uri = URI.create(baseUrl);
    if (!"http".equals(uri.getScheme()) || uri.getHost() == null) {
      throw new IllegalArgumentException("not an http://host:port URL: " + baseUrl);
    }
    return uri;
  }

  private static String hostHeader(URI uri) {
    return uri.getPort() == -1 ? uri.getHost() : uri.getHost() + ":" + uri.getPort();
  }

  /**
   * The bytes of a POST of {@code body} to {@code path} on {@code baseUrl}, with extra headers
   * given as name, value pairs: built once, sent as they are by any client of that server and
   * connection mode.
   */
  public static PreparedRequest prepare(String baseUrl, boolean keepAlive, String path, String contentType,
                                        String[] headers, byte[] body) {
    final StringBuilder b = new StringBuilder(256);
    b.append("POST ").append(path).append(" HTTP/1.1\r\n");
    b.append("Host: ").append(hostHeader(parse(baseUrl))).append("\r\n");
    b.append("Content-Type: ").append(contentType).append("\r\n");
    b.append("Content-Length: ").append(body.length).append("\r\n");
    if (!keepAlive) {
      b.append("Connection: close\r\n");
    }
    for (int i = 0; headers != null && i + 1 < headers.length; i += 2) {
      b.append(headers[i]).append(": ").append(headers[i + 1]).append("\r\n");
    }
    b.append("\r\n");
    final byte[] head = b.toString().getBytes(StandardCharsets.ISO_8859_1);
    final byte[] bytes = new byte[head.length + body.length];
    System.arraycopy(head, 0, bytes, 0, head.length);
    System.arraycopy(body, 0, bytes, head.length, body.length);
    return new PreparedRequest(baseUrl, keepAlive, bytes, body.length);
  }

  /** Connections opened so far (1 for a whole keep-alive run, one per request otherwise). */
  public long getConnections() {
    return connections;
  }

  /** When the clock of the latest exchange started (System.nanoTime()), also if it failed. */
  public long getLastStartNanos() {
    return lastStartNanos;
  }

  /** POST {@code body} to {@code path} (prepares the request each time; {@link #send} does not). */
  public Response post(String path, String contentType, String[] headers, byte[] body) throws IOException {
    return send(prepare("http://" + hostHeader, keepAlive, path, contentType, headers, body));
  }

  /**
   * Send a prepared request and read the whole answer, timed. A request on a reused connection
   * that the server had already closed is sent once more on a new connection (inside the same
   * clock); any other failure is thrown.
   */
  public Response send(PreparedRequest request) throws IOException {
    if (request.keepAlive != keepAlive) {
      throw new IllegalArgumentException("request prepared for keepAlive=" + request.keepAlive);
    }
    final boolean reused = socket != null;
    final long start = System.nanoTime();
    lastStartNanos = start;
    try {
      return exchange(request.bytes, start);
    }
    catch (Response.NoAnswer e) {
      close();
      if (!reused) {
        throw e;
      }
      try {
        return exchange(request.bytes, start);   // the server had closed the idle connection
      }
      catch (IOException again) {
        close();
        throw again;
      }
    }
    catch (IOException e) {
      close();
      throw e;
    }
  }

  private Response exchange(byte[] bytes, long start) throws IOException {
    if (socket == null) {
      connect();
    }
    try {
      out.write(bytes);
    }
    catch (SocketException e) {
      throw new Response.NoAnswer("connection lost while sending: " + e.getMessage());
    }
    final Response response = reader.read(start);
    if (!keepAlive || !response.keepsAlive()) {
      close();
    }
    return response;
  }

  private void connect() throws IOException {
    final Socket s = new Socket();
    try {
      s.setTcpNoDelay(true);
      s.setSoTimeout(timeoutMs);
      s.connect(new InetSocketAddress(host, port), timeoutMs);
      out = s.getOutputStream();   // unbuffered: the prepared bytes leave in one write
      reader = new AnswerReader(s.getInputStream());
    }
    catch (IOException e) {
      s.close();
      throw e;
    }
    socket = s;
    connections++;
  }

  /** Close the connection, if any; the next request opens a new one. */
  public void close() {
    if (socket != null) {
      try {
        socket.close();
      }
      catch (IOException e) {
        // Nothing to do: the connection is gone either way.
      }
      socket = null;
      out = null;
      reader = null;
    }
  }
}
