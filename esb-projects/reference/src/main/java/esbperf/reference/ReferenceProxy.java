package esbperf.reference;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerKeepAliveHandler;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.handler.timeout.IdleStateHandler;
import io.netty.util.AsciiString;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.FastThreadLocal;
import io.netty.util.concurrent.ScheduledFuture;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The proxy: the contract's direct-proxy and header-routing paths on Netty's HTTP codec, with the
 * request's work done on its event loop before it is forwarded. Back-end connections live on the
 * event loop of the client connection that uses them, in a keep-alive pool per loop and back end
 * (no locks, no thread hand-over); idle ones are closed after 10 s, before the echo's own 30 s.
 * A client connection's requests are answered one at a time, in order (a pipelined request waits).
 */
final class ReferenceProxy implements AutoCloseable {

    static final String STATS_PATH = "/reference/stats";
    private static final int MAX_REQUEST_BYTES = 16 << 20;   // the sweeps go to 1 MB; the ESBs take 16 MB
    private static final int MAX_ANSWER_BYTES = 32 << 20;
    private static final int IDLE_BACKEND_S = 10;
    private static final int ACCEPT_BACKLOG = 4096;
    private static final HttpDecoderConfig DECODER = new HttpDecoderConfig().setMaxChunkSize(1 << 20);
    private static final AsciiString ROUTE_HEADER = AsciiString.cached("X-Route-To");
    private static final AsciiString BACKEND_HEADER = AsciiString.cached("X-Echo-Backend");
    private static final String SOAP_TYPE = "text/xml; charset=utf-8";
    private static final String TEXT_TYPE = "text/plain; charset=utf-8";
    private static final String JSON_TYPE = "application/json";
    /** Request headers not passed on: hop-by-hop ones, and those the forwarded request sets itself. */
    private static final Set<AsciiString> NOT_FORWARDED = Set.of(HttpHeaderNames.CONNECTION, HttpHeaderNames.KEEP_ALIVE,
            HttpHeaderNames.PROXY_AUTHENTICATE, HttpHeaderNames.PROXY_AUTHORIZATION, HttpHeaderNames.TE,
            HttpHeaderNames.TRAILER, HttpHeaderNames.TRANSFER_ENCODING, HttpHeaderNames.UPGRADE, HttpHeaderNames.HOST,
            HttpHeaderNames.CONTENT_LENGTH, HttpHeaderNames.EXPECT);
    private static final Map<String, String> PROXY_PATHS = Map.of("/proxy/echo", "/echo", "/proxy/raw", "/raw");
    private static final Map<String, String> ROUTED_PATHS = Map.of("/hbr/echo", "/echo", "/hbr/raw", "/raw");

    private final EventLoopGroup loops;
    private final Channel server;

    private ReferenceProxy(EventLoopGroup loops, Channel server) {
        this.loops = loops;
        this.server = server;
    }

