package esbperf.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/** A test server that answers each request ("ok") after a fixed delay; one connection at a time. */
final class SlowServer {

  private SlowServer() {
  }

  static String start(int delayMs) throws IOException {
    final ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    final Thread t = new Thread(() -> {
      while (true) {
        try (Socket s = server.accept()) {
          s.setTcpNoDelay(true);
          final InputStream in = s.getInputStream();
          final OutputStream out = s.getOutputStream();
          final byte[] buf = new byte[8192];
          while (in.read(buf) > 0) {   // one small request per read on loopback
            Thread.sleep(delayMs);
            out.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".getBytes(StandardCharsets.ISO_8859_1));
          }
        }
        catch (IOException | InterruptedException e) {
          return;
        }
      }
    });
    t.setDaemon(true);
    t.start();
    return "http://127.0.0.1:" + server.getLocalPort();
  }
}
