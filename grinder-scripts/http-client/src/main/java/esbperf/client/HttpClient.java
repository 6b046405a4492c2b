package esbperf.client;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;

/**
 * A blocking HTTP/1.1 client for one worker thread and one server: POST a body, read the
 * whole answer. Made for measuring, so it does as little as possible per request:
 * TCP_NODELAY on, request line, headers and body leave in one flush (no Nagle/delayed-ACK
 * stall on a reused connection), and answers with Content-Length, chunked or
 * close-delimited bodies are read in full. Not thread-safe: one instance per thread.
 */
public final class HttpClient {

  private static final int BUFFER = 64 * 1024;

  private final String host;
  private final int port;
  private final String hostHeader;
  private final int timeoutMs;
  private final boolean keepAlive;
  private Socket socket;
  private OutputStream out;
  private InputStream in;
  private long connections;

  /**
   * @param baseUrl   http://host:port of the server
   * @param timeoutMs connect and read timeout
   * @param keepAlive reuse the connection between requests, or open one per request
   */
  public HttpClient(String baseUrl, int timeoutMs, boolean keepAlive) {
    final URI uri = URI.create(baseUrl);
    if (!"http".equals(uri.getScheme()) || uri.getHost() == null) {
      throw new IllegalArgumentException("not an http://host:port URL: " + baseUrl);
    }
    this.host = uri.getHost();
    this.port = uri.getPort() == -1 ? 80 : uri.getPort();
    this.hostHeader = uri.getPort() == -1 ? host : host + ":" + port;
    this.timeoutMs = timeoutMs;
    this.keepAlive = keepAlive;
  }

  /** Connections opened so far (1 for a whole keep-alive run, one per request otherwise). */
  public long getConnections() {
    return connections;
  }

  /**
   * POST {@code body} to {@code path} with extra headers given as name, value pairs.
   * A request on a reused connection that the server had already closed is retried once
   * on a new connection; any other failure is thrown.
   */
  public Response post(String path, String contentType, String[] headers, byte[] body) throws IOException {
    final byte[] head = head(path, contentType, headers, body.length);
    final boolean reused = socket != null;
    try {
      return exchange(head, body);
    }
    catch (Response.NoAnswer e) {
      close();
      if (!reused) {
        throw e;
      }
      return exchange(head, body);   // the server had closed the idle connection: once more, fresh
    }
    catch (IOException e) {
      close();
      throw e;
    }
  }

  private Response exchange(byte[] head, byte[] body) throws IOException {
    if (socket == null) {
      connect();
    }
    try {
      out.write(head);
      out.write(body);
      out.flush();
    }
    catch (java.net.SocketException e) {
      throw new Response.NoAnswer("connection lost while sending: " + e.getMessage());
    }
    final Response response = Response.read(in);
    if (!keepAlive || !response.keepsAlive()) {
      close();
    }
    return response;
  }

  private byte[] head(String path, String contentType, String[] headers, int length) {
    final StringBuilder b = new StringBuilder(256);
    b.append("POST ").append(path).append(" HTTP/1.1\r\n");
    b.append("Host: ").append(hostHeader).append("\r\n");
    b.append("Content-Type: ").append(contentType).append("\r\n");
    b.append("Content-Length: ").append(length).append("\r\n");
    if (!keepAlive) {
      b.append("Connection: close\r\n");
    }
    for (int i = 0; headers != null && i + 1 < headers.length; i += 2) {
      b.append(headers[i]).append(": ").append(headers[i + 1]).append("\r\n");
    }
    b.append("\r\n");
    return b.toString().getBytes(StandardCharsets.ISO_8859_1);
  }

  private void connect() throws IOException {
    final Socket s = new Socket();
    s.setTcpNoDelay(true);
    s.setSoTimeout(timeoutMs);
    s.connect(new InetSocketAddress(host, port), timeoutMs);
    socket = s;
    out = new BufferedOutputStream(s.getOutputStream(), BUFFER);
    in = new BufferedInputStream(s.getInputStream(), BUFFER);
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
      in = null;
    }
  }
}
