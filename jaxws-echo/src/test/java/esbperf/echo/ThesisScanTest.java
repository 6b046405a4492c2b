package esbperf.echo;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ThesisScanTest {

    private static final String ENV = ThesisScan.SOAP_ENV;
    private static final String NS = EchoService.NAMESPACE;

    /** The thesis's own envelope, around `operation` (the body's one element). */
    private static String envelope(String operation) {
        return "<soapenv:Envelope xmlns:soapenv=\"" + ENV + "\" xmlns:ws=\"" + NS + "\"><soapenv:Header/>"
                + "<soapenv:Body>" + operation + "</soapenv:Body></soapenv:Envelope>";
    }

    private static String thesis(String id, String message) {
        return envelope("<ws:echoMessage><id>" + id + "</id><message>" + message + "</message></ws:echoMessage>");
    }

    /** The id and the message's bytes as they stand in the request. */
    private static String read(String request) throws ThesisScan.Unreadable {
        byte[] body = request.getBytes(StandardCharsets.UTF_8);
        ThesisScan.Request r = ThesisScan.scan(body);
        return r.id() + "|" + new String(Arrays.copyOfRange(body, r.messageStart(), r.messageEnd()), StandardCharsets.UTF_8);
    }

    private static String refused(String request) {
        return refused(request.getBytes(StandardCharsets.UTF_8)).getMessage();
    }

    private static String read(String request, boolean vectors) throws ThesisScan.Unreadable {
        byte[] body = request.getBytes(StandardCharsets.UTF_8);
        ThesisScan.Request r = ThesisScan.scan(ByteBuffer.wrap(body), 0, body.length, vectors);
        return r.id() + "|" + new String(Arrays.copyOfRange(body, r.messageStart(), r.messageEnd()), StandardCharsets.UTF_8);
    }

    private static String refused(String request, boolean vectors) {
        return refused(request, vectors, StandardCharsets.UTF_8);
    }

    private static String refused(String request, boolean vectors, java.nio.charset.Charset charset) {
        byte[] body = request.getBytes(charset);
        return assertThrows(ThesisScan.Unreadable.class, () -> ThesisScan.scan(ByteBuffer.wrap(body), 0, body.length, vectors))
                .getMessage();
    }

    private static ThesisScan.Unreadable refused(byte[] request) {
        return assertThrows(ThesisScan.Unreadable.class, () -> ThesisScan.scan(request));
    }

    @Test
    void readsTheThesisEnvelope() throws Exception {
        assertEquals("7|hello", read(thesis("7", "hello")));
    }

    @Test
    void findsTheMessageInsideALargeRequest() throws Exception {
        String filler = "esbperf thesis payload ".repeat(4500);
        byte[] body = thesis("1", filler).getBytes(StandardCharsets.UTF_8);
        ThesisScan.Request r = ThesisScan.scan(body);
        assertEquals(filler.length(), r.messageEnd() - r.messageStart());
        assertEquals(filler, new String(body, r.messageStart(), filler.length(), StandardCharsets.US_ASCII));
    }

    @Test
    void readsTheRequestWhereItLiesOutsideTheHeap() throws Exception {
        byte[] request = thesis("9", "direct " + "é".repeat(100)).getBytes(StandardCharsets.UTF_8);
        ByteBuffer direct = ByteBuffer.allocateDirect(request.length + 7);
        direct.position(7);
        direct.put(request);
        for (boolean vectors : new boolean[]{true, false}) {
            ThesisScan.Request r = ThesisScan.scan(direct, 7, 7 + request.length, vectors);
            assertEquals(9, r.id());
            byte[] message = new byte[r.messageEnd() - r.messageStart()];
            direct.get(r.messageStart(), message);
            assertEquals("direct " + "é".repeat(100), new String(message, StandardCharsets.UTF_8));
        }
    }

    @Test
    void scansOnlyTheRangeItIsGiven() throws Exception {
        byte[] inner = thesis("3", "x").getBytes(StandardCharsets.UTF_8);
        byte[] padded = new byte[inner.length + 10];
        Arrays.fill(padded, (byte) '#');
        System.arraycopy(inner, 0, padded, 5, inner.length);
        ThesisScan.Request r = ThesisScan.scan(padded, 5, 5 + inner.length);
        assertEquals(3, r.id());
        assertEquals('x', padded[r.messageStart()]);
    }

    @Test
    void anyPrefixesOrTheDefaultNamespaceOnTheWrapper() throws Exception {
        assertEquals("2|a", read("<e:Envelope xmlns:e=\"" + ENV + "\"><e:Body><op:echoMessage xmlns:op=\"" + NS
                + "\"><id>2</id><message>a</message></op:echoMessage></e:Body></e:Envelope>"));
        // A default namespace on the wrapper; the children undeclare it to stay unqualified.
        assertEquals("2|b", read("<Envelope xmlns=\"" + ENV + "\"><Body><echoMessage xmlns=\"" + NS + "\">"
                + "<id xmlns=\"\">2</id><message xmlns=\"\">b</message></echoMessage></Body></Envelope>"));
        // Without that, the children are in the thesis namespace: not the operation's parameters.
        assertTrue(refused("<Envelope xmlns=\"" + ENV + "\"><Body><echoMessage xmlns=\"" + NS + "\"><id>2</id>"
                + "<message>b</message></echoMessage></Body></Envelope>").contains("unexpected element {" + NS + "}id"));
        // A prefix declared on an element counts for its own name; one declared nowhere does not.
        assertTrue(refused(thesis("1", "x").replace("ws:echoMessage", "zz:echoMessage")).contains("undeclared namespace prefix zz"));
        // The same prefix bound to another namespace deeper down wins there.
        assertTrue(refused(thesis("1", "x").replace("<ws:echoMessage>", "<ws:echoMessage xmlns:ws=\"urn:other\">"))
                .contains("no operation {urn:other}echoMessage"));
    }

    @Test
    void attributesWhitespaceCommentsAndTheDeclarationAreAllowed() throws Exception {
        String request = "\uFEFF<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!-- before -->\n"
                + "<soapenv:Envelope xmlns:soapenv='" + ENV + "' soapenv:encodingStyle=\"x > y\">\n"
                + "  <soapenv:Header><h:trace xmlns:h=\"urn:h\" a=\"1\"><h:x>t</h:x><![CDATA[<y>]]></h:trace></soapenv:Header>\n"
                + "  <soapenv:Body >\n    <ws:echoMessage xmlns:ws=\"" + NS + "\" ws:note='n'>\n"
                + "      <!-- an id --><id a=\"b\" > 12 </id >\n      <message\tkind=\"text\">hi there</message>\n"
                + "    </ws:echoMessage>\n  </soapenv:Body>\n</soapenv:Envelope >\n<!-- after -->\n";
        assertEquals("12|hi there", read(request));
    }

    @Test
    void messageThenIdIsReadToo() throws Exception {
        assertEquals("4|m", read(envelope("<ws:echoMessage><message>m</message><id>4</id></ws:echoMessage>")));
    }

    @Test
    void aSelfClosingMessageIsEmpty() throws Exception {
        assertEquals("7|", read(envelope("<ws:echoMessage><id>7</id><message/></ws:echoMessage>")));
        assertEquals("7|", read(envelope("<ws:echoMessage><id>7</id><message /></ws:echoMessage>")));
        assertEquals("7|", read(thesis("7", "")));
    }

    @Test
    void escapesCdataCommentsAndUnicodeAreKeptAsTheyCame() throws Exception {
        assertEquals("1|a&lt;b&amp;c&gt;d&quot;&apos; &#65;&#x1F600; é ✓ 😀 > \"'",
                read(thesis("1", "a&lt;b&amp;c&gt;d&quot;&apos; &#65;&#x1F600; é ✓ 😀 > \"'")));
        assertEquals("1|x<![CDATA[a<b&c]]]]>y", read(thesis("1", "x<![CDATA[a<b&c]]]]>y")));
        assertEquals("1|a<!-- note -->b", read(thesis("1", "a<!-- note -->b")));
        assertEquals("1|line\r\nbreak\ttab", read(thesis("1", "line\r\nbreak\ttab")));
        assertEquals("1|  ", read(thesis("1", "  ")));
    }

    @Test
    void theTestsHaveTheVectorApi() {
        assertTrue(ThesisScan.VECTORS, "surefire starts the JVM with --add-modules jdk.incubator.vector");
    }

    @Test
    void theVectorSkipStopsWhereTheByteLoopWould() {
        java.util.Random random = new java.util.Random(42);
        byte[] specials = {'<', '&', '>', 0x01, '\t', '\n', '\r', (byte) 0x80, (byte) 0xC3, (byte) 0xFF, 0x1F, 0x7F};
        for (int round = 0; round < 2000; round++) {
            byte[] b = new byte[1 + random.nextInt(200)];
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) (0x20 + random.nextInt(0x5F));   // printable ASCII, '<' '&' '>' among them
                if (random.nextInt(40) == 0) {
                    b[i] = specials[random.nextInt(specials.length)];
                }
            }
            int from = random.nextInt(b.length);
            int stop = PlainRuns.skip(ByteBuffer.wrap(b), from, b.length);
            int expected = from;
            while (expected < b.length && b[expected] >= 0x20 && b[expected] != '<' && b[expected] != '&' && b[expected] != '>') {
                expected++;
            }
            // It stops at the first byte that needs a look, or earlier where its whole vectors end.
            assertTrue(stop <= expected && (stop == expected || b.length - stop < 64), "round " + round);
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void findsWhatNeedsALookWhereverItFalls(boolean vectors) throws Exception {
        for (int at = 0; at < 80; at++) {
            String before = "abcdefghijklmnopqrstuvwxyz".repeat(4).substring(0, at);
            String after = " plain text after it";
            assertEquals("1|" + before + "&amp;" + after, read(thesis("1", before + "&amp;" + after), vectors));
            assertEquals("1|" + before + "é\t\n" + after, read(thesis("1", before + "é\t\n" + after), vectors));
            assertTrue(refused(thesis("1", before + "\u0001" + after), vectors).contains("control character"), before);
            assertTrue(refused(thesis("1", before + "&bad;" + after), vectors).contains("undefined entity"), before);
            assertTrue(refused(thesis("1", before + "<x/>" + after), vectors).contains("markup"), before);
            assertTrue(refused(thesis("1", before + "]]>" + after), vectors).contains("']]>'"), before);
            byte[] invalid = thesis("1", before + "#" + after).getBytes(StandardCharsets.UTF_8);
            invalid[new String(invalid, StandardCharsets.US_ASCII).indexOf('#')] = (byte) 0xFF;
            assertTrue(refused(new String(invalid, StandardCharsets.ISO_8859_1), vectors, StandardCharsets.ISO_8859_1)
                    .contains("not valid UTF-8"), before);
        }
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {"0|0", "-5|-5", "+7|7", "007|7", "' 42\n'|42", "2147483647|2147483647",
            "-2147483648|-2147483648"})
    void idsAreXsdInts(String text, int id) throws Exception {
        assertEquals(id, ThesisScan.scan(thesis(text, "m").getBytes(StandardCharsets.UTF_8)).id());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", " ", "x7", "7x", "1.0", "--1", "2147483648", "-2147483649", "99999999999999999999", "&#55;"})
    void idsThatAreNoIntAreRefused(String text) {
        assertTrue(refused(thesis(text, "m")).contains("the id must be a whole number"), text);
    }

    @Test
    void aDoctypeIsRefusedWhereverItStands() {
        assertEquals("a DTD is not allowed in a SOAP message", refused("<!DOCTYPE d>" + thesis("1", "x")));
        assertEquals("a DTD is not allowed in a SOAP message",
                refused("<?xml version=\"1.0\"?><!-- c --><!DOCTYPE d [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>"
                        + thesis("1", "&e;")));
        assertEquals("a DTD is not allowed in a SOAP message",
                refused(thesis("1", "x").replace("<soapenv:Body>", "<!DOCTYPE d><soapenv:Body>")));
        assertTrue(refused(thesis("1", "<!DOCTYPE d>")).contains("the message holds markup"));
    }

    @Test
    void undefinedEntitiesAndBadReferencesAreRefused() {
        assertTrue(refused(thesis("1", "&xxe;")).startsWith("an undefined entity &xxe;"));
        assertTrue(refused(thesis("1", "a & b")).contains("a bare '&'"));
        assertTrue(refused(thesis("1", "&#0;")).contains("not a character XML allows"));
        assertTrue(refused(thesis("1", "&#xD800;")).contains("not a character XML allows"));
        assertTrue(refused(thesis("1", "&#x110000;")).contains("not a character XML allows"));
        assertTrue(refused(thesis("1", "&#;")).contains("not a character XML allows"));
    }

    @Test
    void aMissingOrRepeatedIdOrMessageIsRefused() {
        assertEquals("the request has no id", refused(envelope("<ws:echoMessage><message>m</message></ws:echoMessage>")));
        assertEquals("the request has no id", refused(envelope("<ws:echoMessage/>")));
        assertEquals("the request has no message", refused(envelope("<ws:echoMessage><id>1</id></ws:echoMessage>")));
        assertEquals("the id is empty", refused(envelope("<ws:echoMessage><id/><message>m</message></ws:echoMessage>")));
        assertEquals("the request has more than one id",
                refused(envelope("<ws:echoMessage><id>1</id><id>2</id><message>m</message></ws:echoMessage>")));
        assertEquals("the request has more than one message",
                refused(envelope("<ws:echoMessage><id>1</id><message>a</message><message>b</message></ws:echoMessage>")));
        assertTrue(refused(envelope("<ws:echoMessage><id>1</id><message>m</message><other/></ws:echoMessage>"))
                .startsWith("unexpected element {}other"));
        assertTrue(refused(envelope("<ws:echoMessage><ws:id>1</ws:id><message>m</message></ws:echoMessage>"))
                .startsWith("unexpected element {" + NS + "}id"));
    }

    @Test
    void markupInTheMessageIsRefused() {
        assertTrue(refused(thesis("1", "a<b>c</b>")).contains("an element"));
        assertTrue(refused(thesis("1", "a<?pi x?>")).contains("a processing instruction"));
        assertTrue(refused(thesis("1", "a]]>b")).contains("']]>'"));
        assertTrue(refused(thesis("1", "a<!-- x -- y -->")).contains("'--'"));
    }

    @Test
    void theEnvelopeMustBeWellFormedAndWhole() {
        String ok = thesis("1", "x");
        assertEquals("expected the SOAP Envelope", refused("not xml at all"));
        assertEquals("expected the SOAP Envelope", refused(""));
        assertTrue(refused(ok.substring(0, ok.length() - 30)).contains("expected the end tag of soapenv:Body"));
        assertEquals("the message is not closed", refused(ok.substring(0, ok.indexOf(">x<") + 2)));
        assertEquals("something follows the envelope", refused(ok + "<more/>"));
        assertTrue(refused(ok.replace("</message>", "</massage>")).contains("expected the end tag of message"));
        assertTrue(refused(ok.replace("</id>", "</idx>")).contains("expected the end tag of id"));
        assertEquals("the SOAP Body is empty", refused(envelope("")));
        assertEquals("the SOAP Body holds more than one element",
                refused(envelope("<ws:echoMessage><id>1</id><message>a</message></ws:echoMessage><ws:echoMessage/>")));
        assertTrue(refused(envelope("text<ws:echoMessage/>")).contains("unexpected text in the Body"));
        assertTrue(refused(thesis("1", "x").replace("<soapenv:Header/>", "<soapenv:Header><a><b></a></b></soapenv:Header>"))
                .contains("expected the end tag of b"));
        assertTrue(refused(ok.replace("<id>", "<id a=b>")).contains("unquoted attribute value"));
        assertTrue(refused(ok.replace("<id>", "<id a=\"<\">")).contains("'<' in an attribute value"));
    }

    @Test
    void otherOperationsAndSoap12AreRefusedWithTheirFaultCodes() {
        assertTrue(refused(envelope("<ws:buyStocks/>")).startsWith("no operation {" + NS + "}buyStocks"));
        ThesisScan.Unreadable soap12 = refused(("<e:Envelope xmlns:e=\"http://www.w3.org/2003/05/soap-envelope\"><e:Body>"
                + "<ws:echoMessage xmlns:ws=\"" + NS + "\"><id>1</id><message>m</message></ws:echoMessage></e:Body>"
                + "</e:Envelope>").getBytes(StandardCharsets.UTF_8));
        assertEquals("VersionMismatch", soap12.code);
        ThesisScan.Unreadable mustUnderstand = refused(thesis("1", "x").replace("<soapenv:Header/>",
                "<soapenv:Header><h:x xmlns:h=\"urn:h\" soapenv:mustUnderstand=\"1\">v</h:x></soapenv:Header>")
                .getBytes(StandardCharsets.UTF_8));
        assertEquals("MustUnderstand", mustUnderstand.code);
        assertTrue(mustUnderstand.getMessage().contains("{urn:h}x"));
        assertEquals("Client", refused("x".getBytes(StandardCharsets.UTF_8)).code);
    }

    @Test
    void onlyValidUtf8WithCharactersXmlAllowsIsRead() {
        byte[] ok = thesis("1", "#").getBytes(StandardCharsets.UTF_8);
        int at = new String(ok, StandardCharsets.US_ASCII).indexOf('#');
        for (byte[] bad : new byte[][]{{(byte) 0xFF}, {(byte) 0xC0, (byte) 0xAF}, {(byte) 0xE0, (byte) 0x80, (byte) 0xAF},
                {(byte) 0xED, (byte) 0xA0, (byte) 0x80}, {(byte) 0xEF, (byte) 0xBF, (byte) 0xBE}, {(byte) 0xC3},
                {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80}, {0x01}, {0x00}}) {
            byte[] request = new byte[ok.length - 1 + bad.length];
            System.arraycopy(ok, 0, request, 0, at);
            System.arraycopy(bad, 0, request, at, bad.length);
            System.arraycopy(ok, at + 1, request, at + bad.length, ok.length - at - 1);
            refused(request);
        }
        assertTrue(refused("<?xml version='1.0' encoding='ISO-8859-1'?>" + thesis("1", "x")).contains("only UTF-8"));
        assertTrue(refused(new byte[]{(byte) 0xFE, (byte) 0xFF, 0, '<'}).getMessage().contains("only UTF-8"));
        assertTrue(refused(new byte[]{'<', 0, 'x', 0}).getMessage().contains("only UTF-8"));
    }
}
