package esbperf.echo;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpMessage;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerKeepAliveHandler;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.FastThreadLocal;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;

/**
 * The same wire contract on Netty's HTTP codec, without a SOAP stack: a back end cheap enough to
 * share a core with the ESB it serves. The thesis echo reads its request with {@link ThesisScan},
 * in place, and answers the very bytes the JAX-WS RI writes around the message, which it takes
 * from the request as it came; the raw echo hands the request's buffer back. At 100 KB what is
 * left is mostly the kernel's two copies. Event loops, one per core (at most --threads): nothing
 * blocks them, and --delay-ms is a timer, not a sleeping thread.
 */
final class LeanRuntime implements EchoRuntime {

    static final String RUNTIME = "lean";
    // Header names as written here go on the wire as they are: Synapse reads Content-Type case-sensitively.
    private static final String CONTENT_TYPE = "Content-Type";
    private static final String CONTENT_LENGTH = "Content-Length";
    private static final String SOAP_TYPE = "text/xml; charset=utf-8";
    private static final String WSDL_TYPE = "text/xml;charset=utf-8";  // as the RI labels its WSDL
    private static final String TEXT_TYPE = "text/plain; charset=utf-8";

    // The RI's answer around "{id} {message}" (tests/test_echo.py compares the two byte for byte).
    private static final byte[] ANSWER_HEAD = ascii("<?xml version='1.0' encoding='UTF-8'?><S:Envelope xmlns:S=\""
            + ThesisScan.SOAP_ENV + "\"><S:Body><ns2:echoMessageResponse xmlns:ns2=\"" + EchoService.NAMESPACE
            + "\"><WSResponse>");
    private static final String ANSWER_TAIL = "]</WSResponse></ns2:echoMessageResponse></S:Body></S:Envelope>";
    /** Content in pieces as large as a read gives (not 8 KB): fewer pieces for the aggregator to join. */
    private static final HttpDecoderConfig DECODER = new HttpDecoderConfig().setMaxChunkSize(1 << 20);
    /** Below this, the message is copied into one answer buffer; above, the answer points at the request's bytes. */
    private static final int COPY_BELOW = 8192;
    /** Each event loop's scratch copy of a request in pieces, grown to the largest seen: no array per request. */
    private static final FastThreadLocal<byte[]> SCRATCH = new FastThreadLocal<>() {
        @Override
        protected byte[] initialValue() {
            return new byte[16384];
        }
    };
    /** A Host header fit to be written into the WSDL's addresses; anything else gets the listen address. */
    private static final Pattern HOST = Pattern.compile("[A-Za-z0-9._\\-]+(:[0-9]{1,5})?|\\[[0-9A-Fa-f:.]+\\](:[0-9]{1,5})?");

    private final EventLoopGroup loops;
    private final Channel server;
    private final AtomicInteger inFlight;

    private LeanRuntime(EventLoopGroup loops, Channel server, AtomicInteger inFlight) {
        this.loops = loops;
        this.server = server;
        this.inFlight = inFlight;
    }