    static ReferenceProxy start(ReferenceOptions options, Account account) throws Exception {
        EventLoopGroup loops = new NioEventLoopGroup(options.threads(), new DefaultThreadFactory("reference"));
        Shared shared = new Shared(options, account);
        try {
            Channel server = new ServerBootstrap()
                    .group(loops)
                    .channel(NioServerSocketChannel.class)
                    .option(ChannelOption.SO_BACKLOG, ACCEPT_BACKLOG)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childOption(ChannelOption.RCVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(64, 2048, 256 * 1024))
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel channel) {
                            channel.pipeline().addLast(new HttpServerCodec(DECODER),
                                    new HttpObjectAggregator(MAX_REQUEST_BYTES), new HttpServerKeepAliveHandler(),
                                    new Inbound(shared));
                        }
                    })
                    .bind(new InetSocketAddress(options.host(), options.port())).sync().channel();
            return new ReferenceProxy(loops, server);
        } catch (Exception e) {
            loops.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            throw e;
        }
    }

    @Override
    public void close() {
        server.close().syncUninterruptibly();
        loops.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }

    /** What every connection shares: the settings, the account, the back ends' addresses. */
    private record Shared(ReferenceOptions options, Account account, Map<String, InetSocketAddress> addresses) {
        Shared(ReferenceOptions options, Account account) {
            this(options, account, resolve(options));
        }

        private static Map<String, InetSocketAddress> resolve(ReferenceOptions options) {
            Map<String, InetSocketAddress> found = new HashMap<>();
            options.backends().forEach((id, b) -> found.put(id, new InetSocketAddress(b.host(), b.port())));
            return found;
        }
    }

    /** One event loop's idle keep-alive connections per back end, and its work buffer. */
    private static final class LoopState {
        final Map<String, ArrayDeque<Channel>> idle = new HashMap<>();
        final Map<String, Bootstrap> connectors = new HashMap<>();
        final long[] words = Work.buffer();

        ArrayDeque<Channel> idle(String backend) {
            return idle.computeIfAbsent(backend, k -> new ArrayDeque<>());
        }
    }

    private static final FastThreadLocal<LoopState> LOOP = new FastThreadLocal<>() {
        @Override
        protected LoopState initialValue() {
            return new LoopState();
        }
    };

    /** A client connection: its requests, one at a time. */
    private static final class Inbound extends SimpleChannelInboundHandler<FullHttpRequest> {
        private final Shared shared;
        private final ArrayDeque<FullHttpRequest> waiting = new ArrayDeque<>();
        private boolean busy;

        Inbound(Shared shared) {
            this.shared = shared;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
            if (busy) {
                waiting.add(request.retain());
                return;
            }
            busy = true;
            handle(ctx, request);
        }

        /** The answer to the current request went out: the next one waiting, if any. */
        void done(ChannelHandlerContext ctx) {
            FullHttpRequest next = waiting.poll();
            if (next == null) {
                busy = false;
                return;
            }
            try {
                handle(ctx, next);
            } finally {
                next.release();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            FullHttpRequest left;
            while ((left = waiting.poll()) != null) {
                left.release();
            }
            super.channelInactive(ctx);
        }

        private void handle(ChannelHandlerContext ctx, FullHttpRequest request) {
            if (!request.decoderResult().isSuccess()) {
                reply(ctx, plain(HttpResponseStatus.BAD_REQUEST, "malformed HTTP request"), true);
                return;
            }
            String uri = request.uri();
            int query = uri.indexOf('?');
            String path = query < 0 ? uri : uri.substring(0, query);
            HttpMethod method = request.method();
            if (path.equals(STATS_PATH)) {
                if (method.equals(HttpMethod.GET)) {
                    byte[] json = shared.account().json().getBytes(StandardCharsets.UTF_8);
                    reply(ctx, response(HttpResponseStatus.OK, Unpooled.wrappedBuffer(json), JSON_TYPE), false);
                } else {
                    reply(ctx, notAllowed("GET"), false);
                }
                return;
            }
            String target = PROXY_PATHS.get(path);
            String backend = "ws1";
            if (target == null) {
                target = ROUTED_PATHS.get(path);
                if (target == null) {
                    reply(ctx, plain(HttpResponseStatus.NOT_FOUND, "no such path: the reference engine serves POST "
                            + "/proxy/echo, /proxy/raw, /hbr/echo, /hbr/raw and GET " + STATS_PATH), false);
                    return;
                }
                List<String> routes = request.headers().getAll(ROUTE_HEADER);
                backend = routes.size() == 1 ? routes.get(0) : null;
                if (method.equals(HttpMethod.POST) && (backend == null || !shared.options().backends().containsKey(backend))) {
                    reply(ctx, plain(HttpResponseStatus.BAD_REQUEST, "X-Route-To must be exactly one of "
                            + String.join(", ", ReferenceOptions.BACKEND_IDS)), false);
                    return;
                }
            }
            if (!method.equals(HttpMethod.POST)) {
                reply(ctx, notAllowed("POST"), false);
                return;
            }
            forward(ctx, request, backend, target);
        }

        /** The request's work, on this thread, then the request to the back end on a pooled connection. */
        private void forward(ChannelHandlerContext ctx, FullHttpRequest request, String backend, String path) {
            Account account = shared.account();
            LoopState loop = LOOP.get();
            int rounds = account.proxied();
            if (rounds > 0) {
                long before = Work.threadCpuNanos();
                long result = Work.run(loop.words, rounds);
                account.worked(rounds, Work.threadCpuNanos() - before, result);
            }
            ReferenceOptions.Backend to = shared.options().backends().get(backend);
            FullHttpRequest out = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, path,
                    request.content().retainedDuplicate());
            HttpHeaders headers = out.headers();
            for (var given = request.headers().iteratorCharSequence(); given.hasNext(); ) {
                Map.Entry<CharSequence, CharSequence> h = given.next();
                if (!NOT_FORWARDED.contains(AsciiString.of(h.getKey()).toLowerCase())) {
                    headers.add(h.getKey(), h.getValue());
                }
            }
            headers.set(HttpHeaderNames.HOST, to.hostHeader());
            headers.set(HttpHeaderNames.CONTENT_LENGTH, out.content().readableBytes());
            Exchange exchange = new Exchange(this, ctx, backend, shared);
            ArrayDeque<Channel> idle = loop.idle(backend);
            Channel pooled;
            while ((pooled = idle.pollFirst()) != null && !pooled.isActive()) {
                // closed while idle (its close handler removes it; a race leaves it here): skip it
            }
            if (pooled != null) {
                exchange.send(pooled, out);
                return;
            }
            Bootstrap connector = loop.connectors.computeIfAbsent(backend,
                    id -> connector(ctx.channel().eventLoop(), id, shared, loop));
            connector.connect(shared.addresses().get(backend)).addListener((ChannelFutureListener) connected -> {
                if (connected.isSuccess()) {
                    exchange.send(connected.channel(), out);
                } else {
                    out.release();
                    exchange.fail(HttpResponseStatus.BAD_GATEWAY, backend + " cannot be reached: " + connected.cause());
                }
            });
        }

        private void reply(ChannelHandlerContext ctx, FullHttpResponse response, boolean close) {
            var written = ctx.writeAndFlush(response);
            if (close) {
                written.addListener(ChannelFutureListener.CLOSE);
            } else {
                done(ctx);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();   // a reset client connection and the like: nothing to answer, nothing to log per request
        }
    }

    private static Bootstrap connector(EventLoop loop, String backend, Shared shared, LoopState state) {
        return new Bootstrap()
                .group(loop)
                .channel(NioSocketChannel.class)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, shared.options().connectTimeoutMs())
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.RCVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(64, 2048, 256 * 1024))
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel channel) {
                        channel.pipeline().addLast(new HttpClientCodec(), new HttpObjectAggregator(MAX_ANSWER_BYTES),
                                new IdleStateHandler(0, 0, IDLE_BACKEND_S), new Outbound(state.idle(backend)));
                    }
                });
    }

    /** One request's way to its back end and back: answered once, by the back end, a failure or the timeout. */
    private static final class Exchange {
        private final Inbound inbound;
        private final ChannelHandlerContext client;
        private final String backend;
        private final Shared shared;
        private final ScheduledFuture<?> timeout;
        private Channel connection;
        private boolean finished;

        Exchange(Inbound inbound, ChannelHandlerContext client, String backend, Shared shared) {
            this.inbound = inbound;
            this.client = client;
            this.backend = backend;
            this.shared = shared;
            int ms = shared.options().backendTimeoutMs();
            this.timeout = client.executor().schedule(() -> {
                if (!finished) {
                    shared.account().timedOut();
                    finish(fault(HttpResponseStatus.GATEWAY_TIMEOUT, backend + " did not answer within " + ms + " ms"));
                    if (connection != null) {
                        connection.close();   // a late answer must not reach the next request on it
                    }
                }
            }, ms, TimeUnit.MILLISECONDS);
        }

        void send(Channel channel, FullHttpRequest request) {
            if (finished) {   // timed out while connecting
                request.release();
                channel.close();
                return;
            }
            connection = channel;
            channel.pipeline().get(Outbound.class).current = this;
            channel.writeAndFlush(request).addListener((ChannelFutureListener) written -> {
                if (!written.isSuccess()) {
                    channel.close();   // Outbound.channelInactive answers 502
                }
            });
        }

        void answered(FullHttpResponse answer) {
            if (finished) {
                return;
            }
            shared.account().answered();
            FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, answer.status(),
                    answer.content().retain());
            HttpHeaders from = answer.headers();
            HttpHeaders to = response.headers();
            String type = from.get(HttpHeaderNames.CONTENT_TYPE);
            if (type != null) {
                to.set(HttpHeaderNames.CONTENT_TYPE, type);
            }
            String who = from.get(BACKEND_HEADER);
            if (who != null) {
                to.set(BACKEND_HEADER, who);
            }
            to.set(HttpHeaderNames.CONTENT_LENGTH, response.content().readableBytes());
            finish(response);
        }

        void fail(HttpResponseStatus status, String reason) {
            if (finished) {
                return;
            }
            shared.account().unreachable();
            finish(fault(status, reason));
        }

        private void finish(FullHttpResponse response) {
            finished = true;
            timeout.cancel(false);
            client.writeAndFlush(response);
            inbound.done(client);
        }
    }

    /** A back-end connection: the exchange it carries, if any; back to its loop's pool after a kept-alive answer. */
    private static final class Outbound extends SimpleChannelInboundHandler<FullHttpResponse> {
        private final ArrayDeque<Channel> pool;
        Exchange current;

        Outbound(ArrayDeque<Channel> pool) {
            this.pool = pool;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpResponse answer) {
            Exchange exchange = current;
            current = null;
            if (exchange == null || exchange.finished) {
                ctx.close();   // an answer nobody waits for (after a timeout): the connection is not reused
                return;
            }
            exchange.answered(answer);
            if (HttpUtil.isKeepAlive(answer) && ctx.channel().isActive()) {
                pool.addFirst(ctx.channel());   // the most recently used first: the others may idle out
            } else {
                ctx.close();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            pool.remove(ctx.channel());
            Exchange exchange = current;
            current = null;
            if (exchange != null) {
                exchange.fail(HttpResponseStatus.BAD_GATEWAY, exchange.backend + " closed the connection without an answer");
            }
            super.channelInactive(ctx);
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object event) throws Exception {
            if (event instanceof IdleStateEvent && current == null) {
                ctx.close();   // idle for 10 s: closed before the back end closes it under a request
                return;
            }
            super.userEventTriggered(ctx, event);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            Exchange exchange = current;
            current = null;
            if (exchange != null) {
                exchange.fail(HttpResponseStatus.BAD_GATEWAY, exchange.backend + ": " + cause);
            }
            ctx.close();
        }
    }

    private static FullHttpResponse response(HttpResponseStatus status, ByteBuf content, String type) {
        FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, content);
        response.headers().set(HttpHeaderNames.CONTENT_TYPE, type).set(HttpHeaderNames.CONTENT_LENGTH, content.readableBytes());
        return response;
    }

    private static FullHttpResponse plain(HttpResponseStatus status, String text) {
        return response(status, Unpooled.wrappedBuffer((text + "\n").getBytes(StandardCharsets.UTF_8)), TEXT_TYPE);
    }

    private static FullHttpResponse notAllowed(String allowed) {
        FullHttpResponse response = plain(HttpResponseStatus.METHOD_NOT_ALLOWED, "this path takes " + allowed);
        response.headers().set(HttpHeaderNames.ALLOW, allowed);
        return response;
    }

    /** A SOAP 1.1 fault of the engine's own (502, 504). */
    static FullHttpResponse fault(HttpResponseStatus status, String reason) {
        String body = "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\"><soapenv:Body>"
                + "<soapenv:Fault><faultcode>soapenv:Server</faultcode><faultstring>" + escape(reason)
                + "</faultstring></soapenv:Fault></soapenv:Body></soapenv:Envelope>";
        return response(status, Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8)), SOAP_TYPE);
    }

    private static String escape(String text) {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }
}
