package esbperf.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.lang.reflect.Proxy;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;

import net.grinder.communication.ClientSender;
import net.grinder.communication.ConnectionType;
import net.grinder.communication.Connector;
import net.grinder.communication.Message;
import net.grinder.communication.MessageDispatchRegistry;
import net.grinder.console.common.ErrorHandler;
import net.grinder.console.common.ResourcesImplementation;
import net.grinder.console.communication.ConsoleCommunication;
import net.grinder.console.communication.ConsoleCommunicationImplementation;
import net.grinder.console.model.ConsoleProperties;
import net.grinder.util.StandardTimeAuthority;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * Against Grinder's real console communication, built with an idle poll delay of a minute so
 * that a message its own readers would read arrives either at once (our reader) or not for a
 * minute: the outcome cannot depend on timing luck.
 */
class QuickMessageReadersTest {

  private static final long GRINDER_READERS_SLEEP_MS = 60_000;
  private static final long PATIENCE_MS = 1_000;

  /** What a worker sends; the console hands it to our handler. */
  static final class Ping implements Message {
    private static final long serialVersionUID = 1L;
    final int number;

    Ping(int number) {
      this.number = number;
    }
  }

  @TempDir Path folder;
  private ConsoleProperties properties;
  private ConsoleCommunicationImplementation communication;
  private final BlockingQueue<Integer> received = new LinkedBlockingQueue<>();
  private final ListAppender<ILoggingEvent> log = new ListAppender<>();
  private Logger logger;
  private Thread dispatch;
  private final ErrorList consoleErrors = new ErrorList();

  @BeforeEach
  void console() throws Exception {
    final ResourcesImplementation resources = new ResourcesImplementation("net.grinder.console.common.resources.Console");
    properties = new ConsoleProperties(resources, new File(folder.toFile(), "console.properties"));
    properties.setConsoleHost("127.0.0.1");
    properties.setConsolePort(freePort());
    communication = new ConsoleCommunicationImplementation(resources, properties, consoleErrors,
        new StandardTimeAuthority(), GRINDER_READERS_SLEEP_MS, 300_000);
    communication.getMessageDispatchRegistry().set(Ping.class, new MessageDispatchRegistry.Handler<Ping>() {
      @Override
      public void handle(Ping message) {
        received.add(message.number);
      }

      @Override
      public void shutdown() {
      }
    });
    dispatch = new Thread(() -> {
      while (communication.processOneMessage()) {
        // as the console's main loop does
      }
    }, "console dispatch");
    dispatch.setDaemon(true);
    dispatch.start();
    logger = (Logger) LoggerFactory.getLogger("quick-readers-test-" + System.nanoTime());
    log.start();
    logger.addAppender(log);
  }

  @AfterEach
  void shutdown() throws Exception {
    System.clearProperty(QuickMessageReaders.POLL_PROPERTY);
    assertEquals(List.of(), consoleErrors.errors, "the console reported no error");
    communication.shutdown();
    dispatch.join(5_000);
  }

