package esbperf.console;

import java.beans.PropertyChangeEvent;
import java.lang.reflect.Field;

import net.grinder.communication.Acceptor;
import net.grinder.communication.CommunicationException;
import net.grinder.communication.ConnectionType;
import net.grinder.communication.ServerReceiver;
import net.grinder.console.communication.ConsoleCommunication;
import net.grinder.console.model.ConsoleProperties;

import org.picocontainer.Startable;
import org.slf4j.Logger;

/**
 * Lets the console see its agents' and workers' messages within milliseconds instead of up to
 * half a second.
 *
 * <p>The Grinder 3.11 console reads all its connections with reader threads that sleep 500 ms
 * whenever a pass over the connections finds nothing (the idle poll delay its communication
 * component fixes when it is built). So a worker's state change (started, running, finished)
 * and each statistics report reach the console 0–500 ms after they were sent, and the runner
 * waits for several of them in every step. This component adds to the console's own receiver a
 * reader that sleeps {@value #DEFAULT_POLL_MS} ms when idle (the system property
 * {@value #POLL_PROPERTY} sets it; 0 adds none): it reads the same connections into the same
 * queue, a connection is read by one reader at a time (so each connection's messages keep their
 * order), and Grinder's readers stay as they are. Nothing is rebuilt, so it works whether or not
 * agents are connected already. Its polling costs an idle console about half a percent of a core.</p>
 *
 * <p>It reaches the receiver through private fields of Grinder's
 * {@code ConsoleCommunicationImplementation}. Where Grinder's internals differ, it says so in one
 * line of the console's log and leaves the console as it was; it never stops the console from
 * starting.</p>
 */
public final class QuickMessageReaders implements Startable {

  static final String POLL_PROPERTY = "esbperf.console.readerPollMs";
  static final long DEFAULT_POLL_MS = 20;
  /** Grinder's own idle poll delay: a longer one would change nothing. */
  static final long GRINDER_POLL_MS = 500;

  /** One reader is enough: reading a message takes it microseconds, and Grinder's stay too. */
  private static final int READERS = 1;
  /** The connections the console itself reads (ConsoleCommunicationImplementation.reset()). */
  private static final ConnectionType[] CONNECTIONS = {
    ConnectionType.AGENT, ConnectionType.CONSOLE_CLIENT, ConnectionType.WORKER,
  };

  private final Logger logger;
  private final ConsoleCommunication communication;
  private final ConsoleProperties properties;
  private Object served;   // the receiver our reader was added to

  public QuickMessageReaders(Logger logger, ConsoleCommunication communication, ConsoleProperties properties) {
    this.logger = logger;
    this.communication = communication;
    this.properties = properties;
  }

  @Override
  public void start() {
    final long pollMs;
    try {
      pollMs = pollMs(System.getProperty(POLL_PROPERTY));
    }
    catch (IllegalArgumentException e) {
      logger.warn(e.getMessage());
      return;
    }
    if (pollMs == 0) {
      logger.info("esbperf: the console's message readers keep Grinder's idle poll of {} ms ({}=0)",
                  GRINDER_POLL_MS, POLL_PROPERTY);
      return;
    }
    if (addReader(pollMs)) {
      // The console rebuilds its receiver when its own address changes; give the new one a reader too.
      // This listener runs after the console's own (registered when it was built, before us).
      properties.addPropertyChangeListener((PropertyChangeEvent event) -> {
        if (ConsoleProperties.CONSOLE_HOST_PROPERTY.equals(event.getPropertyName())
            || ConsoleProperties.CONSOLE_PORT_PROPERTY.equals(event.getPropertyName())) {
          addReader(pollMs);
        }
      });
    }
  }

  @Override
  public void stop() {
    // The reader belongs to the console's receiver, which stops it when the console shuts down.
  }

  /**
   * The idle poll delay asked for by the system property's value {@code value} (null: not set):
   * 0 means Grinder's own; a message for the log when it is not a whole number from 0 to 500.
   */
  static long pollMs(String value) {
    if (value == null || value.isBlank()) {
      return DEFAULT_POLL_MS;
    }
    try {
      final long ms = Long.parseLong(value.trim());
      if (ms >= 0 && ms <= GRINDER_POLL_MS) {
        return ms;
      }
    }
    catch (NumberFormatException e) {
      // said below
    }
    throw new IllegalArgumentException("esbperf: " + POLL_PROPERTY + "=" + value + " is not a whole number of ms from 0 to "
        + GRINDER_POLL_MS + "; the console's message readers keep Grinder's idle poll of " + GRINDER_POLL_MS + " ms");
  }

  /** Adds a reader polling every {@code pollMs} to the console's current receiver; says what it did in one line. */
  synchronized boolean addReader(long pollMs) {
    try {
      final ServerReceiver receiver = field("m_receiver", ServerReceiver.class);
      final Acceptor acceptor = field("m_acceptor", Acceptor.class);
      final long grinderPollMs = field("m_idlePollDelay", long.class);
      final long inactiveClientTimeOut = field("m_inactiveClientTimeOut", long.class);
      if (receiver == null || acceptor == null) {
        throw new IllegalStateException("the console has no receiver (it could not listen?)");
      }
      if (receiver == served) {
        return true;   // the console kept its receiver (its new address could not be bound)
      }
      if (grinderPollMs <= pollMs) {
        logger.info("esbperf: the console's message readers already poll every {} ms when idle", grinderPollMs);
        return false;
      }
      receiver.receiveFrom(acceptor, CONNECTIONS, READERS, pollMs, inactiveClientTimeOut);
      served = receiver;
      logger.info("esbperf: the console looks for agents' and workers' messages every {} ms when idle (a reader added "
          + "beside Grinder's, which look every {} ms; -D{}=0 keeps Grinder's alone)",
          new Object[] {pollMs, grinderPollMs, POLL_PROPERTY});
      return true;
    }
    catch (ReflectiveOperationException | CommunicationException | RuntimeException | LinkageError e) {
      logger.warn("esbperf: the console's message readers keep Grinder's idle poll (state changes and reports may "
          + "reach it up to {} ms late): its internals are not The Grinder 3.11's ({})", GRINDER_POLL_MS, e.toString());
      return false;
    }
  }

  /** A private field of the console's communication component, if it has one of this name and type. */
  @SuppressWarnings("unchecked")
  private <T> T field(String name, Class<?> type) throws ReflectiveOperationException {
    final Field f = communication.getClass().getDeclaredField(name);
    if (f.getType() != type) {
      throw new NoSuchFieldException(name + " is a " + f.getType().getName() + ", not a " + type.getName());
    }
    f.setAccessible(true);
    return (T) f.get(communication);
  }
}
