package esbperf.echo;

/** One running echo server (a SOAP stack and its HTTP server, or the lean one); closing it stops it. */
public interface EchoRuntime extends AutoCloseable {

    /** Publishes the service and the raw echo on the runtime chosen by --runtime. */
    static EchoRuntime start(EchoOptions options) throws Exception {
        return switch (options.runtime()) {
            case "jaxws" -> RiRuntime.start(options);
            case "cxf" -> CxfRuntime.start(options);
            case "lean" -> LeanRuntime.start(options);
            default -> throw new IllegalArgumentException("unknown runtime " + options.runtime());
        };
    }

    /** A name for the banner, e.g. "JAX-WS RI 4.0.2 on the JDK HttpServer". */
    String description();

    @Override
    void close();
}
