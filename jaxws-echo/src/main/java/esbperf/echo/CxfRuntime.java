package esbperf.echo;

import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import org.apache.cxf.Bus;
import org.apache.cxf.BusFactory;
import org.apache.cxf.jaxws.EndpointImpl;
import org.apache.cxf.transport.http_jetty.JettyHTTPServerEngineFactory;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.ContextHandlerCollection;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The same service on Apache CXF with its Jetty transport. We build the Jetty server
 * (loopback connector, thread pool) and hand it to CXF's engine for our port; because its
 * handler is a ContextHandlerCollection, CXF adds its /echo context to it rather than
 * replacing it, and our handler sees every request first (routing header, limit, /raw).
 */
final class CxfRuntime implements EchoRuntime {

    private final Server server;
    private final Bus bus;

    private CxfRuntime(Server server, Bus bus) {
        this.server = server;
        this.bus = bus;
    }

    static CxfRuntime start(EchoOptions options) throws Exception {
        QueuedThreadPool pool = new QueuedThreadPool(options.threads(), Math.min(8, options.threads()));
        pool.setName("echo");
        Server server = new Server(pool);
        ServerConnector connector = new ServerConnector(server);
        connector.setHost(options.host());
        connector.setPort(options.port());
        connector.setAcceptQueueSize(EchoMain.ACCEPT_BACKLOG);
        server.addConnector(connector);
        server.setHandler(new Handlers(options));
        server.setStopTimeout(1000);

        Bus bus = BusFactory.newInstance().createBus();
        new JettyHTTPServerEngineFactory(bus)
                .createJettyHTTPServerEngine(options.host(), options.port(), "http")
                .setServer(server);
        EndpointImpl endpoint = new EndpointImpl(bus, new EchoService(options));
        // Accept any SOAPAction (the scripts send "echoMessage", Synapse its own); the
        // operation is chosen from the body, as on the RI.
        endpoint.setProperties(Map.of("allowNonMatchingToDefaultSoapAction", true));
        endpoint.publish(options.baseUrl() + "/echo");
        server.start();
        return new CxfRuntime(server, bus);
    }

    @Override
    public String description() {
        return "Apache CXF on Jetty";
    }

    @Override
    public void close() {
        try {
            server.stop();
        } catch (Exception e) {
            System.err.println("echo: stopping Jetty: " + e);
        }
        bus.shutdown(false);
    }

    private static final class Handlers extends ContextHandlerCollection {
        private final EchoOptions options;

        Handlers(EchoOptions options) {
            this.options = options;
        }

        @Override
        public void handle(String target, Request base, HttpServletRequest request, HttpServletResponse response)
                throws IOException, jakarta.servlet.ServletException {
            response.setHeader(Bodies.BACKEND_HEADER, options.backendId());
            response.setHeader(Bodies.RUNTIME_HEADER, "cxf");
            long declared = Bodies.declaredLength(request.getHeader("Content-Length"),
                    request.getHeader("Transfer-Encoding"));
            try {
                if ("/raw".equals(target)) {
                    base.setHandled(true);
                    rawEcho(request, response, declared);
                    return;
                }
                if (declared > options.maxBodyBytes()) {
                    throw new Bodies.TooLarge(options.maxBodyBytes());
                }
                if (declared == Bodies.CHUNKED) {
                    request = new Buffered(request, Bodies.read(request.getInputStream(), declared, options.maxBodyBytes()));
                }
            } catch (Bodies.TooLarge e) {
                base.setHandled(true);
                response.setHeader("Connection", "close");
                plain(response, 413, e.getMessage());
                return;
            }
            super.handle(target, base, request, response);
        }

        private void rawEcho(HttpServletRequest request, HttpServletResponse response, long declared) throws IOException {
            if (!"POST".equals(request.getMethod())) {
                response.setHeader("Allow", "POST");
                plain(response, 405, "the raw echo takes POST only");
                return;
            }
            byte[] body = Bodies.read(request.getInputStream(), declared, options.maxBodyBytes());
            options.simulateWork();
            response.setStatus(200);
            String type = request.getHeader("Content-Type");
            if (type != null) {
                response.setHeader("Content-Type", type);
            }
            response.setContentLength(body.length);
            response.getOutputStream().write(body);
        }
    }

    private static void plain(HttpServletResponse response, int status, String text) throws IOException {
        byte[] bytes = (text + "\n").getBytes(StandardCharsets.UTF_8);
        response.setStatus(status);
        response.setContentType("text/plain; charset=utf-8");
        response.setContentLength(bytes.length);
        response.getOutputStream().write(bytes);
    }

    /** A request whose chunked body has already been read (to apply the limit). */
    private static final class Buffered extends HttpServletRequestWrapper {
        private final int length;
        private final ServletInputStream in;

        Buffered(HttpServletRequest request, byte[] body) {
            super(request);
            this.length = body.length;
            ByteArrayInputStream bytes = new ByteArrayInputStream(body);
            this.in = new ServletInputStream() {
                @Override
                public int read() {
                    return bytes.read();
                }

                @Override
                public int read(byte[] b, int off, int len) {
                    return bytes.read(b, off, len);
                }

                @Override
                public boolean isFinished() {
                    return bytes.available() == 0;
                }

                @Override
                public boolean isReady() {
                    return true;
                }

                @Override
                public void setReadListener(ReadListener listener) {
                    throw new UnsupportedOperationException("blocking reads only");
                }
            };
        }

        @Override
        public int getContentLength() {
            return length;
        }

        @Override
        public long getContentLengthLong() {
            return length;
        }

        @Override
        public ServletInputStream getInputStream() {
            return in;
        }
    }
}
