package esbperf.console;

import java.io.IOException;
import java.io.OutputStream;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.LongSupplier;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * The step board: how worker processes that stay up for a whole run learn what each step asks of
 * them. Grinder 3.11 gives a running worker no message but stop and reset, so the runner posts
 * each step here (through the token-guarded control API: {@link #order}) and every worker polls
 * the board's own listener, on the console's agent-facing address where the agents already reach
 * the console ({@link #start}). A poll also carries the worker's state ("adopted:N": its logs of
 * step N are open and its threads may take part; "closed:N": every thread left step N and its
 * logs of it are complete on disk), which the runner reads back ({@link #status}).
 *
 * <p>An order passes on esbperf.* properties only, like the start message's allow-list, so the
 * board can never choose what a worker runs. A poll must name the run's key (a secret of the
 * run's start message): a worker of an earlier run is told to end. Each order holds a lease the
 * runner renews ({@link #lease}); once it runs out (the runner died) every poll answers "end",
 * and the workers end by themselves.</p>
 */
final class StepBoard {

  static final String PORT_PROPERTY = "esbperf.board.port";
  /** A poll that finds nothing new waits this long for the next order before answering. */
  static final long HOLD_MS = 2000;
  static final String STEP = "step";
  static final String IDLE = "idle";
  static final String END = "end";

  private static final int MIN_KEY = 16;
  private static final int MAX_WORKER_NAME = 200;

  private final Object lock = new Object();
  private final ObjectMapper json;
  private final LongSupplier clock;
  private String key;
  private long seq;
  private String kind = IDLE;
  private Map<String, String> properties = Map.of();
  private long leaseUntilMs;
  private final Map<String, Map<String, Object>> workers = new LinkedHashMap<>();
  private HttpServer server;
  private ExecutorService executor;

  StepBoard(ObjectMapper json) {
    this(json, System::currentTimeMillis);
  }

  StepBoard(ObjectMapper json, LongSupplier clock) {
    this.json = json;
    this.clock = clock;
  }

  // --- the runner's side: the control API's /board/* -----------------------------------------

  /**
   * POST /board/order {"key": K, "seq": N, "kind": "step"|"idle"|"end", "properties": {...},
   * "lease_s": S}: the next order. A new key starts a new run's board (its workers' states
   * forgotten); within a run, seq must grow.
   */
  Object order(byte[] body) throws Exception {
    final JsonNode root = object(body);
    final String given = text(root, "key");
    if (given.length() < MIN_KEY) {
      throw new ApiError(400, "key must be at least " + MIN_KEY + " characters");
    }
    final long next = root.path("seq").asLong(-1);
    final String nextKind = text(root, "kind");
    if (!STEP.equals(nextKind) && !IDLE.equals(nextKind) && !END.equals(nextKind)) {
      throw new ApiError(400, "kind must be step, idle or end, got '" + nextKind + "'");
    }
    final Map<String, String> nextProperties = new LinkedHashMap<>();
    final JsonNode props = root.path("properties");
    if (!props.isMissingNode() && !props.isObject()) {
      throw new ApiError(400, "properties must be a JSON object of esbperf.* settings");
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = props.fields(); it.hasNext();) {
      final Map.Entry<String, JsonNode> e = it.next();
      if (!e.getKey().startsWith("esbperf.")) {
        throw new ApiError(400, "an order passes esbperf.* properties only, got " + e.getKey());
      }
      if (!e.getValue().isValueNode() || e.getValue().isNull()) {
        throw new ApiError(400, "property " + e.getKey() + " must be a string, number or boolean");
      }
      nextProperties.put(e.getKey(), e.getValue().asText());
    }
    final long leaseMs = lease(root);
    if (next < 1) {   // refused before anything changes: a running run's key stays on the board
      throw new ApiError(400, "seq must be a whole number of 1 or more");
    }
    synchronized (lock) {
      if (given.equals(key) && next <= seq) {
        throw new ApiError(409, "order " + next + " is not after the board's order " + seq);
      }
      if (!given.equals(key)) {
        key = given;
        workers.clear();
      }
      seq = next;
      kind = nextKind;
      properties = nextProperties;
      leaseUntilMs = clock.getAsLong() + leaseMs;
      lock.notifyAll();
    }
    return Agents.success();
  }

  /** POST /board/lease {"key": K, "lease_s": S}: the runner is still there. */
  Object lease(byte[] body) throws Exception {
    final JsonNode root = object(body);
    final String given = text(root, "key");
    final long leaseMs = lease(root);
    synchronized (lock) {
      if (!given.equals(key)) {
        throw new ApiError(409, "no run of that key is on the board");
      }
      leaseUntilMs = clock.getAsLong() + leaseMs;
    }
    return Agents.success();
  }

  /** GET /board/status: the order, and what each worker last said of it. */
  Object status() {
    synchronized (lock) {
      final Map<String, Object> m = new LinkedHashMap<>();
      m.put("listening", server != null);
      m.put("seq", seq);
      m.put("kind", currentKind());
      final Map<String, Object> copy = new LinkedHashMap<>();
      workers.forEach((name, state) -> copy.put(name, new LinkedHashMap<>(state)));
      m.put("workers", copy);
      return m;
    }
  }

  private String currentKind() {
    return key != null && clock.getAsLong() > leaseUntilMs ? END : kind;
  }

  private JsonNode object(byte[] body) throws Exception {
    final JsonNode root = body.length == 0 ? null : json.readTree(body);
    if (root == null || !root.isObject()) {
      throw new ApiError(400, "the body must be a JSON object");
    }
    return root;
  }

  private static String text(JsonNode root, String field) throws ApiError {
    final JsonNode node = root.path(field);
    if (!node.isTextual()) {
      throw new ApiError(400, field + " must be a string");
    }
    return node.asText();
  }

  private static long lease(JsonNode root) throws ApiError {
    final double seconds = root.path("lease_s").asDouble(-1);
    if (!(seconds > 0 && seconds <= 3600)) {
      throw new ApiError(400, "lease_s must be more than 0 and at most 3600 seconds");
    }
    return (long) (seconds * 1000);
  }

  // --- the workers' side: the board's own listener -------------------------------------------

  /**
   * A worker's poll, GET /order?key=K&worker=NAME&state=STATE&have=H[&begun=B&takes=T]: records
   * STATE (and how many of the worker's threads the current step counts, T, and how many have
   * begun their part in it, B) and, while the board's order is still H, waits up to
   * {@link #HOLD_MS} for the next; answers the order as Java properties text (seq, kind and the
   * esbperf.* properties), or 409 for a key of no run.
   */
  String poll(Map<String, String> query) throws ApiError, InterruptedException {
    final String given = query.getOrDefault("key", "");
    final String worker = query.getOrDefault("worker", "");
    if (worker.isEmpty() || worker.length() > MAX_WORKER_NAME) {
      throw new ApiError(400, "worker must name the worker process");
    }
    long have;
    try {
      have = Long.parseLong(query.getOrDefault("have", "0"));
    }
    catch (NumberFormatException e) {
      throw new ApiError(400, "have must be an order number");
    }
    synchronized (lock) {
      if (key == null || !key.equals(given)) {
        throw new ApiError(409, "no run of that key is on the board: end");
      }
      final Map<String, Object> state = new LinkedHashMap<>();
      state.put("state", query.getOrDefault("state", ""));
      state.put("at_ms", clock.getAsLong());
      for (String count : new String[] {"begun", "takes"}) {
        try {
          state.put(count, Long.parseLong(query.getOrDefault(count, "")));
        }
        catch (NumberFormatException e) {
          // a worker that does not count its threads: the runner takes its word that they are in
        }
      }
      workers.put(worker, state);
      final long until = System.currentTimeMillis() + HOLD_MS;
      for (long left; seq == have && !END.equals(currentKind()) && (left = until - System.currentTimeMillis()) > 0; ) {
        lock.wait(Math.min(left, Math.max(1, leaseUntilMs - clock.getAsLong() + 1)));
        if (!given.equals(key)) {
          throw new ApiError(409, "no run of that key is on the board: end");
        }
      }
      final Properties answer = new Properties();
      answer.putAll(properties);
      answer.setProperty("seq", Long.toString(seq));
      answer.setProperty("kind", currentKind());
      final StringWriter out = new StringWriter();
      try {
        answer.store(out, null);
      }
      catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return out.toString();
    }
  }

  /** Listen on the console's agent-facing address (loopback when it has none). */
  void start(String host, int port) throws IOException {
    final InetAddress address = host == null || host.isEmpty()
        ? InetAddress.getLoopbackAddress() : InetAddress.getByName(host);
    server = HttpServer.create(new InetSocketAddress(address, port), 256);
    // A poll holds its thread while it waits: one thread per worker process polling.
    executor = Executors.newCachedThreadPool(r -> {
      final Thread t = new Thread(r, "esbperf-step-board");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/", this::exchange);
    server.start();
  }

  InetSocketAddress address() {
    return server == null ? null : server.getAddress();
  }

  void stop() {
    if (server != null) {
      server.stop(0);
      executor.shutdownNow();
      server = null;
    }
  }

  private void exchange(HttpExchange exchange) throws IOException {
    int status = 200;
    String answer;
    try {
      if (!"GET".equals(exchange.getRequestMethod()) || !"/order".equals(exchange.getRequestURI().getPath())) {
        throw new ApiError(404, "the step board answers GET /order only");
      }
      answer = poll(query(exchange.getRequestURI().getRawQuery()));
    }
    catch (ApiError e) {
      status = e.status;
      answer = e.getMessage() + "\n";
    }
    catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      status = 503;
      answer = "the board is stopping\n";
    }
    final byte[] out = answer.getBytes(StandardCharsets.ISO_8859_1);   // Properties.store escapes the rest
    exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=ISO-8859-1");
    exchange.sendResponseHeaders(status, out.length);
    try (OutputStream os = exchange.getResponseBody()) {
      os.write(out);
    }
  }

  static Map<String, String> query(String raw) {
    final Map<String, String> m = new LinkedHashMap<>();
    if (raw == null) {
      return m;
    }
    for (String pair : raw.split("&")) {
      final int eq = pair.indexOf('=');
      if (eq > 0) {
        m.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
              URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
      }
    }
    return m;
  }
}
