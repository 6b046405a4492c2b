package esbperf.echo;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpContext;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.xml.ws.api.streaming.XMLStreamReaderFactory;
import com.sun.xml.ws.spi.ProviderImpl;
import jakarta.xml.ws.Endpoint;
import jakarta.xml.ws.soap.SOAPBinding;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The service on the JAX-WS RI, published on the JDK HttpServer (the thesis's set-up). The
 * RI is called directly, not through jakarta.xml.ws.Endpoint, because CXF's provider is on
 * the same classpath. Needs -Dsun.net.httpserver.nodelay=true (EchoMain sets it).
 */
final class RiRuntime implements EchoRuntime {

    private final HttpServer server;
    private final ExecutorService pool;

    private RiRuntime(HttpServer server, ExecutorService pool) {
        this.server = server;
        this.pool = pool;
    }

    static RiRuntime start(EchoOptions options) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress(options.host(), options.port()),
                EchoMain.ACCEPT_BACKLOG);
        ExecutorService pool = Executors.newFixedThreadPool(options.threads(), namedThreads());
        server.setExecutor(pool);
        Filter limits = new Limits(options);
        XMLStreamReaderFactory.set(new NoDtdReaderFactory(XMLStreamReaderFactory.get()));

        HttpContext soap = server.createContext("/echo");
        soap.getFilters().add(limits);
        Endpoint endpoint = new ProviderImpl().createEndpoint(SOAPBinding.SOAP11HTTP_BINDING, new EchoService(options));
        endpoint.publish(soap);

        HttpContext raw = server.createContext("/raw", exchange -> rawEcho(exchange, options));
        raw.getFilters().add(limits);
        server.start();
        return new RiRuntime(server, pool);
    }

    @Override
    public String description() {
        return "JAX-WS RI on the JDK HttpServer";
    }

    @Override
    public void close() {
        server.stop(1);  // lets exchanges in flight finish, at most 1 s
        pool.shutdownNow();
    }

    private static void rawEcho(HttpExchange exchange, EchoOptions options) throws IOException {
        try (exchange) {
            if (!"POST".equals(exchange.getRequestMethod())) {
                exchange.getResponseHeaders().set("Allow", "POST");
                plain(exchange, 405, "the raw echo takes POST only");
                return;
            }
            // The filter has already refused bodies over the limit.
            byte[] body = Bodies.read(exchange.getRequestBody(), declaredLength(exchange), options.maxBodyBytes());
            options.simulateWork();
            String type = exchange.getRequestHeaders().getFirst("Content-Type");
            if (type != null) {
                exchange.getResponseHeaders().set("Content-Type", type);
            }
            exchange.sendResponseHeaders(200, body.length == 0 ? -1 : body.length);
            exchange.getResponseBody().write(body);
        }
    }

    /** Routing header on every answer; 413 over the limit; chunked bodies buffered so 413 stays possible. */
    private static final class Limits extends Filter {
        private final EchoOptions options;

        Limits(EchoOptions options) {
            this.options = options;
        }

        @Override
        public void doFilter(HttpExchange exchange, Chain chain) throws IOException {
            exchange.getResponseHeaders().set(Bodies.BACKEND_HEADER, options.backendId());
            exchange.getResponseHeaders().set(Bodies.RUNTIME_HEADER, "jaxws");
            long declared = declaredLength(exchange);
            try {
                if (declared > options.maxBodyBytes()) {
                    throw new Bodies.TooLarge(options.maxBodyBytes());
                }
                if (declared == Bodies.CHUNKED) {
                    byte[] body = Bodies.read(exchange.getRequestBody(), declared, options.maxBodyBytes());
                    exchange.setStreams(new ByteArrayInputStream(body), null);
                }
            } catch (Bodies.TooLarge e) {
                exchange.getResponseHeaders().set("Connection", "close");
                plain(exchange, 413, e.getMessage());
                exchange.close();
                return;
            }
            chain.doFilter(exchange);
        }

        @Override
        public String description() {
            return "echo limits";
        }
    }

    private static long declaredLength(HttpExchange exchange) {
        return Bodies.declaredLength(exchange.getRequestHeaders().getFirst("Content-Length"),
                exchange.getRequestHeaders().getFirst("Transfer-Encoding"));
    }

    private static void plain(HttpExchange exchange, int status, String text) throws IOException {
        byte[] bytes = (text + "\n").getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        exchange.sendResponseHeaders(status, bytes.length);
        exchange.getResponseBody().write(bytes);
    }

    private static java.util.concurrent.ThreadFactory namedThreads() {
        AtomicInteger count = new AtomicInteger();
        return task -> new Thread(task, "echo-" + count.incrementAndGet());
    }
}
