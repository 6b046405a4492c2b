package esbperf.springintegration;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import javax.xml.transform.Templates;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Lazy;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.converter.ByteArrayHttpMessageConverter;
import org.springframework.http.converter.StringHttpMessageConverter;
import org.springframework.integration.dsl.IntegrationFlow;
import org.springframework.integration.dsl.RouterSpec;
import org.springframework.integration.http.HttpHeaders;
import org.springframework.integration.http.dsl.Http;
import org.springframework.integration.http.dsl.HttpMessageHandlerSpec;
import org.springframework.integration.http.dsl.HttpRequestHandlerEndpointSpec;
import org.springframework.integration.router.MethodInvokingRouter;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.web.client.RestTemplate;

/**
 * The paths of the ESB contract (esb-projects/README.md), one IntegrationFlow each: an HTTP
 * inbound gateway, routing or transformation, and an HTTP outbound gateway to a back end whose
 * answer (status, body, Content-Type, X-Echo-Backend) goes back as it came. Bodies are byte[]
 * from end to end; proxy and header routes never parse them, and content-based routes parse a
 * copy for XPath and forward the original bytes.
 */
@Configuration(proxyBeanMethods = false)
public class EsbFlows {

    private static final Log LOG = LogFactory.getLog(EsbFlows.class);

    /** The error channel of every inbound gateway: the input channel of {@link #failures()}. */
    private static final String FAILURES = "failures.input";
    private static final String ROUTE_TO = "esbperfRouteTo";
    private static final String JSON_REQUEST = "jsonRequest";
    /** /transform/json's input document: json-to-soap.xsl replaces the element with the call. */
    private static final byte[] JSON_PLACEHOLDER = ("<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\">"
            + "<soapenv:Body><json/></soapenv:Body></soapenv:Envelope>").getBytes(StandardCharsets.UTF_8);

    private final RestTemplate backendRestTemplate;
    private final Map<String, String> backends;
    private final Routing routing = new Routing(new SafeXml.PayloadConverter());

    public EsbFlows(RestTemplate backendRestTemplate,
                    @Value("${backend.ws1}") String ws1,
                    @Value("${backend.ws2}") String ws2,
                    @Value("${backend.ws3}") String ws3) {
        this.backendRestTemplate = backendRestTemplate;
        this.backends = Map.of(Routing.WS1, trim(ws1), Routing.WS2, trim(ws2), Routing.WS3, trim(ws3));
    }

    private static String trim(String url) {
        return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
    }

    // --- direct proxy -----------------------------------------------------------------------

    @Bean
    public IntegrationFlow proxyEcho() {
        return IntegrationFlow.from(inbound("/proxy/echo"))
                .handle(backend(Routing.WS1, "/echo"))
                .get();
    }

    @Bean
    public IntegrationFlow proxyRaw() {
        return IntegrationFlow.from(inbound("/proxy/raw"))
                .handle(backend(Routing.WS1, "/raw"))
                .get();
    }

    // --- content-based routing: XPath on a parse of the body, the original bytes forwarded ---

    @Bean
    public IntegrationFlow cbrEcho() {
        return IntegrationFlow.from(inbound("/cbr/echo"))
                .route(byte[].class, this.routing::byEchoId, r -> toBackends(r, "/echo")
                        .subFlowMapping(Routing.NONE, f -> f.handle(Message.class, (m, h) ->
                                Faults.answer(HttpStatus.INTERNAL_SERVER_ERROR, Faults.SOAP, Faults.UNKNOWN_ID))))
                .get();
    }

    @Bean
    public IntegrationFlow cbrRaw() {
        return IntegrationFlow.from(inbound("/cbr/raw"))
                .route(byte[].class, this.routing::byFirstSymbol, r -> toBackends(r, "/raw"))
                .get();
    }

    // --- header-based routing: the body is never parsed --------------------------------------

    @Bean
    public IntegrationFlow hbrEcho() {
        return headerRouted("/hbr/echo", "/echo");
    }

    @Bean
    public IntegrationFlow hbrRaw() {
        return headerRouted("/hbr/raw", "/raw");
    }

    private IntegrationFlow headerRouted(String path, String backendPath) {
        return IntegrationFlow.from(inbound(path)
                        // HttpHeaders is case-insensitive; the message headers are not.
                        .headerFunction(ROUTE_TO, entity -> entity.getHeaders().getFirst("X-Route-To")))
                .route(Message.class, m -> Routing.routeToBackend(m.getHeaders().get(ROUTE_TO, String.class)),
                        r -> toBackends(r, backendPath)
                                .subFlowMapping(Routing.NONE, f -> f.handle(Message.class, (m, h) ->
                                        Faults.answer(HttpStatus.BAD_REQUEST, Faults.TEXT, Faults.UNKNOWN_ROUTE))))
                .get();
    }

