package esbperf.echo;

import com.sun.xml.ws.api.streaming.XMLStreamReaderFactory;

import javax.xml.stream.XMLStreamConstants;
import javax.xml.stream.XMLStreamException;
import javax.xml.stream.XMLStreamReader;
import javax.xml.stream.util.StreamReaderDelegate;
import java.io.InputStream;
import java.io.Reader;

/**
 * The RI's parser factory, made to honour its own rejectDTDs flag (set for every SOAP
 * message it decodes). The RI's default already resolves no entity, but it skips a DTD
 * silently; SOAP 1.1 forbids DTDs in messages, so we refuse them: a SOAP fault, as on CXF.
 */
final class NoDtdReaderFactory extends XMLStreamReaderFactory {

    private final XMLStreamReaderFactory parsers;

    NoDtdReaderFactory(XMLStreamReaderFactory parsers) {
        this.parsers = parsers;
    }

    @Override
    public XMLStreamReader doCreate(String systemId, InputStream in, boolean rejectDTDs) {
        XMLStreamReader reader = parsers.doCreate(systemId, in, rejectDTDs);
        return rejectDTDs ? new NoDtd(reader) : reader;
    }

    @Override
    public XMLStreamReader doCreate(String systemId, Reader in, boolean rejectDTDs) {
        XMLStreamReader reader = parsers.doCreate(systemId, in, rejectDTDs);
        return rejectDTDs ? new NoDtd(reader) : reader;
    }

    @Override
    public void doRecycle(XMLStreamReader reader) {
        parsers.doRecycle(reader instanceof NoDtd noDtd ? noDtd.getParent() : reader);
    }

    private static final class NoDtd extends StreamReaderDelegate {
        NoDtd(XMLStreamReader reader) {
            super(reader);
        }

        @Override
        public int next() throws XMLStreamException {
            int event = super.next();
            if (event == XMLStreamConstants.DTD) {
                throw new XMLStreamException("a DTD is not allowed in a SOAP message");
            }
            return event;
        }

        @Override
        public int nextTag() throws XMLStreamException {
            // Through next(), so a DTD met on the way is refused too.
            int event = next();
            while (event == XMLStreamConstants.SPACE || event == XMLStreamConstants.COMMENT
                    || event == XMLStreamConstants.PROCESSING_INSTRUCTION
                    || (event == XMLStreamConstants.CHARACTERS && isWhiteSpace())) {
                event = next();
            }
            if (event != XMLStreamConstants.START_ELEMENT && event != XMLStreamConstants.END_ELEMENT) {
                throw new XMLStreamException("expected a start or end tag, got event " + event);
            }
            return event;
        }
    }
}
