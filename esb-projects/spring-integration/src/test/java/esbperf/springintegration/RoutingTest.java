package esbperf.springintegration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;
import org.springframework.messaging.MessagingException;

class RoutingTest {

    private final Routing routing = new Routing(new SafeXml.PayloadConverter());

    private static byte[] thesis(String id) {
        return ("<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "
                + "xmlns:ws=\"http://ws.webservice.korsdrag.datanizze.se/\"><soapenv:Header/><soapenv:Body>"
                + "<ws:echoMessage><id>" + id + "</id><message>m</message></ws:echoMessage>"
                + "</soapenv:Body></soapenv:Envelope>").getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] stocks(String... symbols) {
        StringBuilder orders = new StringBuilder();
        for (String symbol : symbols) {
            orders.append("<order><symbol>").append(symbol).append("</symbol><buyerID>b</buyerID>"
                    + "<price>1.00</price><volume>1</volume></order>");
        }
        return ("<?xml version=\"1.0\"?><soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\">"
                + "<soapenv:Body><m:buyStocks xmlns:m=\"http://services.samples/xsd\">" + orders
                + "</m:buyStocks></soapenv:Body></soapenv:Envelope>").getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void echoIdPicksTheBackEnd() {
        assertEquals("ws1", routing.byEchoId(thesis("1")));
        assertEquals("ws2", routing.byEchoId(thesis(" 2 ")));
        assertEquals("ws3", routing.byEchoId(thesis("3")));
        assertEquals(Routing.NONE, routing.byEchoId(thesis("4")));
        assertEquals(Routing.NONE, routing.byEchoId(thesis("1,2")));
        assertEquals(Routing.NONE, routing.byEchoId(thesis("")));
        assertEquals(Routing.NONE, routing.byEchoId("<other/>".getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void firstSymbolPicksTheBackEnd() {
        assertEquals("ws1", routing.byFirstSymbol(stocks("IBM", "MSFT")));
        assertEquals("ws2", routing.byFirstSymbol(stocks("MSFT", "IBM")));
        assertEquals("ws3", routing.byFirstSymbol(stocks("SUN", "IBM")));
        // A symbol is never taken as a channel name (a comma would name two).
        assertEquals("ws3", routing.byFirstSymbol(stocks("IBM,MSFT")));
        assertEquals("ws3", routing.byFirstSymbol(stocks("nullChannel")));
        assertEquals("ws3", routing.byFirstSymbol(stocks()));
    }

    @Test
    void routeHeaderMustBeExact() {
        assertEquals("ws1", Routing.routeToBackend("ws1"));
        assertEquals("ws3", Routing.routeToBackend("ws3"));
        assertEquals(Routing.NONE, Routing.routeToBackend(null));
        assertEquals(Routing.NONE, Routing.routeToBackend("WS1"));
        assertEquals(Routing.NONE, Routing.routeToBackend("ws4"));
        assertEquals(Routing.NONE, Routing.routeToBackend("none"));
    }

    @Test
    void notXmlAndDoctypesAreRefused() {
        assertThrows(MessagingException.class, () -> routing.byEchoId("hello".getBytes(StandardCharsets.UTF_8)));
        byte[] withDoctype = ("<!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/hostname\">]>"
                + "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\">"
                + "<soapenv:Body><m:buyStocks xmlns:m=\"http://services.samples/xsd\"><order><symbol>&x;</symbol>"
                + "</order></m:buyStocks></soapenv:Body></soapenv:Envelope>").getBytes(StandardCharsets.UTF_8);
        assertThrows(MessagingException.class, () -> routing.byFirstSymbol(withDoctype));
    }
}
