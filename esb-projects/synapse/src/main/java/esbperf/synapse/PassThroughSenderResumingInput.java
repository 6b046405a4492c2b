package esbperf.synapse;

import java.lang.reflect.Field;

import javax.net.ssl.SSLContext;

import org.apache.axis2.AxisFault;
import org.apache.axis2.description.TransportOutDescription;
import org.apache.http.config.ConnectionConfig;
import org.apache.http.nio.NHttpClientConnection;
import org.apache.http.nio.NHttpClientEventHandler;
import org.apache.http.nio.reactor.IOEventDispatch;
import org.apache.http.nio.reactor.ssl.SSLSetupHandler;
import org.apache.synapse.transport.passthru.DeliveryAgent;
import org.apache.synapse.transport.passthru.PassThroughHttpSender;
import org.apache.synapse.transport.passthru.ProtocolState;
import org.apache.synapse.transport.passthru.TargetContext;
import org.apache.synapse.transport.passthru.TargetHandler;

/**
 * Synapse 3.0.1's pass-through HTTP sender, with one fix: a pooled back-end connection is made
 * readable again before it carries a new request.
 *
 * <p>When a back end's answer fills the transfer buffer on its last read, the sender suspends
 * reading on that connection and then returns it to its pool still suspended; the next answer
 * on the connection is never read and the client waits until the back-end timeout. Registered
 * as the http transportSender in conf/axis2.xml.
 */
public class PassThroughSenderResumingInput extends PassThroughHttpSender {

    @Override
    protected IOEventDispatch getEventDispatch(NHttpClientEventHandler handler, SSLContext sslContext,
                                               SSLSetupHandler sslSetupHandler, ConnectionConfig config,
                                               TransportOutDescription transportOut) throws AxisFault {
        return super.getEventDispatch(new ResumingTargetHandler((TargetHandler) handler), sslContext,
                                      sslSetupHandler, config, transportOut);
    }

    /** The sender's own handler (a subclass, since Synapse's connections look for one). */
    static final class ResumingTargetHandler extends TargetHandler {

        ResumingTargetHandler(TargetHandler original) throws AxisFault {
            super(deliveryAgentOf(original), original.getTargetConfiguration());
        }

        @Override
        public void requestReady(NHttpClientConnection conn) {
            if (TargetContext.getState(conn) == ProtocolState.REQUEST_READY) {
                conn.requestInput();   // a new exchange starts: its answer must be read
            }
            super.requestReady(conn);
        }

        private static DeliveryAgent deliveryAgentOf(TargetHandler handler) throws AxisFault {
            try {
                Field field = TargetHandler.class.getDeclaredField("deliveryAgent");
                field.setAccessible(true);
                return (DeliveryAgent) field.get(handler);
            } catch (ReflectiveOperationException e) {
                throw new AxisFault("cannot reach the pass-through sender's delivery agent", e);
            }
        }
    }
}
