package esbperf.monitor;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.stream.Collectors;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * Serves the samples kept in the spool. The runner pulls one step's window after the step:
 * {@code GET /samples?from=MS&to=MS} (from inclusive, to exclusive; ms since the epoch on this
 * host's clock) answers CSV; {@code GET /status} answers a small JSON document. Every answer
 * carries {@code X-Monitor-Time-Ms}, this host's clock, so the puller can see a clock offset,
 * and {@code X-Monitor-Sampler}, what took the samples ("sigar" or "oshi").
 */
final class SampleServer {

  private final HttpServer server;
  private final ExecutorService executor;
  private final Spool spool;
  private final String sampler;
  private final String statusPrefix;

  SampleServer(InetSocketAddress listen, Spool spool, String sampler, String role, long pid, List<String> watching,
      List<Integer> cpus) throws IOException {
    this.spool = spool;
    this.sampler = sampler;
    this.statusPrefix = "{\"role\":" + json(role) + ",\"pid\":" + pid + ",\"interval_ms\":" + Monitor.INTERVAL_MS
        + ",\"sampler\":" + json(sampler)
        + ",\"watching\":[" + watching.stream().map(SampleServer::json).collect(Collectors.joining(",")) + "]"
        + ",\"cpus\":[" + cpus.stream().map(String::valueOf).collect(Collectors.joining(",")) + "]";
    server = HttpServer.create(listen, 16);
    executor = Executors.newSingleThreadExecutor(r -> {
      final Thread t = new Thread(r, "monitor-http");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/", this::exchange);
  }

  void start() {
    server.start();
  }

  InetSocketAddress address() {
    return server.getAddress();
  }

  void stop() {
    server.stop(0);
    executor.shutdownNow();
  }

  private void exchange(HttpExchange exchange) throws IOException {
    try (exchange) {
      exchange.getResponseHeaders().set("X-Monitor-Time-Ms", Long.toString(System.currentTimeMillis()));
      exchange.getResponseHeaders().set("X-Monitor-Sampler", sampler);
      if (!"GET".equals(exchange.getRequestMethod())) {
        text(exchange, 405, "only GET is served\n");
        return;
      }
      switch (exchange.getRequestURI().getPath()) {
        case "/samples" -> samples(exchange);
        case "/status" -> {
          exchange.getResponseHeaders().set("Content-Type", "application/json");
          text(exchange, 200, status());
        }
        default -> text(exchange, 404, "no such resource; try /samples?from=MS&to=MS or /status\n");
      }
    }
  }

  private void samples(HttpExchange exchange) throws IOException {
    final Map<String, String> query = query(exchange.getRequestURI().getRawQuery());
    final long from;
    final long to;
    try {
      from = Long.parseLong(query.getOrDefault("from", "0"));
      to = Long.parseLong(query.getOrDefault("to", Long.toString(Long.MAX_VALUE)));
    }
    catch (NumberFormatException e) {
      text(exchange, 400, "from and to must be times in ms since the epoch\n");
      return;
    }
    exchange.getResponseHeaders().set("Content-Type", "text/csv; charset=utf-8");
    exchange.sendResponseHeaders(200, 0);   // length unknown: chunked
    try (Writer out = new BufferedWriter(
        new OutputStreamWriter(exchange.getResponseBody(), StandardCharsets.UTF_8), 1 << 16)) {
      spool.between(from, to, out);
    }
  }

  private String status() {
    final Spool.Summary held = spool.summary();
    return statusPrefix
        + ",\"ticks\":" + held.ticks()
        + ",\"oldest_ms\":" + held.oldestMs()
        + ",\"newest_ms\":" + held.newestMs()
        + ",\"spool\":{\"dir\":" + json(spool.dir().toString()) + ",\"bytes\":" + held.bytes()
        + ",\"max_bytes\":" + spool.maxBytes() + ",\"max_age_s\":" + spool.maxAgeMs() / 1000 + "}"
        + "}\n";
  }

  private static void text(HttpExchange exchange, int status, String body) throws IOException {
    final byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    if (!exchange.getResponseHeaders().containsKey("Content-Type")) {
      exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
    }
    exchange.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }

  private static Map<String, String> query(String raw) {
    final Map<String, String> params = new HashMap<>();
    if (raw != null) {
      for (String pair : raw.split("&")) {
        final int eq = pair.indexOf('=');
        if (eq > 0) {
          params.put(pair.substring(0, eq), URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
        }
      }
    }
    return params;
  }

  private static String json(String text) {
    final StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      }
      else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      }
      else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
