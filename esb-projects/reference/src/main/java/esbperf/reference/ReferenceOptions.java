package esbperf.reference;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the reference engine is told at start, from the command line esbperf builds out of its
 * engine.yaml: where to listen, the three back ends, the back-end timeout, and the work settings.
 */
record ReferenceOptions(String host, int port, Map<String, Backend> backends, int backendTimeoutMs,
                        int connectTimeoutMs, int threads, Work.Settings work) {

    static final List<String> BACKEND_IDS = List.of("ws1", "ws2", "ws3");
    private static final String USAGE = "usage: --host H --port P --ws1 URL --ws2 URL --ws3 URL "
            + "--work N [--backend-timeout-ms N] [--connect-timeout-ms N] [--threads N] "
            + "[--warmup-factor F] [--warmup-s S] [--step-at S] [--step-factor X]";

    /** A back end: its id (ws1..ws3), where to connect, and the Host header it is sent. */
    record Backend(String id, String host, int port, String hostHeader) {
    }

    static ReferenceOptions parse(String... args) {
        Map<String, String> given = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("unexpected argument '" + args[i] + "'; " + USAGE);
            }
            if (given.put(args[i], args[i + 1]) != null) {
                throw new IllegalArgumentException(args[i] + " is given twice");
            }
        }
        String host = required(given, "--host");
        int port = whole(given, "--port", null, 1, 65535);
        Map<String, Backend> backends = new LinkedHashMap<>();
        for (String id : BACKEND_IDS) {
            backends.put(id, backend(id, required(given, "--" + id)));
        }
        int timeoutMs = whole(given, "--backend-timeout-ms", 120_000, 1, Integer.MAX_VALUE);
        int connectMs = whole(given, "--connect-timeout-ms", Math.min(timeoutMs, 10_000), 1, Integer.MAX_VALUE);
        int threads = whole(given, "--threads", Runtime.getRuntime().availableProcessors(), 1, 1024);
        Work.Settings work = new Work.Settings(
                whole(given, "--work", null, 0, Work.MAX_ROUNDS),
                number(given, "--warmup-factor", 1.0, 0, 1000),
                number(given, "--warmup-s", 0, 0, 86_400),
                number(given, "--step-at", 0, 0, 86_400),
                number(given, "--step-factor", 1.0, 0, 1000));
        if (!given.isEmpty()) {
            throw new IllegalArgumentException("unknown option " + given.keySet().iterator().next() + "; " + USAGE);
        }
        return new ReferenceOptions(host, port, backends, timeoutMs, connectMs, threads, work);
    }

    private static Backend backend(String id, String url) {
        URI uri;
        try {
            uri = new URI(url);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("--" + id + " must be an http://HOST:PORT URL, got '" + url + "'");
        }
        if (!"http".equals(uri.getScheme()) || uri.getHost() == null
                || !(uri.getPath() == null || uri.getPath().isEmpty() || uri.getPath().equals("/"))) {
            throw new IllegalArgumentException("--" + id + " must be an http://HOST:PORT URL, got '" + url + "'");
        }
        String host = uri.getHost();
        int port = uri.getPort() < 0 ? 80 : uri.getPort();
        String bare = host.startsWith("[") ? host.substring(1, host.length() - 1) : host;
        return new Backend(id, bare, port, host + ":" + port);
    }

    private static String required(Map<String, String> given, String name) {
        String value = given.remove(name);
        if (value == null) {
            throw new IllegalArgumentException(name + " is required; " + USAGE);
        }
        return value;
    }

    private static int whole(Map<String, String> given, String name, Integer fallback, int min, int max) {
        String text = given.remove(name);
        if (text == null) {
            if (fallback == null) {
                throw new IllegalArgumentException(name + " is required; " + USAGE);
            }
            return fallback;
        }
        try {
            int value = Integer.parseInt(text);
            if (value < min || value > max) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be a whole number " + min + "-" + max + ", got '" + text + "'");
        }
    }

    private static double number(Map<String, String> given, String name, double fallback, double min, double max) {
        String text = given.remove(name);
        if (text == null) {
            return fallback;
        }
        try {
            double value = Double.parseDouble(text);
            if (!(value >= min && value <= max)) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be a number " + min + "-" + max + ", got '" + text + "'");
        }
    }
}