    // --- transformations (shared stylesheets, Saxon-HE); a back-end error passes untouched ---

    @Bean
    public IntegrationFlow transformJson(@Lazy @Qualifier("jsonToSoap") Templates jsonToSoap,
                                         @Lazy @Qualifier("soapToJson") Templates soapToJson) {
        return IntegrationFlow.from(inbound("/transform/json"))
                // The JSON text goes to json-to-soap.xsl as its parameter jsonRequest; the
                // input document is a placeholder envelope.
                .enrichHeaders(h -> h.headerFunction(JSON_REQUEST,
                        (Message<byte[]> m) -> new String(m.getPayload(), StandardCharsets.UTF_8)))
                .transform(byte[].class, json -> JSON_PLACEHOLDER)
                .transformWith(t -> t.transformer(SafeXml.xslt(jsonToSoap, JSON_REQUEST)))
                .enrichHeaders(h -> h
                        .header(MessageHeaders.CONTENT_TYPE, Faults.SOAP, true)
                        .header("SOAPAction", "\"echoMessage\"", true))
                .handle(backend(Routing.WS1, "/echo"))
                .route(Message.class, EsbFlows::answeredOk, r -> r
                        .subFlowMapping(true, f -> f
                                .transformWith(t -> t.transformer(SafeXml.xslt(soapToJson)))
                                .enrichHeaders(h -> h.header(MessageHeaders.CONTENT_TYPE, "application/json", true)))
                        .subFlowMapping(false, f -> f.bridge()))
                .get();
    }

    @Bean
    public IntegrationFlow transformXslt(@Lazy @Qualifier("buyStocksToReversed") Templates toReversed,
                                         @Lazy @Qualifier("reversedToBuyStocks") Templates toBuyStocks) {
        return IntegrationFlow.from(inbound("/transform/xslt"))
                .transformWith(t -> t.transformer(SafeXml.xslt(toReversed)))
                .handle(backend(Routing.WS1, "/raw"))
                .route(Message.class, EsbFlows::answeredOk, r -> r
                        .subFlowMapping(true, f -> f
                                .transformWith(t -> t.transformer(SafeXml.xslt(toBuyStocks))))
                        .subFlowMapping(false, f -> f.bridge()))
                .get();
    }

    private static boolean answeredOk(Message<?> answer) {
        Object status = answer.getHeaders().get(HttpHeaders.STATUS_CODE);
        return status instanceof HttpStatusCode code && code.is2xxSuccessful();
    }

    // --- failures ------------------------------------------------------------------------------

    /**
     * Every exception of a flow lands here (the gateways' error channel): 504 when the back
     * end timed out, 502 when it could not be reached, 500 otherwise, each with a SOAP fault
     * and one log line.
     */
    @Bean
    public IntegrationFlow failures() {
        return f -> f.handle(Throwable.class, (failure, headers) -> {
            HttpStatus status = Faults.statusFor(failure);
            LOG.warn("failed (" + status.value() + "): " + Faults.summary(failure));
            return Faults.answer(status, Faults.SOAP, Faults.bodyFor(status));
        });
    }

    // --- the endpoints -------------------------------------------------------------------------

    /** A POST-only inbound gateway: the body as byte[], Content-Type and SOAPAction mapped in,
     *  Content-Type and X-Echo-Backend (and the status) mapped out. */
    private static HttpRequestHandlerEndpointSpec inbound(String path) {
        return Http.inboundGateway(path)
                .requestMapping(m -> m.methods(HttpMethod.POST))
                .requestPayloadType(byte[].class)
                .messageConverters(new ByteArrayHttpMessageConverter(),
                        new StringHttpMessageConverter(StandardCharsets.UTF_8))
                .mappedRequestHeaders("Content-Type", "SOAPAction")
                .mappedResponseHeaders("Content-Type", "X-Echo-Backend")
                .errorChannel(FAILURES);
    }

    /** An outbound gateway to a back end's path on the shared pooled client: the answer's
     *  status and body whatever they are, with its Content-Type and X-Echo-Backend. */
    private HttpMessageHandlerSpec backend(String ws, String path) {
        return Http.outboundGateway(URI.create(this.backends.get(ws) + path), this.backendRestTemplate)
                .httpMethod(HttpMethod.POST)
                .expectedResponseType(byte[].class)
                .mappedRequestHeaders("SOAPAction")   // and Content-Type, always
                .mappedResponseHeaders("Content-Type", "X-Echo-Backend");
    }

    private <R extends RouterSpec<String, MethodInvokingRouter>> R toBackends(R router, String path) {
        router.subFlowMapping(Routing.WS1, f -> f.handle(backend(Routing.WS1, path)))
                .subFlowMapping(Routing.WS2, f -> f.handle(backend(Routing.WS2, path)))
                .subFlowMapping(Routing.WS3, f -> f.handle(backend(Routing.WS3, path)));
        return router;
    }
}
