package esbperf.echo;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/** What one echo back end is told at start; parsed from the command line esbperf builds. */
public record EchoOptions(String backendId, String host, int port, String runtime, int delayMs,
                          long maxBodyBytes, int threads) {

    private static final long MB = 1024L * 1024L;
    public static final List<String> RUNTIMES = List.of("jaxws", "cxf", "lean");
    /** The id goes into a response header and the SOAP answer: keep it to safe characters. */
    private static final Pattern ID = Pattern.compile("[A-Za-z0-9._-]{1,64}");
    private static final String USAGE = "usage: --id ID [--host H] --port P [--runtime jaxws|cxf|lean] "
            + "[--delay-ms N] [--max-body-mb N] [--threads N]";

    public EchoOptions {
        if (backendId == null || !ID.matcher(backendId).matches()) {
            throw new IllegalArgumentException("--id must be 1-64 letters, digits, '.', '_' or '-', got " + backendId);
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("--port must be 1-65535, got " + port);
        }
        if (!RUNTIMES.contains(runtime)) {
            throw new IllegalArgumentException("--runtime must be one of " + RUNTIMES + ", got " + runtime);
        }
        if (delayMs < 0) {
            throw new IllegalArgumentException("--delay-ms must be 0 or more, got " + delayMs);
        }
        if (maxBodyBytes < MB || maxBodyBytes > 1024 * MB) {
            throw new IllegalArgumentException("--max-body-mb must be 1-1024, got " + maxBodyBytes / MB);
        }
        if (threads < 1) {
            throw new IllegalArgumentException("--threads must be at least 1, got " + threads);
        }
    }

    public static EchoOptions parse(String... args) {
        Map<String, String> given = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("unexpected argument '" + args[i] + "'; " + USAGE);
            }
            given.put(args[i], args[i + 1]);
        }
        EchoOptions options = new EchoOptions(
                given.remove("--id"),
                given.getOrDefault("--host", "127.0.0.1"),
                number(given, "--port", null),
                given.getOrDefault("--runtime", "jaxws"),
                number(given, "--delay-ms", 0),
                number(given, "--max-body-mb", 16) * MB,
                number(given, "--threads", 400));
        for (String known : List.of("--host", "--port", "--runtime", "--delay-ms", "--max-body-mb", "--threads")) {
            given.remove(known);
        }
        if (!given.isEmpty()) {
            throw new IllegalArgumentException("unknown option " + given.keySet().iterator().next() + "; " + USAGE);
        }
        return options;
    }

    private static int number(Map<String, String> given, String name, Integer fallback) {
        String text = given.get(name);
        if (text == null) {
            if (fallback == null) {
                throw new IllegalArgumentException(name + " is required; " + USAGE);
            }
            return fallback;
        }
        try {
            return Integer.parseInt(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be a whole number, got '" + text + "'");
        }
    }

    /** The base URL clients use; IPv6 literals need brackets. */
    public String baseUrl() {
        return "http://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }

    /** Emulates a slow back end (--delay-ms); a no-op by default. */
    public void simulateWork() {
        if (delayMs > 0) {
            try {
                Thread.sleep(delayMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
