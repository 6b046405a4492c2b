package esbperf.springintegration;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

import javax.xml.XMLConstants;
import javax.xml.parsers.DocumentBuilder;
import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.parsers.ParserConfigurationException;
import javax.xml.parsers.SAXParserFactory;
import javax.xml.transform.Result;
import javax.xml.transform.Source;
import javax.xml.transform.Templates;
import javax.xml.transform.TransformerConfigurationException;
import javax.xml.transform.TransformerFactory;
import javax.xml.transform.sax.SAXSource;
import javax.xml.transform.stream.StreamResult;
import javax.xml.transform.stream.StreamSource;

import org.springframework.core.io.ClassPathResource;
import org.springframework.integration.xml.DefaultXmlPayloadConverter;
import org.springframework.integration.xml.result.ResultFactory;
import org.springframework.integration.xml.source.SourceFactory;
import org.springframework.integration.xml.transformer.ResultTransformer;
import org.springframework.integration.xml.transformer.XsltPayloadTransformer;
import org.springframework.messaging.MessagingException;
import org.xml.sax.ErrorHandler;
import org.xml.sax.InputSource;
import org.xml.sax.SAXException;
import org.xml.sax.SAXParseException;
import org.xml.sax.XMLReader;
import org.xml.sax.ext.DefaultHandler2;
import org.xml.sax.helpers.XMLFilterImpl;

/**
 * The XML plumbing of the flows: every parser refuses a DOCTYPE (so no DTD, external entity or
 * file it names is ever read), bodies go in and come out as byte[], and the stylesheets run on
 * Saxon-HE.
 */
final class SafeXml {

    static final String DISALLOW_DOCTYPE = "http://apache.org/xml/features/disallow-doctype-decl";

    /** Errors are thrown, warnings ignored, nothing printed. */
    static final ErrorHandler THROWING = new ErrorHandler() {
        @Override
        public void warning(SAXParseException e) {
        }

        @Override
        public void error(SAXParseException e) throws SAXException {
            throw e;
        }

        @Override
        public void fatalError(SAXParseException e) throws SAXException {
            throw e;
        }
    };

    private SafeXml() {
    }

    /** The JDK's DOM parser (not whichever a jar registers), hardened. */
    static DocumentBuilderFactory documentBuilderFactory() {
        DocumentBuilderFactory factory = DocumentBuilderFactory.newDefaultInstance();
        factory.setNamespaceAware(true);
        factory.setXIncludeAware(false);
        factory.setExpandEntityReferences(false);
        try {
            factory.setFeature(DISALLOW_DOCTYPE, true);
            factory.setFeature(XMLConstants.FEATURE_SECURE_PROCESSING, true);
        } catch (ParserConfigurationException e) {
            throw new IllegalStateException(e);
        }
        factory.setAttribute(XMLConstants.ACCESS_EXTERNAL_DTD, "");
        factory.setAttribute(XMLConstants.ACCESS_EXTERNAL_SCHEMA, "");
        return factory;
    }

    /** The JDK's SAX parser, hardened the same way (the source of every XSLT). */
    static SAXParserFactory saxParserFactory() {
        SAXParserFactory factory = SAXParserFactory.newDefaultInstance();
        factory.setNamespaceAware(true);
        factory.setXIncludeAware(false);
        try {
            factory.setFeature(DISALLOW_DOCTYPE, true);
            factory.setFeature(XMLConstants.FEATURE_SECURE_PROCESSING, true);
            factory.setFeature("http://xml.org/sax/features/external-general-entities", false);
            factory.setFeature("http://xml.org/sax/features/external-parameter-entities", false);
        } catch (ParserConfigurationException | SAXException e) {
            throw new IllegalStateException(e);
        }
        return factory;
    }

    /**
     * Spring Integration's payload converter (byte[] to DOM for XPath) on the hardened factory,
     * with one parser per thread instead of a new one per message.
     */
    static final class PayloadConverter extends DefaultXmlPayloadConverter {

        private final ThreadLocal<DocumentBuilder> builders;

        PayloadConverter() {
            this(documentBuilderFactory());
        }

        private PayloadConverter(DocumentBuilderFactory factory) {
            super(factory);
            this.builders = ThreadLocal.withInitial(() -> {
                try {
                    return factory.newDocumentBuilder();
                } catch (ParserConfigurationException e) {
                    throw new IllegalStateException(e);
                }
            });
        }

        @Override
        protected DocumentBuilder getDocumentBuilder() {
            DocumentBuilder builder = this.builders.get();
            builder.reset();
            // The default handler also prints every error on stderr; the flow logs it once.
            builder.setErrorHandler(THROWING);
            return builder;
        }
    }

