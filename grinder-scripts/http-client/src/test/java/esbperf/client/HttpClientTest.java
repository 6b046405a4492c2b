package esbperf.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The client against a scripted server on loopback: each case is what a real server may send. */
class HttpClientTest {

  private ServerSocket server;
  private final AtomicInteger accepted = new AtomicInteger();
  private final List<String> requestHeads = new ArrayList<>();

  /** Serve every request on every connection with {@code answer(body)}; close after `perConnection`. */
  private String serve(Function<String, String> answer, int perConnection) throws IOException {
    server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    final Thread t = new Thread(() -> {
      while (!server.isClosed()) {
        try (Socket s = server.accept()) {
          accepted.incrementAndGet();
          final InputStream in = s.getInputStream();
          final OutputStream out = s.getOutputStream();
          for (int i = 0; i < perConnection; i++) {
            final BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.ISO_8859_1));
            String line;
            int length = 0;
            final StringBuilder head = new StringBuilder();
            while ((line = r.readLine()) != null && !line.isEmpty()) {
              head.append(line).append('\n');
              if (line.toLowerCase().startsWith("content-length:")) {
                length = Integer.parseInt(line.substring(15).trim());
              }
            }
            if (line == null) {
              break;
            }
            synchronized (requestHeads) {
              requestHeads.add(head.toString());
            }
            final char[] body = new char[length];
            for (int n = 0; n < length;) {
              n += r.read(body, n, length - n);
            }
            out.write(answer.apply(new String(body)).getBytes(StandardCharsets.ISO_8859_1));
            out.flush();
          }
        }
        catch (IOException e) {
          // server closed
        }
      }
    });
    t.setDaemon(true);
    t.start();
    return "http://127.0.0.1:" + server.getLocalPort();
  }

  @AfterEach
  void stop() throws IOException {
    if (server != null) {
      server.close();
    }
  }

  private static String lengthAnswer(String body) {
    return "HTTP/1.1 200 OK\r\nContent-type: text/xml\r\nX-Echo-Backend: ws2\r\nContent-Length: "
        + body.length() + "\r\n\r\n" + body;
  }

  @Test
  void keepAliveReusesOneConnection() throws Exception {
    final HttpClient c = new HttpClient(serve(HttpClientTest::lengthAnswer, 100), 5000, true);
    for (int i = 0; i < 10; i++) {
      final Response r = c.post("/raw", "text/xml", new String[] {"SOAPAction", "\"x\""}, ("m" + i).getBytes());
      assertEquals(200, r.getStatus());
      assertEquals("m" + i, r.getText());
      assertEquals("ws2", r.header("x-echo-backend"));
      assertEquals("text/xml", r.header("Content-Type"));
    }
    assertEquals(1, c.getConnections());
    assertEquals(1, accepted.get());
    c.close();
  }

  @Test
  void newConnectionModeSaysCloseAndReconnects() throws Exception {
    final HttpClient c = new HttpClient(serve(HttpClientTest::lengthAnswer, 1), 5000, false);
    for (int i = 0; i < 3; i++) {
      assertEquals("b", c.post("/raw", "text/xml", null, "b".getBytes()).getText());
    }
    assertEquals(3, c.getConnections());
    synchronized (requestHeads) {
      requestHeads.forEach(h -> assertEquals(true, h.contains("Connection: close")));
    }
  }

  @Test
  void readsChunkedAnswers() throws Exception {
    final String url = serve(b -> "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n"
        + "4;ext=1\r\nfaul\r\n2\r\nt!\r\n0\r\nTrailer: x\r\n\r\n", 10);
    final Response r = new HttpClient(url, 5000, true).post("/x", "text/xml", null, new byte[0]);
    assertEquals(500, r.getStatus());
    assertEquals("fault!", r.getText());
  }

  @Test
  void readsCloseDelimitedAnswers() throws Exception {
    final String url = serve(b -> "HTTP/1.0 200 OK\r\n\r\n" + b.toUpperCase(), 1);
    final HttpClient c = new HttpClient(url, 5000, true);
    assertEquals("ABC", c.post("/x", "text/plain", null, "abc".getBytes()).getText());
    assertEquals("DEF", c.post("/x", "text/plain", null, "def".getBytes()).getText());
    assertEquals(2, c.getConnections());
  }

  @Test
  void retriesOnceWhenTheServerClosedAnIdleConnection() throws Exception {
    // The server answers one request per connection but says nothing about closing.
    final HttpClient c = new HttpClient(serve(HttpClientTest::lengthAnswer, 1), 5000, true);
    assertEquals("a", c.post("/x", "text/xml", null, "a".getBytes()).getText());
    Thread.sleep(100);
    assertEquals("b", c.post("/x", "text/xml", null, "b".getBytes()).getText());
    assertEquals(2, c.getConnections());
  }

  @Test
  void aTruncatedAnswerIsAnErrorNotARetry() throws Exception {
    final String url = serve(b -> "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", 1);
    final HttpClient c = new HttpClient(url, 5000, true);
    assertThrows(IOException.class, () -> c.post("/x", "text/xml", null, "a".getBytes()));
    assertEquals(1, accepted.get());
  }

  @Test
  void largeBodiesArriveWhole() throws Exception {
    final byte[] big = new byte[1 << 20];
    for (int i = 0; i < big.length; i++) {
      big[i] = (byte) ('a' + i % 26);
    }
    final HttpClient c = new HttpClient(serve(HttpClientTest::lengthAnswer, 10), 10000, true);
    final Response r = c.post("/raw", "text/xml", null, big);
    assertArrayEquals(big, r.getBody());
    assertEquals(true, r.bodyEquals(big));
  }

  @Test
  void refusedConnectionIsAnIOException() throws Exception {
    final int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    assertThrows(IOException.class,
        () -> new HttpClient("http://127.0.0.1:" + port, 2000, true).post("/x", "t", null, new byte[0]));
  }
}
