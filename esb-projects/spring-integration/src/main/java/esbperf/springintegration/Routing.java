package esbperf.springintegration;

import java.util.Map;

import org.springframework.integration.xml.XmlPayloadConverter;
import org.springframework.xml.xpath.XPathExpression;
import org.springframework.xml.xpath.XPathExpressionFactory;

/**
 * The routing decisions of the contract. Each returns one of the route keys below, never the
 * text it read: a router key is also a channel name (and a comma separates several), so the
 * message's own text must not choose channels.
 */
final class Routing {

    static final String WS1 = "ws1";
    static final String WS2 = "ws2";
    static final String WS3 = "ws3";
    /** No back end for this request (an unknown id or X-Route-To value). */
    static final String NONE = "none";

    private static final Map<String, String> NAMESPACES = Map.of(
            "soapenv", "http://schemas.xmlsoap.org/soap/envelope/",
            "ws", "http://ws.webservice.korsdrag.datanizze.se/",
            "m", "http://services.samples/xsd");

    /** The thesis envelope's echoMessage id. */
    static final XPathExpression ECHO_ID = XPathExpressionFactory.createXPathExpression(
            "normalize-space(/soapenv:Envelope/soapenv:Body/ws:echoMessage/id)", NAMESPACES);

    /** The symbol of buyStocks' first order. */
    static final XPathExpression FIRST_SYMBOL = XPathExpressionFactory.createXPathExpression(
            "normalize-space(/soapenv:Envelope/soapenv:Body/m:buyStocks/order[1]/symbol)", NAMESPACES);

    private final XmlPayloadConverter converter;

    Routing(XmlPayloadConverter converter) {
        this.converter = converter;
    }

    /** /cbr/echo: parses the body (no DOCTYPE allowed) and picks the back end by id. */
    String byEchoId(byte[] body) {
        return echoIdBackend(ECHO_ID.evaluateAsString(this.converter.convertToNode(body)));
    }

    /** /cbr/raw: parses the body (no DOCTYPE allowed) and picks the back end by first symbol. */
    String byFirstSymbol(byte[] body) {
        return symbolBackend(FIRST_SYMBOL.evaluateAsString(this.converter.convertToNode(body)));
    }

    /** id 1, 2, 3 go to ws1, ws2, ws3; anything else has no back end. */
    static String echoIdBackend(String id) {
        if (id == null) {
            return NONE;
        }
        return switch (id) {
            case "1" -> WS1;
            case "2" -> WS2;
            case "3" -> WS3;
            default -> NONE;
        };
    }

    /** IBM goes to ws1, MSFT to ws2, anything else (no symbol too) to ws3. */
    static String symbolBackend(String symbol) {
        if ("IBM".equals(symbol)) {
            return WS1;
        }
        if ("MSFT".equals(symbol)) {
            return WS2;
        }
        return WS3;
    }

    /** X-Route-To: exactly ws1, ws2 or ws3; missing or anything else has no back end. */
    static String routeToBackend(String header) {
        if (header == null) {
            return NONE;
        }
        return switch (header) {
            case WS1 -> WS1;
            case WS2 -> WS2;
            case WS3 -> WS3;
            default -> NONE;
        };
    }
}
