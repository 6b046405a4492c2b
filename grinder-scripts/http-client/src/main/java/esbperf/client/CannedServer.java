package esbperf.client;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.LongAdder;

/**
 * The calibration's server: on loopback inside the worker process, it reads each request
 * (head and Content-Length body) and answers at once with the same canned bytes, so that a
 * step against it measures the client alone. One thread per connection, as the worker has one
 * connection per thread.
 */
public final class CannedServer implements Closeable {

  private static final byte[] CONTENT_LENGTH = AnswerReader.ascii("content-length");
  private static final byte[] CONNECTION = AnswerReader.ascii("connection");
  private static final byte[] CLOSE = AnswerReader.ascii("close");

  private final ServerSocket server;
  private final byte[] answer;
  private final ExecutorService connections;
  private final LongAdder served = new LongAdder();

  private CannedServer(ServerSocket server, byte[] answer) {
    this.server = server;
    this.answer = answer;
    this.connections = Executors.newCachedThreadPool(r -> {
      final Thread t = new Thread(r, "esbperf-canned-server");
      t.setDaemon(true);
      return t;
    });
  }

  /** An HTTP/1.1 200 answer with {@code headers} (name, value pairs), Content-Length and {@code body}. */
  public static byte[] answer(String[] headers, byte[] body) {
    final StringBuilder b = new StringBuilder("HTTP/1.1 200 OK\r\n");
    for (int i = 0; headers != null && i + 1 < headers.length; i += 2) {
      b.append(headers[i]).append(": ").append(headers[i + 1]).append("\r\n");
    }
    b.append("Content-Length: ").append(body.length).append("\r\n\r\n");
    final byte[] head = b.toString().getBytes(StandardCharsets.ISO_8859_1);
    final byte[] bytes = Arrays.copyOf(head, head.length + body.length);
    System.arraycopy(body, 0, bytes, head.length, body.length);
    return bytes;
  }

  /** Listen on a free loopback port and answer every request with {@code answer}. */
  public static CannedServer start(byte[] answer) throws IOException {
    final ServerSocket socket = new ServerSocket(0, 1024, InetAddress.getLoopbackAddress());
    final CannedServer s = new CannedServer(socket, answer);
    final Thread acceptor = new Thread(s::accept, "esbperf-canned-server-accept");
    acceptor.setDaemon(true);
    acceptor.start();
    return s;
  }

  /** http://127.0.0.1:port */
  public String getUrl() {
    return "http://" + server.getInetAddress().getHostAddress() + ":" + server.getLocalPort();
  }

  /** Requests answered so far. */
  public long getServed() {
    return served.sum();
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        final Socket s = server.accept();
        connections.execute(() -> serve(s));
      }
      catch (IOException e) {
        // closed
      }
    }
  }

  private void serve(Socket socket) {
    try (Socket s = socket) {
      s.setTcpNoDelay(true);
      final InputStream in = s.getInputStream();
      final OutputStream out = s.getOutputStream();
      byte[] buf = new byte[16 * 1024];
      int pos = 0;
      int lim = 0;
      while (true) {
        // The head: up to the empty line.
        int end;
        int scan = pos;
        while ((end = endOfHead(buf, scan, lim)) < 0) {
          scan = Math.max(pos, lim - 3);
          if (lim == buf.length) {
            if (pos > 0) {
              System.arraycopy(buf, pos, buf, 0, lim - pos);
              scan -= pos;
              lim -= pos;
              pos = 0;
            }
            else if (buf.length < AnswerReader.MAX_HEAD) {
              buf = Arrays.copyOf(buf, buf.length * 2);
            }
            else {
              return;   // not a request we serve
            }
          }
          final int n = in.read(buf, lim, buf.length - lim);
          if (n < 0) {
            return;   // the client closed its connection
          }
          lim += n;
        }
        long length = 0;
        boolean close = false;
        for (int line = pos; line < end; ) {
          int eol = AnswerReader.indexOf(buf, (byte) '\n', line, end);
          eol = eol < 0 ? end : eol;
          final int colon = AnswerReader.indexOf(buf, (byte) ':', line, eol);
          if (colon > line && AnswerReader.nameIs(buf, line, colon, CONTENT_LENGTH)) {
            length = Long.parseLong(new String(buf, colon + 1, eol - colon - 1, StandardCharsets.ISO_8859_1).trim());
          }
          else if (colon > line && AnswerReader.nameIs(buf, line, colon, CONNECTION)) {
            close = AnswerReader.contains(buf, colon + 1, eol, CLOSE);
          }
          line = eol + 1;
        }
        pos = end;
        // The body: skipped.
        final long buffered = Math.min(length, lim - pos);
        pos += (int) buffered;
        for (long left = length - buffered; left > 0; ) {
          final int n = in.read(buf, 0, (int) Math.min(buf.length, left));
          if (n < 0) {
            return;
          }
          left -= n;
        }
        if (pos == lim) {
          pos = lim = 0;
        }
        served.increment();   // before the answer: a client that has read it sees the count
        out.write(answer);
        if (close) {
          return;
        }
      }
    }
    catch (IOException | NumberFormatException e) {
      // The client went away or sent something else than a request: drop the connection.
    }
  }

  /** Index just past the CR LF CR LF that ends a head in b[from, to), or -1. */
  private static int endOfHead(byte[] b, int from, int to) {
    for (int i = from; i + 3 < to; i++) {
      if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n') {
        return i + 4;
      }
    }
    return -1;
  }

  @Override
  public void close() {
    try {
      server.close();
    }
    catch (IOException e) {
      // already closed
    }
    connections.shutdownNow();
  }
}