  @Test
  void thePollIsTheDefaultOrAWholeNumberOfMsUpToGrindersOwn() {
    assertEquals(QuickMessageReaders.DEFAULT_POLL_MS, QuickMessageReaders.pollMs(null));
    assertEquals(QuickMessageReaders.DEFAULT_POLL_MS, QuickMessageReaders.pollMs(" "));
    assertEquals(20, QuickMessageReaders.pollMs("20"));
    assertEquals(0, QuickMessageReaders.pollMs("0"));
    assertEquals(500, QuickMessageReaders.pollMs(" 500 "));
    for (String bad : new String[] {"-1", "501", "10ms", "0.5", "ten"}) {
      final IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> QuickMessageReaders.pollMs(bad));
      assertTrue(e.getMessage().contains(QuickMessageReaders.POLL_PROPERTY + "=" + bad + " is not a whole number"), e.getMessage());
    }
  }

  @Test
  void aWorkersMessageIsReadAtOnceWithTheReaderAndNotBeforeGrindersReadersWakeWithout() throws Exception {
    final ClientSender worker = idleWorker();
    try {
      worker.send(new Ping(1));
      assertNull(received.poll(PATIENCE_MS, TimeUnit.MILLISECONDS), "Grinder's readers sleep a minute: nothing is read yet");

      new QuickMessageReaders(logger, communication, properties).start();
      assertEquals(1, received.poll(PATIENCE_MS, TimeUnit.MILLISECONDS), "the waiting message is read at once");
      assertEquals(List.of("INFO esbperf: the console looks for agents' and workers' messages every 20 ms when idle "
          + "(a reader added beside Grinder's, which look every 60000 ms; -Desbperf.console.readerPollMs=0 keeps Grinder's alone)"),
          lines());

      Thread.sleep(200);   // our reader is idle again
      for (int i = 2; i <= 4; i++) {
        worker.send(new Ping(i));
        assertEquals(i, received.poll(PATIENCE_MS, TimeUnit.MILLISECONDS), "each message in turn, at once");
      }
    }
    finally {
      worker.shutdown();
    }
  }

  @Test
  void zeroLeavesGrindersReadersAlone() throws Exception {
    System.setProperty(QuickMessageReaders.POLL_PROPERTY, "0");
    new QuickMessageReaders(logger, communication, properties).start();
    final ClientSender worker = idleWorker();
    try {
      worker.send(new Ping(1));
      assertNull(received.poll(PATIENCE_MS, TimeUnit.MILLISECONDS));
    }
    finally {
      worker.shutdown();
    }
    assertEquals(List.of("INFO esbperf: the console's message readers keep Grinder's idle poll of 500 ms "
        + "(esbperf.console.readerPollMs=0)"), lines());
  }

  @Test
  void aBadSettingIsOneLineAndChangesNothing() throws Exception {
    System.setProperty(QuickMessageReaders.POLL_PROPERTY, "fast");
    new QuickMessageReaders(logger, communication, properties).start();
    assertEquals(1, lines().size());
    assertTrue(lines().get(0).startsWith("WARN esbperf: esbperf.console.readerPollMs=fast is not a whole number"), lines().get(0));
    final ClientSender worker = idleWorker();
    try {
      worker.send(new Ping(1));
      assertNull(received.poll(PATIENCE_MS, TimeUnit.MILLISECONDS));
    }
    finally {
      worker.shutdown();
    }
  }

  @Test
  void whenTheConsoleRebuildsItsReceiverForANewPortTheNewOneGetsAReaderToo() throws Exception {
    new QuickMessageReaders(logger, communication, properties).start();
    properties.setConsolePort(freePort());   // the console shuts its receiver and builds another
    final ClientSender worker = idleWorker();
    try {
      worker.send(new Ping(7));
      assertEquals(7, received.poll(PATIENCE_MS, TimeUnit.MILLISECONDS));
    }
    finally {
      worker.shutdown();
    }
    assertEquals(2, lines().size(), lines().toString());
  }

  @Test
  void whereGrindersInternalsDifferItSaysSoInOneLineAndTouchesNothing() {
    final ConsoleCommunication other = (ConsoleCommunication) Proxy.newProxyInstance(
        getClass().getClassLoader(), new Class<?>[] {ConsoleCommunication.class},
        (proxy, method, args) -> {
          throw new AssertionError("called " + method.getName());
        });
    new QuickMessageReaders(logger, other, properties).start();
    assertEquals(1, lines().size());
    assertTrue(lines().get(0).startsWith("WARN esbperf: the console's message readers keep Grinder's idle poll "
        + "(state changes and reports may reach it up to 500 ms late): its internals are not The Grinder 3.11's "
        + "(java.lang.NoSuchFieldException: m_receiver)"), lines().get(0));
  }

  /** A worker connected to the console, once Grinder's readers have gone to sleep. */
  private ClientSender idleWorker() throws Exception {
    final ClientSender sender = ClientSender.connect(
        new Connector(properties.getConsoleHost(), properties.getConsolePort(), ConnectionType.WORKER), null);
    assertNotNull(sender);
    Thread.sleep(300);   // every reader found nothing twice and sleeps
    return sender;
  }

  private List<String> lines() {
    return log.list.stream().map(e -> e.getLevel() + " " + e.getFormattedMessage()).collect(Collectors.toList());
  }

  private static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /** The console's errors, for the test to look at (the console reports them from its own threads). */
  private static final class ErrorList implements ErrorHandler {
    final List<String> errors = new CopyOnWriteArrayList<>();

    @Override
    public void handleErrorMessage(String message) {
      errors.add(message);
    }

    @Override
    public void handleErrorMessage(String message, String title) {
      errors.add(message);
    }

    @Override
    public void handleException(Throwable t) {
      errors.add(t.toString());
    }

    @Override
    public void handleException(Throwable t, String title) {
      errors.add(t.toString());
    }

    @Override
    public void handleInformationMessage(String message) {
    }
  }
}
