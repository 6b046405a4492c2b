package esbperf.springintegration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

import javax.xml.transform.sax.SAXSource;

import org.junit.jupiter.api.Test;
import org.springframework.integration.support.MessageBuilder;
import org.springframework.integration.xml.transformer.XsltPayloadTransformer;
import org.springframework.messaging.Message;
import org.xml.sax.ContentHandler;

/** The shared stylesheets as the flows run them: byte[] in, byte[] out, no DOCTYPE. */
class XsltTest {

    private static final String STOCKS = "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\">"
            + "<soapenv:Body><m:buyStocks xmlns:m=\"http://services.samples/xsd\">"
            + "<order><symbol>IBM</symbol><buyerID>b&amp;1</buyerID><price>1.50</price><volume>7</volume></order>"
            + "<order><symbol>SUN</symbol><buyerID>b2</buyerID><price>2.00</price><volume>8</volume></order>"
            + "</m:buyStocks></soapenv:Body></soapenv:Envelope>";

    private static XsltPayloadTransformer transformer(String stylesheet, String... params) {
        // Outside an application context: precompiled Templates need no initialisation.
        return SafeXml.xslt(SafeXml.saxonTemplates(stylesheet), params);
    }

    private static String run(XsltPayloadTransformer transformer, Message<?> message) {
        return new String((byte[]) transformer.transform(message).getPayload(), StandardCharsets.UTF_8);
    }

    @Test
    void buyStocksRoundTrip() throws Exception {
        String reversed = run(transformer("xslt/buystocks-to-reversed.xsl"),
                MessageBuilder.withPayload(STOCKS.getBytes(StandardCharsets.UTF_8)).build());
        assertTrue(reversed.contains("<m:skcotSyub") && reversed.contains("<redro><lobmys>IBM</lobmys>"), reversed);
        String back = run(transformer("xslt/reversed-to-buystocks.xsl"),
                MessageBuilder.withPayload(reversed.getBytes(StandardCharsets.UTF_8)).build());
        assertTrue(back.contains("<order><symbol>IBM</symbol><buyerID>b&amp;1</buyerID><price>1.50</price>"), back);
        assertEquals(2, back.split("<order>").length - 1);
    }

    @Test
    void jsonRoundTripKeepsTheText() throws Exception {
        String message = "a <b> & \"c\" \\ é ☃";
        String json = "{\"id\": 2, \"message\": \"a <b> & \\\"c\\\" \\\\ é ☃\"}";
        String call = run(transformer("xslt/json-to-soap.xsl", "jsonRequest"), MessageBuilder
                .withPayload("<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\"><soapenv:Body><json/></soapenv:Body></soapenv:Envelope>"
                        .getBytes(StandardCharsets.UTF_8))
                .setHeader("jsonRequest", json).build());
        assertTrue(call.contains("<id>2</id><message>a &lt;b&gt; &amp; \"c\" \\ é ☃</message>"), call);
        String answer = "<S:Envelope xmlns:S=\"http://schemas.xmlsoap.org/soap/envelope/\"><S:Body>"
                + "<ns2:echoMessageResponse xmlns:ns2=\"http://ws.webservice.korsdrag.datanizze.se/\"><WSResponse>2 "
                + message.replace("&", "&amp;").replace("<", "&lt;") + " [echoed by ws1]</WSResponse>"
                + "</ns2:echoMessageResponse></S:Body></S:Envelope>";
        String out = run(transformer("xslt/soap-to-json.xsl"),
                MessageBuilder.withPayload(answer.getBytes(StandardCharsets.UTF_8)).build());
        assertEquals("{\"WSResponse\":\"2 a <b> & \\\"c\\\" \\\\ é ☃ [echoed by ws1]\"}", out);
    }

    @Test
    void doctypeIsRefused() throws Exception {
        XsltPayloadTransformer transformer = transformer("xslt/buystocks-to-reversed.xsl");
        byte[] withDoctype = ("<!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/hostname\">]>" + STOCKS.replace("IBM", "&x;"))
                .getBytes(StandardCharsets.UTF_8);
        assertThrows(Exception.class, () -> transformer.transform(MessageBuilder.withPayload(withDoctype).build()));
    }

    @Test
    void theThreadsParserKeepsNoDocument() throws Exception {
        SafeXml.BytesSourceFactory sources = new SafeXml.BytesSourceFactory();
        SAXSource source = (SAXSource) sources.createSource(STOCKS.getBytes(StandardCharsets.UTF_8));
        SafeXml.saxonTemplates("xslt/buystocks-to-reversed.xsl").newTransformer()
                .transform(source, new javax.xml.transform.stream.StreamResult(new java.io.ByteArrayOutputStream()));
        ContentHandler left = ((org.xml.sax.XMLFilter) source.getXMLReader()).getParent().getContentHandler();
        assertTrue(left == null || left.getClass().getName().startsWith("org.xml.sax."), String.valueOf(left));
    }
}