    /**
     * byte[] (or String) payloads as SAX sources read by a hardened parser, one per thread.
     * Used for every payload (alwaysUseSourceFactory): otherwise a String payload would be
     * parsed by Saxon's own parser, DOCTYPE and all.
     */
    static final class BytesSourceFactory implements SourceFactory {

        private final ThreadLocal<XMLReader> readers;

        BytesSourceFactory() {
            SAXParserFactory factory = saxParserFactory();
            this.readers = ThreadLocal.withInitial(() -> {
                try {
                    return factory.newSAXParser().getXMLReader();
                } catch (ParserConfigurationException | SAXException e) {
                    throw new IllegalStateException(e);
                }
            });
        }

        @Override
        public Source createSource(Object payload) {
            byte[] bytes;
            if (payload instanceof SAXSource made && made.getXMLReader() instanceof Detaching) {
                return made;   // XsltPayloadTransformer asks twice with alwaysUseSourceFactory
            } else if (payload instanceof byte[] b) {
                bytes = b;
            } else if (payload instanceof String s) {
                bytes = s.getBytes(StandardCharsets.UTF_8);
            } else {
                throw new MessagingException("cannot read a " + payload.getClass().getName() + " payload as XML");
            }
            return new SAXSource(new Detaching(this.readers.get()), new InputSource(new ByteArrayInputStream(bytes)));
        }
    }

    /**
     * Hands Saxon the thread's parser and detaches Saxon's handlers from it after the parse:
     * Saxon leaves them set, and through them an idle thread would keep its last document (and
     * a 1 MB one is several MB of tree) alive until its next request.
     */
    private static final class Detaching extends XMLFilterImpl {

        private static final DefaultHandler2 NOTHING = new DefaultHandler2();
        private static final String LEXICAL_HANDLER = "http://xml.org/sax/properties/lexical-handler";

        Detaching(XMLReader parser) {
            super(parser);
        }

        @Override
        public void parse(InputSource input) throws SAXException, IOException {
            try {
                super.parse(input);
            } finally {
                XMLReader parser = getParent();
                parser.setContentHandler(NOTHING);
                parser.setDTDHandler(NOTHING);
                parser.setEntityResolver(NOTHING);
                parser.setErrorHandler(THROWING);
                parser.setProperty(LEXICAL_HANDLER, NOTHING);
            }
        }
    }

    /** Stylesheet output written as bytes in the encoding of its xsl:output (UTF-8 here). */
    static final class BytesResultFactory implements ResultFactory, ResultTransformer {

        @Override
        public Result createResult(Object payload) {
            return new StreamResult(new ByteArrayOutputStream(8192));
        }

        @Override
        public Object transformResult(Result result) {
            return ((ByteArrayOutputStream) ((StreamResult) result).getOutputStream()).toByteArray();
        }
    }

    /** One Saxon configuration for every stylesheet (a configuration is costly to set up). */
    private static final TransformerFactory SAXON = saxon();

    private static TransformerFactory saxon() {
        net.sf.saxon.TransformerFactoryImpl factory = new net.sf.saxon.TransformerFactoryImpl();
        // At run time Saxon prints every error on stderr, a dozen lines for a request that is
        // not XML or not JSON; the error is thrown all the same and the flow logs it in one line.
        // (Errors in a stylesheet, at start, are still reported: they go through the factory.)
        factory.getConfiguration().setErrorReporterFactory(config -> error -> { });
        return factory;
    }

    /** A stylesheet from the classpath (xslt/, the shared stylesheets), compiled by Saxon-HE. */
    static Templates saxonTemplates(String classpathLocation) {
        TransformerFactory factory = SAXON;
        ClassPathResource resource = new ClassPathResource(classpathLocation);
        try (InputStream in = resource.getInputStream()) {
            return factory.newTemplates(new StreamSource(in, resource.getURL().toExternalForm()));
        } catch (IOException | TransformerConfigurationException e) {
            throw new IllegalStateException("cannot load the stylesheet " + classpathLocation, e);
        }
    }

    /**
     * Spring Integration's XSLT transformer: byte[] in (parsed without DTDs), byte[] out;
     * headers named in paramHeaders become stylesheet parameters.
     */
    static XsltPayloadTransformer xslt(Templates stylesheet, String... paramHeaders) {
        BytesResultFactory bytes = new BytesResultFactory();
        XsltPayloadTransformer transformer = new XsltPayloadTransformer(stylesheet, bytes);
        transformer.setSourceFactory(new BytesSourceFactory());
        transformer.setAlwaysUseSourceFactory(true);
        transformer.setResultFactory(bytes);
        transformer.setAlwaysUseResultFactory(true);
        if (paramHeaders.length > 0) {
            transformer.setXsltParamHeaders(paramHeaders);
        }
        return transformer;
    }
}
