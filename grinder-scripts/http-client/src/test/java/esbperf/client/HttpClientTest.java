package esbperf.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
  void theClockCoversTheExchangeOnly() throws Exception {
    // The server answers 30 ms after the request arrived: the exchange takes 30 ms and a little.
    final String url = serve(b -> {
      try {
        Thread.sleep(30);
      }
      catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return lengthAnswer(b);
    }, 100);
    final HttpClient c = new HttpClient(url, 5000, true);
    final PreparedRequest request = HttpClient.prepare(url, true, "/raw", "text/xml", null, "ping".getBytes());
    for (int i = 0; i < 3; i++) {
      final long before = System.nanoTime();
      final Response r = c.send(request);
      final long after = System.nanoTime();
      assertEquals("ping", r.getText());
      assertTrue(r.getMicros() >= 30_000 && r.getMicros() < 45_000, "µs " + r.getMicros());
      assertTrue(r.getStartNanos() >= before && r.getEndNanos() <= after);
      assertEquals((r.getEndNanos() - r.getStartNanos()) / 1000, r.getMicros());
    }
    assertEquals(1, c.getConnections());
  }

  @Test
  void aPreparedRequestIsTheSameBytesEveryTime() throws Exception {
    final String url = serve(HttpClientTest::lengthAnswer, 100);
    final PreparedRequest request = HttpClient.prepare(url, true, "/raw", "text/xml",
        new String[] {"SOAPAction", "\"x\""}, "body".getBytes());
    assertEquals(4, request.getBodyLength());
    final HttpClient a = new HttpClient(url, 5000, true);
    final HttpClient b = new HttpClient(url, 5000, true);
    assertEquals("body", a.send(request).getText());
    a.close();   // the test server serves one connection at a time
    assertEquals("body", b.send(request).getText());
    b.close();
    assertEquals("body", a.send(request).getText());
    synchronized (requestHeads) {
      assertEquals(3, requestHeads.size());
      assertEquals(requestHeads.get(0), requestHeads.get(2));
      assertTrue(requestHeads.get(0).startsWith("POST /raw HTTP/1.1\nHost: 127.0.0.1:"), requestHeads.get(0));
      assertTrue(requestHeads.get(0).contains("SOAPAction: \"x\"\n"));
    }
    assertThrows(IllegalArgumentException.class, () -> new HttpClient(url, 5000, false).send(request));
  }

  @Test
  void answersArrivingInSmallPiecesAreReadWhole() throws Exception {
    // Head, chunk size lines and data split over many TCP segments: every buffer refill path.
    final String text = "x".repeat(40_000);
    final String answer = "HTTP/1.1 200 OK\r\nX-Echo-Backend: ws1\r\nTransfer-Encoding: chunked\r\n\r\n"
        + "9c40\r\n" + text + "\r\n0\r\n\r\n";
    server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    final Thread t = new Thread(() -> {
      try (Socket s = server.accept()) {
        s.setTcpNoDelay(true);
        s.getInputStream().read(new byte[4096]);
        final OutputStream out = s.getOutputStream();
        final byte[] bytes = answer.getBytes(StandardCharsets.ISO_8859_1);
        for (int i = 0; i < bytes.length; i += 7) {
          out.write(bytes, i, Math.min(7, bytes.length - i));
          out.flush();
          if (i < 200 || bytes.length - i < 200) {
            Thread.sleep(1);
          }
        }
        Thread.sleep(200);
      }
      catch (Exception e) {
        // test ends
      }
    });
    t.setDaemon(true);
    t.start();
    final Response r = new HttpClient("http://127.0.0.1:" + server.getLocalPort(), 5000, true)
        .post("/x", "text/xml", null, "a".getBytes());
    assertEquals(200, r.getStatus());
    assertEquals(text, r.getText());
    assertEquals("ws1", r.header("X-ECHO-BACKEND"));
    assertEquals(null, r.header("Content-Length"));
  }

  @Test
  void expectedIsMetOnlyByTheRightAnswer() throws Exception {
    final String url = serve(HttpClientTest::lengthAnswer, 100);
    final HttpClient c = new HttpClient(url, 5000, true);
    final Response r = c.post("/raw", "text/xml", null, "<a>hello ws2</a>".getBytes());
    assertTrue(new Expected("ws2", "<a>hello ws2</a>".getBytes(), null).isMetBy(r));
    assertTrue(new Expected(null, null, "hello".getBytes()).isMetBy(r));
    assertTrue(new Expected(null, null, "<a>hello ws2</a>".getBytes()).isMetBy(r));
    assertFalse(new Expected("ws1", null, null).isMetBy(r));
    assertFalse(new Expected(null, "<a>hello ws2</a> ".getBytes(), null).isMetBy(r));
    assertFalse(new Expected(null, null, "hellO".getBytes()).isMetBy(r));
    assertFalse(new Expected(null, null, "<a>hello ws2</a>!".getBytes()).isMetBy(r));
    final Response fault = c.post("/raw", "text/xml", null, new byte[0]);
    assertTrue(new Expected(null, null, null).isMetBy(fault));
  }

  @Test
  void theCannedServerAnswersEveryRequestAtOnce() throws Exception {
    final byte[] body = "x".repeat(100_000).getBytes();
    try (CannedServer canned = CannedServer.start(
        CannedServer.answer(new String[] {"X-Echo-Backend", "ws1"}, "canned".getBytes()))) {
      for (boolean keepAlive : new boolean[] {true, false}) {
        final HttpClient c = new HttpClient(canned.getUrl(), 5000, keepAlive);
        for (int i = 0; i < 5; i++) {
          final Response r = c.post("/raw", "text/xml", null, i % 2 == 0 ? body : new byte[0]);
          assertEquals("canned", r.getText());
          assertEquals("ws1", r.header("x-echo-backend"));
        }
        assertEquals(keepAlive ? 1 : 5, c.getConnections());
        c.close();
      }
      assertEquals(10, canned.getServed());
    }
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
