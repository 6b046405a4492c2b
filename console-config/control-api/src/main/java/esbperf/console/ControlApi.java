package esbperf.console;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import net.grinder.common.GrinderBuild;
import net.grinder.console.communication.ProcessControl;
import net.grinder.console.distribution.FileDistribution;
import net.grinder.console.model.ConsoleProperties;
import net.grinder.console.model.SampleModel;
import net.grinder.console.model.SampleModelViews;

import org.picocontainer.Startable;
import org.slf4j.Logger;

/**
 * The console's control API: JSON over HTTP, with the paths and meaning of The Grinder's
 * console REST API where they overlap. The console builds it by constructor injection because
 * it is listed in {@code META-INF/net.grinder.console}; it starts and stops with the console.
 *
 * <p>It listens on {@code grinder.console.httpHost}:{@code grinder.console.httpPort};
 * an empty host means loopback, so by default only the console host can drive it. Every request
 * must pass the {@link Guard} (Host, token, JSON) with the secret token read at start from the file
 * named by the system property {@value #TOKEN_FILE_PROPERTY} (esbperf writes it, mode 0600, in the
 * console's state folder); without it the API does not start.</p>
 */
public final class ControlApi implements Startable {

  /** A request handler: returns the JSON body of a 200 answer, or throws {@link ApiError}. */
  interface Handler {
    Object handle(byte[] body) throws Exception;
  }

  static final String TOKEN_FILE_PROPERTY = "esbperf.controlApi.tokenFile";

  private final Logger logger;
  private final ConsoleProperties properties;
  private final ObjectMapper json = new ObjectMapper();
  private final Map<String, Handler> routes = new LinkedHashMap<>();
  private HttpServer server;
  private ExecutorService executor;
  private Guard guard;
  private final StepBoard board;

  public ControlApi(Logger logger,
                    ConsoleProperties properties,
                    ProcessControl processControl,
                    SampleModel sampleModel,
                    SampleModelViews sampleModelViews,
                    FileDistribution fileDistribution) {
    this.logger = logger;
    this.properties = properties;

    final Agents agents = new Agents(processControl, properties, json,
        new WorkerProperties(properties.getDistributionDirectory().getFile()));
    final Files files = new Files(fileDistribution, processControl);
    final Recording recording = new Recording(sampleModel, sampleModelViews);
    board = new StepBoard(json);

    route("GET", "/version", body -> GrinderBuild.getName());

    route("GET", "/agents/status", body -> agents.status());
    route("POST", "/agents/start-workers", agents::startWorkers);
    route("POST", "/agents/stop-workers", body -> agents.stopWorkers());
    route("POST", "/agents/stop", body -> agents.stopAgents());

    route("POST", "/files/distribute", body -> files.distribute());
    route("GET", "/files/status", body -> files.status());

    route("GET", "/recording/status", body -> recording.status());
    route("GET", "/recording/data", body -> recording.data(false));
    route("GET", "/recording/data-latest", body -> recording.data(true));
    route("POST", "/recording/start", body -> recording.start());
    route("POST", "/recording/stop", body -> recording.stop());
    route("POST", "/recording/zero", body -> recording.zero());
    route("POST", "/recording/reset", body -> recording.reset());

    route("POST", "/board/order", board::order);
    route("POST", "/board/lease", board::lease);
    route("GET", "/board/status", body -> board.status());
  }

  private void route(String method, String path, Handler handler) {
    routes.put(method + " " + path, handler);
  }

