package esbperf.echo;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads the thesis echoMessage request without an XML parser, for the lean runtime: a byte scan
 * of the envelope that finds the {@code id} and {@code message} children of ws:echoMessage and
 * where the message's text lies, so that it can be copied into the answer verbatim (escaped text
 * stays escaped, CDATA stays CDATA: the same XML content). A parser would decode and re-encode
 * every character of a 100 KB message; this reads each byte once.
 *
 * <p>It reads UTF-8 (or ASCII) only and checks what it passes on: the envelope's structure and
 * namespaces (prefixes resolved along the path Envelope, Body, echoMessage, child), matching end
 * tags, and every character of the message (legal XML characters, valid UTF-8, references to the
 * five predefined entities or to characters). Anything it cannot read unambiguously is refused
 * with a reason, which the runtime answers as a SOAP fault: a DTD (so no entity is ever defined,
 * let alone fetched), markup inside the message, an undefined entity, another encoding, a missing
 * or repeated id or message, a second element in the Body. It is stricter than the JAX-WS
 * stacks, which answer a missing id as 0 and a missing message as "null".
 */
final class ThesisScan {

    static final String SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/";

    /** What the request holds: the id, and the message as the byte range [messageStart, messageEnd). */
    record Request(int id, int messageStart, int messageEnd) {
    }

    /** A request the scan refuses; code is the SOAP 1.1 fault code (Client, VersionMismatch, MustUnderstand). */
    static final class Unreadable extends Exception {
        final String code;

        Unreadable(String code, String reason) {
            super(reason, null, false, false);  // no stack trace: it is an answer, not a bug
            this.code = code;
        }
    }

    private static final byte[] ENV = ascii(SOAP_ENV);
    private static final byte[] THESIS = ascii(EchoService.NAMESPACE);
    private static final byte[] XMLNS = ascii("xmlns");
    private static final Pattern ENCODING = Pattern.compile("\\sencoding\\s*=\\s*(['\"])([^'\"]*)\\1");
    private static final Pattern UTF8 = Pattern.compile("(?i)utf-?8|us-ascii|ascii");

    /** Bytes a message's text may hold as they are; the others need a look (markup, references, UTF-8, controls). */
    private static final boolean[] PLAIN = new boolean[256];
    /** Whether the JVM has the Vector API (started with --add-modules jdk.incubator.vector): PlainRuns then. */
    static final boolean VECTORS = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

    static {
        for (int c = 0x20; c < 0x80; c++) {
            PLAIN[c] = c != '<' && c != '&' && c != '>';
        }
        PLAIN['\t'] = PLAIN['\n'] = PLAIN['\r'] = true;
    }

    private final ByteBuffer b;   // a heap or direct buffer: the request where it lies, or a copy
    private final int end;
    private final boolean vectors;
    private int p;
    // Namespace declarations in scope, four ints each: prefix start, prefix length, URI start, URI length.
    private int[] ns = new int[32];
    private int nsCount;
    // The last start tag: its name, where the prefix ends (-1: none), whether it closed itself,
    // and its other attributes, four ints each: name start, name length, value start, value length.
    private int nameStart;
    private int nameLen;
    private int colon;
    private boolean selfClosing;
    private int[] attrs = new int[16];
    private int attrCount;

    private ThesisScan(ByteBuffer body, int from, int to, boolean vectors) {
        this.b = body;
        this.p = from;
        this.end = to;
        this.vectors = vectors;
    }

    /**
     * Scans body[from, to) (absolute indexes; the buffer's position and limit do not count);
     * returns the id and where the message lies, or says why not.
     */
    static Request scan(ByteBuffer body, int from, int to) throws Unreadable {
        return new ThesisScan(body, from, to, VECTORS).envelope();
    }

    /** The same, with or without the Vector API (the tests run both). */
    static Request scan(ByteBuffer body, int from, int to, boolean vectors) throws Unreadable {
        return new ThesisScan(body, from, to, vectors && VECTORS).envelope();
    }

    static Request scan(byte[] body, int from, int to) throws Unreadable {
        return scan(ByteBuffer.wrap(body), from, to);
    }

    static Request scan(byte[] body) throws Unreadable {
        return scan(body, 0, body.length);
    }

