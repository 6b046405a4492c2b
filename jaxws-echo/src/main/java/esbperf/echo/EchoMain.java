package esbperf.echo;

import java.io.IOException;
import java.io.InputStream;
import java.net.BindException;
import java.util.concurrent.CountDownLatch;
import java.util.logging.LogManager;

/** `java esbperf.echo.EchoMain --id ws1 --port 18001 [...]`: runs one echo back end until SIGTERM. */
public final class EchoMain {

    /** Room for the public rounds' 2560 clients connecting at once without SYN retries. */
    static final int ACCEPT_BACKLOG = 4096;

    private EchoMain() {
    }

    public static void main(String[] args) throws Exception {
        tuneJdk();
        quietLogging();
        EchoOptions options;
        try {
            options = EchoOptions.parse(args);
        } catch (IllegalArgumentException e) {
            fail(e.getMessage());
            return;
        }
        EchoRuntime runtime;
        try {
            runtime = EchoRuntime.start(options);
        } catch (Exception e) {
            // Exit even though the servers' threads may have started: a half-started echo must not linger.
            BindException bind = bindFailure(e);
            if (bind == null) {
                e.printStackTrace();
            }
            fail(bind != null ? "cannot listen on " + options.host() + ":" + options.port() + ": " + bind.getMessage()
                    : "cannot start the " + options.runtime() + " runtime: " + e);
            return;
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            runtime.close();
            System.out.println("echo " + options.backendId() + ": stopped");
            stopped.countDown();
        }, "echo-stop"));
        System.out.println("echo " + options.backendId() + ": " + runtime.description() + " ready; SOAP "
                + options.baseUrl() + "/echo (WSDL ?wsdl), raw echo " + options.baseUrl() + "/raw");
        stopped.await();
    }

    /** JDK settings that must be in place before the first HTTP or XML class loads; -D wins. */
    private static void tuneJdk() {
        // Without it every small answer of the JDK HttpServer waits ~40 ms (Nagle + delayed ACK).
        System.setProperty("sun.net.httpserver.nodelay", System.getProperty("sun.net.httpserver.nodelay", "true"));
        // The default (200) closes keep-alive connections beyond it. A back end serves up to 2560
        // users (public rounds) and still holds the pooled connections of the ESB measured before.
        System.setProperty("sun.net.httpserver.maxIdleConnections",
                System.getProperty("sun.net.httpserver.maxIdleConnections", "16384"));
        // Netty (lean) samples buffers for leak reports with a stack trace each: a cost per request
        // the tests pay, not a benchmark's back end.
        System.setProperty("io.netty.leakDetection.level", System.getProperty("io.netty.leakDetection.level", "disabled"));
        // Defence in depth for the JDK's XML parsers: no external DTD or schema, whatever the stack asks.
        System.setProperty("javax.xml.accessExternalDTD", "");
        System.setProperty("javax.xml.accessExternalSchema", "");
    }

    /** Our logging.properties, unless the user gave one of their own. */
    private static void quietLogging() throws IOException {
        if (System.getProperty("java.util.logging.config.file") != null) {
            return;
        }
        try (InputStream in = EchoMain.class.getResourceAsStream("logging.properties")) {
            LogManager.getLogManager().readConfiguration(in);
        }
    }

    private static BindException bindFailure(Throwable e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause instanceof BindException bind) {
                return bind;
            }
        }
        return null;
    }

    private static void fail(String message) {
        System.err.println("echo: error: " + message);
        System.exit(2);
    }
}