    static LeanRuntime start(EchoOptions options) throws Exception {
        int threads = Math.min(options.threads(), Runtime.getRuntime().availableProcessors());
        EventLoopGroup loops = new NioEventLoopGroup(threads, new DefaultThreadFactory("echo"));
        AtomicInteger inFlight = new AtomicInteger();
        Service service = new Service(options, inFlight);
        try {
            Channel server = new ServerBootstrap()
                    .group(loops)
                    .channel(NioServerSocketChannel.class)
                    .option(ChannelOption.SO_BACKLOG, EchoMain.ACCEPT_BACKLOG)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    // Reads grow to 256 KB (Netty's default stops at 64 KB): a 100 KB request in one read.
                    .childOption(ChannelOption.RCVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(64, 2048, 256 * 1024))
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel channel) {
                            // The limit (an aggregator) before keep-alive: its 413s go straight to the
                            // codec, and it closes the connection itself once it has read enough.
                            channel.pipeline().addLast(new HttpServerCodec(DECODER), new Limit(options),
                                    new HttpServerKeepAliveHandler(), service);
                        }
                    })
                    .bind(new InetSocketAddress(options.host(), options.port())).sync().channel();
            return new LeanRuntime(loops, server, inFlight);
        } catch (Exception e) {
            loops.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            throw e;
        }
    }

    @Override
    public String description() {
        io.netty.util.Version version = io.netty.util.Version.identify().get("netty-codec-http");
        return "Netty" + (version == null ? "" : " " + version.artifactVersion()) + ", no SOAP stack";
    }

    @Override
    public void close() {
        server.close().syncUninterruptibly();
        // Let requests in flight (a --delay-ms among them) finish, at most 1 s, as the others do.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        while (inFlight.get() > 0 && System.nanoTime() < deadline) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        loops.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }

    /**
     * The answer to a thesis request whose message is message[start, end): exactly the RI's bytes
     * when the message holds no escapes (with them, the same XML content). A long message is not
     * copied: the answer is a composite of its head, the message's own bytes (a retained slice of
     * the request) and its tail, which the socket writes in one gathering write.
     */
    static ByteBuf answer(ByteBufAllocator alloc, int id, ByteBuf message, int start, int end, byte[] tail) {
        byte[] number = ascii(id + " ");
        int length = end - start;
        if (length < COPY_BELOW) {
            ByteBuf out = alloc.directBuffer(ANSWER_HEAD.length + number.length + length + tail.length);
            return out.writeBytes(ANSWER_HEAD).writeBytes(number).writeBytes(message, start, length).writeBytes(tail);
        }
        ByteBuf head = alloc.directBuffer(ANSWER_HEAD.length + number.length).writeBytes(ANSWER_HEAD).writeBytes(number);
        ByteBuf last = alloc.directBuffer(tail.length).writeBytes(tail);
        return alloc.compositeDirectBuffer(3).addComponents(true, head, message.retainedSlice(start, length), last);
    }

    /** What follows the message in every answer of this back end: " [echoed by ID]" and the closing tags. */
    static byte[] answerTail(String backendId) {
        return ascii(" [echoed by " + backendId + ANSWER_TAIL);
    }

    /** A SOAP 1.1 fault as the RI writes one (without its stray namespace declaration). */
    static byte[] fault(String code, String reason) {
        return ("<?xml version='1.0' encoding='UTF-8'?><S:Envelope xmlns:S=\"" + ThesisScan.SOAP_ENV + "\"><S:Body>"
                + "<S:Fault><faultcode>S:" + code + "</faultcode><faultstring>" + escape(reason)
                + "</faultstring></S:Fault></S:Body></S:Envelope>").getBytes(StandardCharsets.UTF_8);
    }

    /** Text for XML: markup escaped, characters XML forbids (from a request's bad bytes) replaced. */
    static String escape(String text) {
        StringBuilder out = new StringBuilder(text.length() + 16);
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '<' -> out.append("&lt;");
                case '>' -> out.append("&gt;");
                case '&' -> out.append("&amp;");
                default -> out.append(c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0xFFFE || c == 0xFFFF
                        || Character.isSurrogate(c) ? '?' : c);
            }
        }
        return out.toString();
    }

    /** The request handler: /echo (SOAP and its WSDL) and /raw, one instance for all connections. */
    @io.netty.channel.ChannelHandler.Sharable
    private static final class Service extends SimpleChannelInboundHandler<FullHttpRequest> {
        private static final int KEEP = 0;
        private static final int CLOSE = 1;
        private static final int DELAYED = 2;
        private final EchoOptions options;
        private final AtomicInteger inFlight;
        private final byte[] tail;
        private final String wsdl;
        private final byte[] xsd;

        Service(EchoOptions options, AtomicInteger inFlight) {
            this.options = options;
            this.inFlight = inFlight;
            this.tail = answerTail(options.backendId());
            this.wsdl = new String(resource("echo.wsdl"), StandardCharsets.UTF_8);
            this.xsd = resource("echo.xsd");
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
            if (!request.decoderResult().isSuccess()) {
                send(ctx, plain(HttpResponseStatus.BAD_REQUEST, "malformed HTTP request"), CLOSE);
                return;
            }
            String uri = request.uri();
            int query = uri.indexOf('?');
            String path = query < 0 ? uri : uri.substring(0, query);
            HttpMethod method = request.method();
            // Prefixes, as the RI's contexts match them.
            if (path.equals("/echo") || path.startsWith("/echo/")) {
                if (method.equals(HttpMethod.POST)) {
                    soap(ctx, request);
                } else if (method.equals(HttpMethod.GET) || method.equals(HttpMethod.HEAD)) {
                    metadata(ctx, request, query < 0 ? "" : uri.substring(query + 1));
                } else {
                    FullHttpResponse response = plain(HttpResponseStatus.METHOD_NOT_ALLOWED, "the SOAP echo takes POST (and GET ?wsdl)");
                    response.headers().set("Allow", "POST, GET");
                    send(ctx, response, KEEP);
                }
            } else if (path.equals("/raw") || path.startsWith("/raw/")) {
                if (method.equals(HttpMethod.POST)) {
                    raw(ctx, request);
                } else {
                    FullHttpResponse response = plain(HttpResponseStatus.METHOD_NOT_ALLOWED, "the raw echo takes POST only");
                    response.headers().set("Allow", "POST");
                    send(ctx, response, KEEP);
                }
            } else {
                send(ctx, plain(HttpResponseStatus.NOT_FOUND, "no such path: this echo serves /echo and /raw"), KEEP);
            }
        }

        private void soap(ChannelHandlerContext ctx, FullHttpRequest request) {
            String type = request.headers().get(CONTENT_TYPE);
            if (type != null && !type.toLowerCase(Locale.ROOT).startsWith("text/xml")) {
                // As the RI: a SOAP 1.1 endpoint answers another media type (SOAP 1.2's among them) with 415.
                send(ctx, response(HttpResponseStatus.UNSUPPORTED_MEDIA_TYPE, Unpooled.EMPTY_BUFFER, null), KEEP);
                return;
            }
            // The scan reads the request where it lies when it came in one piece (one read, usually),
            // else a copy in one array; the answer takes the message from the request, at the same offsets.
            ByteBuf content = request.content();
            int length = content.readableBytes();
            ByteBuffer body;
            if (content.nioBufferCount() == 1) {
                body = content.nioBuffer(content.readerIndex(), length).slice();
            } else {
                byte[] scratch = SCRATCH.get();
                if (scratch.length < length) {
                    scratch = new byte[Math.max(length, 2 * scratch.length)];
                    SCRATCH.set(scratch);
                }
                content.getBytes(content.readerIndex(), scratch, 0, length);
                body = ByteBuffer.wrap(scratch);
            }
            ByteBuf answer;
            try {
                if (type != null && !charsetIsUtf8(type)) {
                    throw new ThesisScan.Unreadable("Client", "only UTF-8 requests are read; the Content-Type says " + type);
                }
                ThesisScan.Request read = ThesisScan.scan(body, 0, length);
                int at = content.readerIndex();
                answer = answer(ctx.alloc(), read.id(), content, at + read.messageStart(), at + read.messageEnd(), tail);
            } catch (ThesisScan.Unreadable e) {
                // Faults come at once: on the others, too, only the service method waits.
                send(ctx, response(HttpResponseStatus.INTERNAL_SERVER_ERROR,
                        Unpooled.wrappedBuffer(fault(e.code, e.getMessage())), SOAP_TYPE), KEEP);
                return;
            }
            send(ctx, response(HttpResponseStatus.OK, answer, SOAP_TYPE), DELAYED);
        }

        private void metadata(ChannelHandlerContext ctx, FullHttpRequest request, String query) {
            if (query.equalsIgnoreCase("wsdl")) {
                String host = request.headers().get("Host");
                String base = host != null && HOST.matcher(host).matches() ? "http://" + host : options.baseUrl();
                byte[] bytes = wsdl.replace("@BASE_URL@", base).getBytes(StandardCharsets.UTF_8);
                send(ctx, response(HttpResponseStatus.OK, Unpooled.wrappedBuffer(bytes), WSDL_TYPE), KEEP);
            } else if (query.equalsIgnoreCase("xsd=1")) {
                send(ctx, response(HttpResponseStatus.OK, Unpooled.wrappedBuffer(xsd), WSDL_TYPE), KEEP);
            } else {
                send(ctx, plain(HttpResponseStatus.NOT_FOUND, "the echo's WSDL is at /echo?wsdl"), KEEP);
            }
        }

        private void raw(ChannelHandlerContext ctx, FullHttpRequest request) {
            String type = request.headers().get(CONTENT_TYPE);
            // The request's own buffer goes back out: no copy (the write releases it).
            send(ctx, response(HttpResponseStatus.OK, request.content().retain(), type), DELAYED);
        }

        /** Sends now (KEEP, CLOSE: then closes), or DELAYED: after --delay-ms on the connection's own event loop. */
        private void send(ChannelHandlerContext ctx, FullHttpResponse response, int how) {
            inFlight.incrementAndGet();
            Runnable write = () -> {
                var sent = ctx.writeAndFlush(response);
                sent.addListener(future -> inFlight.decrementAndGet());
                if (how == CLOSE) {
                    sent.addListener(ChannelFutureListener.CLOSE);
                }
            };
            if (how == DELAYED && options.delayMs() > 0) {
                ctx.executor().schedule(write, options.delayMs(), TimeUnit.MILLISECONDS);
            } else {
                write.run();
            }
        }

        private FullHttpResponse response(HttpResponseStatus status, ByteBuf content, String type) {
            FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, content);
            HttpHeaders headers = response.headers();
            headers.set(Bodies.BACKEND_HEADER, options.backendId());
            headers.set(Bodies.RUNTIME_HEADER, RUNTIME);
            if (type != null) {
                headers.set(CONTENT_TYPE, type);
            }
            headers.set(CONTENT_LENGTH, content.readableBytes());
            return response;
        }

        private FullHttpResponse plain(HttpResponseStatus status, String text) {
            return response(status, Unpooled.wrappedBuffer((text + "\n").getBytes(StandardCharsets.UTF_8)), TEXT_TYPE);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();  // a reset connection and the like: nothing to answer, nothing to log per request
        }
    }

    /**
     * Netty's aggregator, with the other runtimes' 413: at once, closing, when Content-Length says
     * the body is too long; for a chunked body, once the limit is read, and then the rest is read
     * and dropped (up to the limit again) before closing, so the client reads the 413, not a reset.
     */
    private static final class Limit extends HttpObjectAggregator {
        private final EchoOptions options;
        private long dropped = -1;  // >= 0: dropping the rest of an oversized chunked body

        Limit(EchoOptions options) {
            super((int) options.maxBodyBytes());
            this.options = options;
        }

        @Override
        protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
            byte[] text = (new Bodies.TooLarge(options.maxBodyBytes()).getMessage() + "\n").getBytes(StandardCharsets.UTF_8);
            FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1,
                    HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, Unpooled.wrappedBuffer(text));
            response.headers().set(Bodies.BACKEND_HEADER, options.backendId()).set(Bodies.RUNTIME_HEADER, RUNTIME)
                    .set(CONTENT_TYPE, TEXT_TYPE).set(CONTENT_LENGTH, text.length).set("Connection", "close");
            var sent = ctx.writeAndFlush(response);
            if (oversized instanceof FullHttpMessage) {
                dropped = 0;  // chunked: the aggregate so far; the aggregator drops what follows
            } else {
                sent.addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
            if (dropped < 0 || !(msg instanceof HttpContent content)) {
                super.channelRead(ctx, msg);
                return;
            }
            dropped += content.content().readableBytes();
            boolean last = msg instanceof LastHttpContent;
            super.channelRead(ctx, msg);  // dropped and released by the aggregator
            if (last || dropped > options.maxBodyBytes()) {
                ctx.close();
            }
        }
    }

    /** Whether a Content-Type's charset, if it names one, is UTF-8 (or ASCII, a subset). */
    static boolean charsetIsUtf8(String contentType) {
        String lower = contentType.toLowerCase(Locale.ROOT);
        int at = lower.indexOf("charset=");
        if (at < 0) {
            return true;
        }
        int end = lower.indexOf(';', at);
        String charset = lower.substring(at + 8, end < 0 ? lower.length() : end).replace("\"", "").trim();
        return charset.equals("utf-8") || charset.equals("utf8") || charset.equals("us-ascii");
    }

    private static byte[] resource(String name) {
        try (InputStream in = LeanRuntime.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException("resource " + name + " is missing from the jar");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}
