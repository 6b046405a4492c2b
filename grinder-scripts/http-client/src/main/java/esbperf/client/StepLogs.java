package esbperf.client;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.FileAppender;
import net.grinder.statistics.ExpressionView;
import net.grinder.statistics.StatisticsServicesImplementation;
import net.grinder.util.logback.BufferedEchoMessageEncoder;
import org.slf4j.LoggerFactory;

/**
 * A warm worker's logs, one pair per step: while a step is open, Grinder's worker log and data log
 * (loggers "worker" and "data", logback-worker.xml in grinder-core) write to
 * {@code <step's log folder>/<worker>.log} and {@code <worker>-data.log} instead of the files the
 * process started with, so a step's folder holds exactly what a fresh worker of that step would
 * have left: the same names, the data log's header, its rows, and a last line saying the step
 * closed normally (a killed worker cannot write it). Between steps the original files take the
 * lines again. Grinder writes a transaction's row by the end of its run, so once every thread has
 * left a step (Steps) its rows are all in that step's file; closing it flushes them.
 */
public final class StepLogs implements Steps.Logs {

  /** Grinder's own pattern for the worker log (logback-worker.xml). */
  private static final String PATTERN = "%d %-5level %logger{0} %marker: %message%n";
  /** The lines of the process's start copied into each step's worker log: its versions are read there. */
  private static final int START_LINES = 60;

  private final LoggerContext context;
  private final Logger worker;
  private final Logger data;
  private final Appender<ILoggingEvent> workerBase;
  private final Appender<ILoggingEvent> dataBase;
  private final String name;
  private final File base;
  private FileAppender<ILoggingEvent> workerStep;
  private FileAppender<ILoggingEvent> dataStep;
  private List<String> startLines;

  /**
   * @param logDirectory the worker's own grinder.logDirectory, as the runner gave it (the agent
   *                     hands its workers the folder resolved): a step's log folder, relative like
   *                     it, resolves where it did (the agent's working folder, not the worker's)
   */
  public StepLogs(String logDirectory) {
    this.context = (LoggerContext) LoggerFactory.getILoggerFactory();
    this.worker = context.getLogger("worker");
    this.data = context.getLogger("data");
    this.workerBase = worker.getAppender("log-file");
    this.dataBase = data.getAppender("data-file");
    this.name = context.getProperty("WORKER_NAME");
    if (!(workerBase instanceof FileAppender) || dataBase == null || name == null) {
      throw new IllegalStateException("not a Grinder 3.11 worker's logging (logback-worker.xml): cannot keep logs per step");
    }
    this.base = baseOf(new File(((FileAppender<ILoggingEvent>) workerBase).getFile()).getAbsoluteFile().getParentFile(),
                       logDirectory);
  }

  /** The folder that {@code relative} was resolved against to give {@code resolved}. */
  static File baseOf(File resolved, String relative) {
    final java.nio.file.Path rel = java.nio.file.Path.of(relative).normalize();
    if (rel.isAbsolute()) {
      return resolved;
    }
    java.nio.file.Path path = resolved.toPath().normalize();
    if (!path.endsWith(rel)) {
      throw new IllegalStateException("the worker's log folder " + path + " does not end with its grinder.logDirectory "
          + relative);
    }
    for (int i = 0; i < rel.getNameCount(); i++) {
      path = path.getParent();
    }
    return path.toFile();
  }

  /** The data log's first line, as Grinder writes it at a worker's start. */
  static String dataHeader() {
    final StringBuilder header = new StringBuilder("Thread, Run, Test, Start time (ms since Epoch)");
    for (ExpressionView view : StatisticsServicesImplementation.getInstance().getDetailStatisticsView()
        .getExpressionViews()) {
      header.append(", ").append(view.getDisplayName());
    }
    return header.toString();
  }

  @Override
  public synchronized void open(Order order) throws IOException {
    final String relative = order.get("esbperf.step.logs", "");
    if (relative.isEmpty() || relative.contains("..")) {
      throw new IOException("order " + order.getSeq() + " names no log folder (esbperf.step.logs)");
    }
    final File folder = new File(relative).isAbsolute() ? new File(relative) : new File(base, relative);
    // Every worker process of the agent makes the same folder at once: File.mkdirs fails for the one
    // that loses the race, Files.createDirectories takes a folder another made meanwhile.
    Files.createDirectories(folder.toPath());
    final File workerFile = new File(folder, name + ".log");
    if (startLines == null) {   // read once, before any step: later lines of the process are no step's start
      startLines = startLines();
    }
    Files.write(workerFile.toPath(), startLines, StandardCharsets.UTF_8);
    final PatternLayoutEncoder pattern = new PatternLayoutEncoder();
    pattern.setContext(context);
    pattern.setPattern(PATTERN);
    pattern.start();
    workerStep = appender("esbperf-step-log", workerFile, pattern, true);
    final BufferedEchoMessageEncoder echo = new BufferedEchoMessageEncoder();
    echo.setContext(context);
    echo.start();
    dataStep = appender("esbperf-step-data", new File(folder, name + "-data.log"), echo, false);
    worker.addAppender(workerStep);
    worker.detachAppender(workerBase);
    data.addAppender(dataStep);
    data.detachAppender(dataBase);
    data.info(dataHeader());
    worker.info("esbperf: step " + order.getSeq() + " opened in this warm worker");
  }

  @Override
  public synchronized void close(Order order, String closingLine) {
    if (workerStep == null) {
      return;
    }
    worker.info(closingLine);
    worker.addAppender(workerBase);
    worker.detachAppender(workerStep);
    data.addAppender(dataBase);
    data.detachAppender(dataStep);
    workerStep.stop();   // flushes and closes: the files are whole on disk from here on
    dataStep.stop();
    workerStep = null;
    dataStep = null;
  }

  private FileAppender<ILoggingEvent> appender(String appenderName, File file,
                                               ch.qos.logback.core.encoder.Encoder<ILoggingEvent> encoder,
                                               boolean append) {
    final FileAppender<ILoggingEvent> appender = new FileAppender<>();
    appender.setContext(context);
    appender.setName(appenderName);
    appender.setFile(file.getPath());
    appender.setAppend(append);
    appender.setEncoder(encoder);
    appender.start();
    return appender;
  }

  /** The first lines of the process's own worker log (its versions and settings), for each step's. */
  private List<String> startLines() {
    final List<String> lines = new ArrayList<>();
    lines.add("esbperf: a warm worker's log of one step; first, the worker's start as it logged it:");
    {
      final File file = new File(((FileAppender<ILoggingEvent>) workerBase).getFile());
      try (BufferedReader reader = Files.newBufferedReader(file.toPath(), StandardCharsets.UTF_8)) {
        for (String line; lines.size() <= START_LINES && (line = reader.readLine()) != null; ) {
          lines.add(line);
        }
      }
      catch (IOException e) {
        lines.add("(the start lines could not be read: " + e + ")");
      }
    }
    return lines;
  }
}