  @Override
  public void start() {
    final String host = properties.getHttpHost();
    final int port = properties.getHttpPort();
    final byte[] token = readToken();
    if (token == null) {
      return;
    }
    try {
      final InetAddress address = host == null || host.isEmpty()
          ? InetAddress.getLoopbackAddress() : InetAddress.getByName(host);
      server = HttpServer.create(new InetSocketAddress(address, port), 64);
    }
    catch (IOException e) {
      // The console keeps running without its API; say so once, clearly.
      // slf4j 1.6 (the console's) has no varargs overload.
      logger.error("esbperf control API could not listen on {}:{}: {}", new Object[] {host, port, e.getMessage()});
      return;
    }
    executor = Executors.newFixedThreadPool(4, r -> {
      final Thread t = new Thread(r, "esbperf-control-api");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/", this::exchange);
    server.start();
    final InetSocketAddress bound = server.getAddress();
    guard = new Guard(token, bound);
    logger.info("esbperf control API listening on http://{}:{}/",
                bound.getAddress().getHostAddress(), bound.getPort());
    startBoard();
  }

  /** The step board's listener, beside the console's agent port (off without its port property). */
  private void startBoard() {
    final int port = Integer.getInteger(StepBoard.PORT_PROPERTY, 0);
    if (port <= 0) {
      return;
    }
    try {
      board.start(properties.getConsoleHost(), port);
      logger.info("esbperf step board listening on {}", board.address());
    }
    catch (IOException e) {
      logger.error("esbperf step board could not listen on {}:{}: {}",
                   new Object[] {properties.getConsoleHost(), port, e.getMessage()});
    }
  }

  /** The secret token, or null (said once in the log) when there is none to read. */
  private byte[] readToken() {
    final String file = System.getProperty(TOKEN_FILE_PROPERTY);
    try {
      final byte[] token = file == null ? new byte[0] : java.nio.file.Files.readString(Path.of(file)).trim().getBytes(StandardCharsets.UTF_8);
      if (token.length >= 16) {
        return token;
      }
      logger.error("esbperf control API stays off: {} names no token file with a token of 16 or more characters",
                   TOKEN_FILE_PROPERTY);
    }
    catch (IOException e) {
      logger.error("esbperf control API stays off: its token file cannot be read: {}", e.toString());
    }
    return null;
  }

  @Override
  public void stop() {
    board.stop();
    if (server != null) {
      server.stop(0);
      executor.shutdownNow();
      server = null;
    }
  }

  private void exchange(HttpExchange exchange) throws IOException {
    int status = 200;
    Object answer;
    try {
      final String path = exchange.getRequestURI().getPath().replaceAll("/+$", "");
      final String method = exchange.getRequestMethod();
      guard.check(method, exchange.getRequestHeaders().getFirst("Host"),
                  exchange.getRequestHeaders().getFirst("Authorization"),
                  exchange.getRequestHeaders().getFirst("Content-Type"));
      final Handler handler = routes.get(method + " " + path);
      if (handler == null) {
        throw routes.keySet().stream().anyMatch(k -> k.endsWith(" " + path))
            ? new ApiError(405, method + " is not allowed on " + path)
            : new ApiError(404, "no such resource: " + path);
      }
      answer = handler.handle(readBody(exchange.getRequestBody()));
    }
    catch (ApiError e) {
      status = e.status;
      answer = error(e.getMessage());
    }
    catch (JsonProcessingException e) {
      status = 400;
      answer = error("request body is not valid JSON: " + e.getOriginalMessage());
    }
    catch (Exception e) {
      // The caller gets the message; the stack trace goes to the console's log only.
      logger.error("esbperf control API: " + exchange.getRequestURI(), e);
      status = 500;
      answer = error(e.getClass().getSimpleName() + ": " + e.getMessage());
    }
    final byte[] out = json.writeValueAsBytes(answer);
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    exchange.sendResponseHeaders(status, out.length);
    try (OutputStream os = exchange.getResponseBody()) {
      os.write(out);
    }
  }

  private static Map<String, Object> error(String message) {
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("error", message);
    return m;
  }

  private static byte[] readBody(InputStream in) throws IOException {
    try (in) {
      return in.readAllBytes();
    }
  }

  static String text(byte[] body) {
    return new String(body, StandardCharsets.UTF_8);
  }
}