    private Request envelope() throws Unreadable {
        prolog();
        startTag("the SOAP Envelope");
        if (!is(ENV, "Envelope")) {
            if (local("Envelope")) {
                throw new Unreadable("VersionMismatch", "expected a SOAP 1.1 Envelope (namespace " + SOAP_ENV + ")");
            }
            throw client("expected a SOAP 1.1 Envelope, got " + tagName());
        }
        int envelope = nameStart;
        int envelopeLen = nameLen;
        if (selfClosing) {
            throw client("the envelope has no Body");
        }
        int envelopeScope = nsCount;
        content("the envelope");
        startTag("the SOAP Body");
        if (is(ENV, "Header")) {
            header();
            nsCount = envelopeScope;
            content("the envelope");
            startTag("the SOAP Body");
        }
        if (!is(ENV, "Body")) {
            throw client("expected the SOAP Body, got " + tagName());
        }
        int body = nameStart;
        int bodyLen = nameLen;
        int bodyScope = nsCount;
        if (selfClosing) {
            throw client("the SOAP Body is empty");
        }
        content("the Body");
        if (at("</")) {
            throw client("the SOAP Body is empty");
        }
        Request request = operation();
        nsCount = bodyScope;
        content("the Body");
        if (!at("</")) {
            throw client("the SOAP Body holds more than one element");
        }
        endTag(body, bodyLen);
        content("the envelope");
        endTag(envelope, envelopeLen);
        misc();
        if (p != end) {
            throw client("something follows the envelope");
        }
        return request;
    }

    /** ws:echoMessage and its unqualified children id and message, in either order. */
    private Request operation() throws Unreadable {
        startTag("the operation");
        if (!is(THESIS, "echoMessage")) {
            throw client("no operation " + tagName() + " here; this service has {" + EchoService.NAMESPACE
                    + "}echoMessage");
        }
        int wrapper = nameStart;
        int wrapperLen = nameLen;
        int id = 0;
        boolean haveId = false;
        int messageStart = -1;
        int messageEnd = -1;
        while (!selfClosing) {
            content("echoMessage");
            if (at("</")) {
                endTag(wrapper, wrapperLen);
                break;
            }
            int scope = nsCount;
            startTag("id or message");
            boolean unqualified = namespace() < 0;
            if (unqualified && local("id")) {
                if (haveId) {
                    throw client("the request has more than one id");
                }
                id = idValue();
                haveId = true;
            } else if (unqualified && local("message")) {
                if (messageStart >= 0) {
                    throw client("the request has more than one message");
                }
                if (selfClosing) {
                    messageStart = messageEnd = p;
                } else {
                    int child = nameStart;
                    int childLen = nameLen;
                    messageStart = p;
                    messageText(messageStart);
                    messageEnd = p;
                    endTag(child, childLen);
                }
            } else {
                throw client("unexpected element " + tagName() + " in echoMessage (expected the unqualified id and message)");
            }
            nsCount = scope;
            selfClosing = false;
        }
        if (!haveId) {
            throw client("the request has no id");
        }
        if (messageStart < 0) {
            throw client("the request has no message");
        }
        return new Request(id, messageStart, messageEnd);
    }

    /** The id's text: an xs:int, perhaps with a sign and surrounding whitespace. */
    private int idValue() throws Unreadable {
        if (selfClosing) {
            throw client("the id is empty");
        }
        int child = nameStart;
        int childLen = nameLen;
        int from = p;
        while (p < end && b.get(p) != '<') {
            p++;
        }
        int to = p;
        while (from < to && space(b.get(from))) {
            from++;
        }
        while (to > from && space(b.get(to - 1))) {
            to--;
        }
        int i = from;
        boolean negative = i < to && b.get(i) == '-';
        if (i < to && (b.get(i) == '-' || b.get(i) == '+')) {
            i++;
        }
        long value = 0;
        if (i == to) {
            throw client("the id must be a whole number, got '" + text(from, to) + "'");
        }
        for (; i < to; i++) {
            if (b.get(i) < '0' || b.get(i) > '9' || (value = value * 10 + (b.get(i) - '0')) > 2147483648L) {
                throw client("the id must be a whole number that fits an int, got '" + text(from, to) + "'");
            }
        }
        value = negative ? -value : value;
        if (value > Integer.MAX_VALUE) {
            throw client("the id must be a whole number that fits an int, got '" + text(from, to) + "'");
        }
        endTag(child, childLen);
        return (int) value;
    }

