package esbperf.echo;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LeanRuntimeTest {

    @Test
    void answersWithTheRisBytes() {
        // What the JAX-WS RI answers to <id>7</id><message>hello</message> as ws1.
        String ri = "<?xml version='1.0' encoding='UTF-8'?><S:Envelope xmlns:S=\"http://schemas.xmlsoap.org/soap/envelope/\">"
                + "<S:Body><ns2:echoMessageResponse xmlns:ns2=\"http://ws.webservice.korsdrag.datanizze.se/\">"
                + "<WSResponse>7 hello [echoed by ws1]</WSResponse></ns2:echoMessageResponse></S:Body></S:Envelope>";
        ByteBuf request = Unpooled.copiedBuffer("..hello..", StandardCharsets.US_ASCII);
        ByteBuf answer = LeanRuntime.answer(UnpooledByteBufAllocator.DEFAULT, 7, request, 2, 7, LeanRuntime.answerTail("ws1"));
        assertEquals(ri, answer.toString(StandardCharsets.UTF_8));
        answer.release();
        // A long message is not copied: the answer holds the request's bytes, the same either way.
        String message = "esbperf thesis payload ".repeat(1000);
        ByteBuf large = Unpooled.copiedBuffer("<message>" + message + "</message>", StandardCharsets.US_ASCII);
        ByteBuf answerToLarge = LeanRuntime.answer(UnpooledByteBufAllocator.DEFAULT, 1, large, 9, 9 + message.length(),
                LeanRuntime.answerTail("ws1"));
        assertEquals(ri.replace("7 hello", "1 " + message), answerToLarge.toString(StandardCharsets.UTF_8));
        assertEquals(2, large.refCnt());
        answerToLarge.release();
        assertEquals(1, large.refCnt());
        large.release();
        request.release();
    }

    @Test
    void faultsEscapeTheirReasonAndDropWhatXmlForbids() {
        String fault = new String(LeanRuntime.fault("Client", "bad <x> & \u0001 \uFFFE"), StandardCharsets.UTF_8);
        assertTrue(fault.contains("<faultcode>S:Client</faultcode><faultstring>bad &lt;x&gt; &amp; ? ?</faultstring>"), fault);
    }

    @Test
    void readsTheCharsetOfAContentType() {
        assertTrue(LeanRuntime.charsetIsUtf8("text/xml"));
        assertTrue(LeanRuntime.charsetIsUtf8("text/xml; charset=UTF-8"));
        assertTrue(LeanRuntime.charsetIsUtf8("text/xml;charset=\"utf-8\"; action=x"));
        assertFalse(LeanRuntime.charsetIsUtf8("text/xml; charset=ISO-8859-1"));
        assertFalse(LeanRuntime.charsetIsUtf8("text/xml; Charset=utf-16"));
    }
}
