package esbperf.echo;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.LogManager;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The wire contract in brief, on every runtime started in this JVM (tests/test_echo.py has it all). */
class EchoRuntimeTest {

    private static final Map<String, EchoRuntime> STARTED = new HashMap<>();
    private static final Map<String, String> URLS = new HashMap<>();
    private static final HttpClient CLIENT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    private static String url(String runtime) throws Exception {
        if (!URLS.containsKey(runtime)) {
            int port;
            try (ServerSocket free = new ServerSocket(0)) {
                port = free.getLocalPort();
            }
            EchoOptions options = EchoOptions.parse("--id", "t-" + runtime, "--port", String.valueOf(port),
                    "--runtime", runtime, "--max-body-mb", "1", "--threads", "8");
            STARTED.put(runtime, EchoRuntime.start(options));
            URLS.put(runtime, options.baseUrl());
        }
        return URLS.get(runtime);
    }

    @BeforeAll
    static void quietStacks() throws Exception {
        // EchoMain's logging settings: the stacks would log every bad request the tests send.
        try (InputStream in = EchoMain.class.getResourceAsStream("logging.properties")) {
            LogManager.getLogManager().readConfiguration(in);
        }
    }

    static List<String> runtimes() {
        return EchoOptions.RUNTIMES;
    }

    @AfterAll
    static void stop() {
        STARTED.values().forEach(EchoRuntime::close);
    }

    private static HttpResponse<byte[]> post(String runtime, String path, byte[] body, String type) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url(runtime) + path))
                .POST(HttpRequest.BodyPublishers.ofByteArray(body));
        if (type != null) {
            request.header("Content-Type", type);
        }
        return CLIENT.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    private static void servedBy(HttpResponse<?> response, String runtime) {
        assertEquals("t-" + runtime, response.headers().firstValue(Bodies.BACKEND_HEADER).orElse(null));
        assertEquals(runtime, response.headers().firstValue(Bodies.RUNTIME_HEADER).orElse(null));
    }

    @ParameterizedTest
    @MethodSource("runtimes")
    void echoesTheThesisEnvelope(String runtime) throws Exception {
        String envelope = "<soapenv:Envelope xmlns:soapenv=\"" + ThesisScan.SOAP_ENV + "\" xmlns:ws=\"" + EchoService.NAMESPACE
                + "\"><soapenv:Header/><soapenv:Body><ws:echoMessage><id>7</id><message>hello</message></ws:echoMessage>"
                + "</soapenv:Body></soapenv:Envelope>";
        HttpResponse<byte[]> response = post(runtime, "/echo", envelope.getBytes(StandardCharsets.UTF_8), "text/xml; charset=utf-8");
        assertEquals(200, response.statusCode());
        String text = new String(response.body(), StandardCharsets.UTF_8);
        assertTrue(text.contains("<WSResponse>7 hello [echoed by t-" + runtime + "]</WSResponse>"), text);
        servedBy(response, runtime);
    }

    @ParameterizedTest
    @MethodSource("runtimes")
    void servesItsWsdl(String runtime) throws Exception {
        HttpResponse<String> response = CLIENT.send(HttpRequest.newBuilder(URI.create(url(runtime) + "/echo?wsdl")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, response.statusCode());
        assertTrue(response.body().contains("targetNamespace=\"" + EchoService.NAMESPACE + "\""));
        servedBy(response, runtime);
    }

    @ParameterizedTest
    @MethodSource("runtimes")
    void echoesRawBodiesByteForByte(String runtime) throws Exception {
        byte[] body = new byte[100_000];
        for (int i = 0; i < body.length; i++) {
            body[i] = (byte) i;
        }
        HttpResponse<byte[]> response = post(runtime, "/raw", body, "application/x-anything; v=\"1\"");
        assertEquals(200, response.statusCode());
        assertArrayEquals(body, response.body());
        assertEquals("application/x-anything; v=\"1\"", response.headers().firstValue("Content-Type").orElse(null));
        servedBy(response, runtime);
    }

    @ParameterizedTest
    @MethodSource("runtimes")
    void answersBadRequestsWithAFaultAndLongOnesWith413(String runtime) throws Exception {
        HttpResponse<byte[]> fault = post(runtime, "/echo", "not xml".getBytes(StandardCharsets.UTF_8), "text/xml");
        assertEquals(500, fault.statusCode());
        assertTrue(new String(fault.body(), StandardCharsets.UTF_8).contains("Fault>"));
        servedBy(fault, runtime);
        // Chunked (no length announced), so every runtime reads to the limit and answers before closing.
        HttpRequest chunked = HttpRequest.newBuilder(URI.create(url(runtime) + "/raw"))
                .POST(HttpRequest.BodyPublishers.ofInputStream(() -> new ByteArrayInputStream(new byte[1_500_000]))).build();
        HttpResponse<byte[]> tooLong = CLIENT.send(chunked, HttpResponse.BodyHandlers.ofByteArray());
        assertEquals(413, tooLong.statusCode());
        servedBy(tooLong, runtime);
    }
}