    /**
     * The message's content up to its end tag: text, references, CDATA sections and comments,
     * each checked; any other markup is refused (the message is a plain string).
     */
    private void messageText(int start) throws Unreadable {
        final ByteBuffer b = this.b;
        final int end = this.end;
        int p = this.p;
        while (p < end) {
            // Most of a 100 KB message is plain ASCII: skip it fast, then byte by byte to what needs a look.
            p = vectors ? PlainRuns.skip(b, p, end) : p;
            while (p < end && PLAIN[b.get(p) & 0xFF]) {
                p++;
            }
            if (p >= end) {
                break;
            }
            int c = b.get(p) & 0xFF;
            if (c >= 0x80) {
                p = utf8(p);
            } else if (c == '<') {
                this.p = p;
                if (at("</")) {
                    return;
                } else if (at("<![CDATA[")) {
                    this.p += 9;
                    checkedUntil("]]>", "a CDATA section");
                } else if (at("<!--")) {
                    comment();
                } else {
                    throw client("the message holds markup (" + (at("<!") ? "a declaration" : at("<?")
                            ? "a processing instruction" : "an element") + "); it must be text");
                }
                p = this.p;
            } else if (c == '&') {
                p = reference(p);
            } else if (c == '>') {
                if (p - 2 >= start && b.get(p - 1) == ']' && b.get(p - 2) == ']') {
                    throw client("']]>' is not allowed in text");
                }
                p++;
            } else {
                throw client("the message holds a control character (code " + c + "), which XML does not allow");
            }
        }
        this.p = p;
        throw client("the message is not closed");
    }

    /** Skips to past `terminator`, checking every character on the way (CDATA, comments). */
    private void checkedUntil(String terminator, String what) throws Unreadable {
        byte first = (byte) terminator.charAt(0);
        while (p < end) {
            int c = b.get(p) & 0xFF;
            if (c == first && at(terminator)) {
                p += terminator.length();
                return;
            }
            if (c >= 0x80) {
                p = utf8(p);
            } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
                throw client(what + " holds a control character (code " + c + "), which XML does not allow");
            } else {
                p++;
            }
        }
        throw client(what + " is not closed");
    }

    private void comment() throws Unreadable {
        p += 4;
        checkedUntil("--", "a comment");
        if (p >= end || b.get(p) != '>') {
            throw client("'--' is not allowed inside a comment");
        }
        p++;
    }

    /** One UTF-8 sequence at p that encodes a character XML allows; returns where the next begins. */
    private int utf8(int p) throws Unreadable {
        int c = b.get(p) & 0xFF;
        int more;
        int cp;
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            cp = c & 0x07;
        } else {
            throw client("the request is not valid UTF-8 (byte 0x" + Integer.toHexString(c) + ")");
        }
        if (p + more >= end) {
            throw client("the request is not valid UTF-8 (it ends inside a character)");
        }
        for (int i = 1; i <= more; i++) {
            int d = b.get(p + i) & 0xFF;
            if ((d & 0xC0) != 0x80) {
                throw client("the request is not valid UTF-8 (byte 0x" + Integer.toHexString(d) + ")");
            }
            cp = cp << 6 | d & 0x3F;
        }
        // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8; U+FFFE and U+FFFF not XML.
        if (more == 2 && (cp < 0x800 || cp >= 0xD800 && cp <= 0xDFFF || cp >= 0xFFFE)
                || more == 3 && (cp < 0x10000 || cp > 0x10FFFF)) {
            throw client("the request is not valid UTF-8 or holds a character XML does not allow (U+"
                    + Integer.toHexString(cp).toUpperCase() + ")");
        }
        return p + more + 1;
    }

    /** A reference at p ('&'): one of the five predefined entities or a character reference. */
    private int reference(int p) throws Unreadable {
        int semi = p + 1;
        while (semi < end && semi - p <= 32 && b.get(semi) != ';') {
            semi++;
        }
        if (semi >= end || b.get(semi) != ';') {
            throw client("a bare '&' in the message (write &amp;)");
        }
        String name = string(p + 1, semi, StandardCharsets.ISO_8859_1);
        switch (name) {
            case "lt", "gt", "amp", "quot", "apos" -> {
                return semi + 1;
            }
            default -> {
            }
        }
        if (name.startsWith("#")) {
            boolean hex = name.startsWith("#x");
            String digits = name.substring(hex ? 2 : 1);
            long cp = -1;
            if (!digits.isEmpty() && digits.length() <= 12
                    && digits.chars().allMatch(ch -> hex ? Character.digit(ch, 16) >= 0 : ch >= '0' && ch <= '9')) {
                cp = Long.parseLong(digits, hex ? 16 : 10);
            }
            if (cp == 0x9 || cp == 0xA || cp == 0xD || cp >= 0x20 && cp <= 0xD7FF || cp >= 0xE000 && cp <= 0xFFFD
                    || cp >= 0x10000 && cp <= 0x10FFFF) {
                return semi + 1;
            }
            throw client("the character reference &" + name + "; is not a character XML allows");
        }
        throw client("an undefined entity &" + name + "; (no DTD is read: only &lt; &gt; &amp; &quot; &apos; "
                + "and character references)");
    }

    // --- the envelope's structure ----------------------------------------------------------------

    /** A BOM, the XML declaration (which must not name another encoding), comments, PIs; no DTD. */
    private void prolog() throws Unreadable {
        if (at("\u00EF\u00BB\u00BF")) {
            p += 3;  // the UTF-8 byte order mark
        } else if (end - p >= 2 && (b.get(p) == 0 || b.get(p + 1) == 0 || (b.get(p) & 0xFE) == 0xFE && (b.get(p + 1) & 0xFE) == 0xFE)) {
            throw client("only UTF-8 requests are read (this one looks like UTF-16 or UTF-32)");
        }
        if (at("<?xml") && p + 5 < end && space(b.get(p + 5))) {
            int close = indexOf("?>", p);
            if (close < 0) {
                throw client("the XML declaration is not closed");
            }
            String declaration = string(p, close, StandardCharsets.ISO_8859_1);
            Matcher encoding = ENCODING.matcher(declaration);
            if (encoding.find() && !UTF8.matcher(encoding.group(2)).matches()) {
                throw client("only UTF-8 requests are read; the declaration says " + shortened(encoding.group(2)));
            }
            p = close + 2;
        }
        misc();
        if (at("<!")) {
            throw client(at("<!DOCTYPE") ? "a DTD is not allowed in a SOAP message" : "unexpected markup before the envelope");
        }
    }

    /** Whitespace, comments and processing instructions: what may stand between elements. */
    private void misc() throws Unreadable {
        while (p < end) {
            if (space(b.get(p))) {
                p++;
            } else if (at("<!--")) {
                comment();
            } else if (at("<?")) {
                int close = indexOf("?>", p + 2);
                if (close < 0) {
                    throw client("a processing instruction is not closed");
                }
                p = close + 2;
            } else {
                return;
            }
        }
    }

    /** Between elements of the envelope: no text but whitespace, and the request goes on. */
    private void content(String where) throws Unreadable {
        misc();
        if (p >= end) {
            throw client("the request ends inside " + where);
        }
        if (b.get(p) != '<') {
            throw client("unexpected text in " + where);
        }
        if (at("<!")) {
            throw client(at("<!DOCTYPE") ? "a DTD is not allowed in a SOAP message" : "unexpected markup in " + where);
        }
    }

    /** A start tag at p: its name, attributes and namespace declarations (which take effect at once). */
    private void startTag(String what) throws Unreadable {
        if (!at("<") || p + 1 >= end || !nameStart(b.get(p + 1))) {
            throw client("expected " + what);
        }
        nameStart = ++p;
        colon = -1;
        while (p < end && nameChar(b.get(p))) {
            if (b.get(p) == ':') {
                colon = colon < 0 && p > nameStart ? p : Integer.MAX_VALUE;
            }
            p++;
        }
        nameLen = p - nameStart;
        if (colon == Integer.MAX_VALUE || colon == nameStart + nameLen - 1) {
            throw client("a malformed element name " + tagName());
        }
        attrCount = 0;
        while (true) {
            boolean spaced = skipSpace();
            if (p >= end) {
                throw client("a start tag is not closed");
            }
            if (b.get(p) == '>') {
                p++;
                selfClosing = false;
                return;
            }
            if (at("/>")) {
                p += 2;
                selfClosing = true;
                return;
            }
            if (!spaced) {
                throw client("a malformed start tag " + tagName());
            }
            attribute();
        }
    }

    private void attribute() throws Unreadable {
        int name = p;
        while (p < end && nameChar(b.get(p))) {
            p++;
        }
        int len = p - name;
        skipSpace();
        if (len == 0 || p >= end || b.get(p) != '=') {
            throw client("a malformed attribute in " + tagName());
        }
        p++;
        skipSpace();
        byte quote = p < end ? b.get(p) : 0;
        if (quote != '"' && quote != '\'') {
            throw client("an unquoted attribute value in " + tagName());
        }
        int value = ++p;
        while (p < end && b.get(p) != quote) {
            if (b.get(p) == '<') {
                throw client("'<' in an attribute value of " + tagName());
            }
            p++;
        }
        if (p >= end) {
            throw client("an attribute value is not closed");
        }
        int valueLen = p++ - value;
        boolean declaresDefault = len == 5 && regionEquals(name, XMLNS);
        if (declaresDefault || len > 6 && regionEquals(name, XMLNS) && b.get(name + 5) == ':') {
            for (int i = value; i < value + valueLen; i++) {
                if (b.get(i) == '&') {
                    throw client("a reference in a namespace name is not read");
                }
            }
            if (nsCount + 4 > ns.length) {
                ns = Arrays.copyOf(ns, ns.length * 2);
            }
            ns[nsCount++] = declaresDefault ? name : name + 6;
            ns[nsCount++] = declaresDefault ? 0 : len - 6;
            ns[nsCount++] = value;
            ns[nsCount++] = valueLen;
        } else {
            if (attrCount + 4 > attrs.length) {
                attrs = Arrays.copyOf(attrs, attrs.length * 2);
            }
            attrs[attrCount++] = name;
            attrs[attrCount++] = len;
            attrs[attrCount++] = value;
            attrs[attrCount++] = valueLen;
        }
    }

    /** An end tag at p that must close the element named b[name, name + len). */
    private void endTag(int name, int len) throws Unreadable {
        if (!at("</") || p + 2 + len > end || !sameBytes(p + 2, name, len)
                || p + 2 + len < end && nameChar(b.get(p + 2 + len))) {
            throw client("expected the end tag of " + text(name, name + len));
        }
        p += 2 + len;
        skipSpace();
        if (p >= end || b.get(p) != '>') {
            throw client("a malformed end tag of " + text(name, name + len));
        }
        p++;
    }

    /** The SOAP Header (its start tag read): refuses what must be understood, skips the rest. */
    private void header() throws Unreadable {
        int header = nameStart;
        int headerLen = nameLen;
        while (!selfClosing) {
            content("the Header");
            if (at("</")) {
                endTag(header, headerLen);
                break;
            }
            int entryScope = nsCount;
            startTag("a header entry");
            for (int i = 0; i < attrCount; i += 4) {
                if (localOf(attrs[i], attrs[i + 1], "mustUnderstand") && attributeIn(attrs[i], attrs[i + 1], ENV)) {
                    String value = text(attrs[i + 2], attrs[i + 2] + attrs[i + 3]).trim();
                    if (value.equals("1") || value.equals("true")) {
                        throw new Unreadable("MustUnderstand", "MustUnderstand headers:[" + tagName() + "] are not understood");
                    }
                }
            }
            if (!selfClosing) {
                skipElement();
            }
            nsCount = entryScope;
            selfClosing = false;
        }
    }

    /** The content of the element whose start tag was just read, up to and including its end tag. */
    private void skipElement() throws Unreadable {
        int[] open = {nameStart, nameLen};
        int depth = 1;
        while (depth > 0) {
            int lt = indexOf("<", p);
            if (lt < 0) {
                throw client("an element in the Header is not closed");
            }
            p = lt;
            if (at("</")) {
                depth--;
                endTag(open[2 * depth], open[2 * depth + 1]);
            } else if (at("<!--")) {
                comment();
            } else if (at("<![CDATA[")) {
                p += 9;
                checkedUntil("]]>", "a CDATA section");
            } else if (at("<?")) {
                int close = indexOf("?>", p);
                if (close < 0) {
                    throw client("a processing instruction is not closed");
                }
                p = close + 2;
            } else if (at("<!")) {
                throw client(at("<!DOCTYPE") ? "a DTD is not allowed in a SOAP message" : "unexpected markup in the Header");
            } else {
                startTag("an element");
                if (!selfClosing) {
                    if (2 * depth + 2 > open.length) {
                        open = Arrays.copyOf(open, open.length * 2);
                    }
                    open[2 * depth] = nameStart;
                    open[2 * depth + 1] = nameLen;
                    depth++;
                }
            }
        }
    }

    // --- names and namespaces --------------------------------------------------------------------

    /** Whether the last start tag is {uri}local. */
    private boolean is(byte[] uri, String local) throws Unreadable {
        if (!local(local)) {
            return false;
        }
        int binding = namespace();
        return binding >= 0 && ns[binding + 3] == uri.length && regionEquals(ns[binding + 2], uri);
    }

    private boolean local(String local) {
        return localOf(nameStart, nameLen, local);
    }

    private boolean localOf(int name, int len, String local) {
        int from = colonIn(name, len) + 1;
        int localLen = name + len - from;
        if (localLen != local.length()) {
            return false;
        }
        for (int i = 0; i < localLen; i++) {
            if (b.get(from + i) != local.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    /** The binding (index into ns) of the last start tag's namespace; -1 when it is in none. */
    private int namespace() throws Unreadable {
        return resolve(nameStart, colon < 0 ? 0 : colon - nameStart);
    }

    private boolean attributeIn(int name, int len, byte[] uri) throws Unreadable {
        int c = colonIn(name, len);
        if (c < name) {
            return false;  // an unprefixed attribute is in no namespace
        }
        int binding = resolve(name, c - name);
        return binding >= 0 && ns[binding + 3] == uri.length && regionEquals(ns[binding + 2], uri);
    }

    /** The innermost declaration of the prefix b[prefix, prefix + len) (len 0: the default namespace). */
    private int resolve(int prefix, int len) throws Unreadable {
        for (int i = nsCount - 4; i >= 0; i -= 4) {
            if (ns[i + 1] == len && sameBytes(ns[i], prefix, len)) {
                return ns[i + 3] == 0 ? -1 : i;  // xmlns="" undeclares the default namespace
            }
        }
        if (len > 0 && !(len == 3 && b.get(prefix) == 'x' && b.get(prefix + 1) == 'm' && b.get(prefix + 2) == 'l')) {
            throw client("an undeclared namespace prefix " + text(prefix, prefix + len));
        }
        return -1;
    }

    private int colonIn(int name, int len) {
        for (int i = name; i < name + len; i++) {
            if (b.get(i) == ':') {
                return i;
            }
        }
        return name - 1;
    }

    /** The last start tag's name as {uri}local, for messages. */
    private String tagName() {
        try {
            int binding = namespace();
            String local = text(colon < 0 ? nameStart : colon + 1, nameStart + nameLen);
            return "{" + (binding < 0 ? "" : text(ns[binding + 2], ns[binding + 2] + ns[binding + 3])) + "}" + local;
        } catch (Unreadable e) {
            return text(nameStart, nameStart + nameLen);
        }
    }

    // --- bytes -----------------------------------------------------------------------------------

    private boolean at(String ascii) {
        if (p + ascii.length() > end) {
            return false;
        }
        for (int i = 0; i < ascii.length(); i++) {
            if (b.get(p + i) != (byte) ascii.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    private int indexOf(String ascii, int from) {
        outer:
        for (int i = from; i + ascii.length() <= end; i++) {
            for (int j = 0; j < ascii.length(); j++) {
                if (b.get(i + j) != (byte) ascii.charAt(j)) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

    private boolean regionEquals(int at, byte[] what) {
        if (at + what.length > end) {
            return false;
        }
        for (int i = 0; i < what.length; i++) {
            if (b.get(at + i) != what[i]) {
                return false;
            }
        }
        return true;
    }

    /** Whether the request's bytes at `at` and at `other` agree for `len` bytes. */
    private boolean sameBytes(int at, int other, int len) {
        if (at + len > end || other + len > end) {
            return false;
        }
        for (int i = 0; i < len; i++) {
            if (b.get(at + i) != b.get(other + i)) {
                return false;
            }
        }
        return true;
    }

    private boolean skipSpace() {
        int from = p;
        while (p < end && space(b.get(p))) {
            p++;
        }
        return p > from;
    }

    private static boolean space(byte c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
    }

    private static boolean nameStart(byte c) {
        return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c < 0;
    }

    /** Name characters, loosely: anything but whitespace, markup and quotes (non-ASCII included). */
    private static boolean nameChar(byte c) {
        return c < 0 || c > ' ' && c != '<' && c != '>' && c != '/' && c != '=' && c != '"' && c != '\''
                && c != '&' && c != 0x7F;
    }

    /** Request bytes for a fault's reason: decoded leniently and cut short. */
    private String text(int from, int to) {
        return string(from, Math.min(to, from + 60), StandardCharsets.UTF_8);
    }

    private static String shortened(String s) {
        return s.length() > 40 ? s.substring(0, 40) : s;
    }

    private String string(int from, int to, java.nio.charset.Charset charset) {
        byte[] bytes = new byte[to - from];
        b.get(from, bytes);
        return new String(bytes, charset);
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    private Unreadable client(String reason) {
        return new Unreadable("Client", reason);
    }
}
