package esbperf.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;

/**
 * The steps of a run as one warm worker process sees them: a thread polls the console's step
 * board (esbperf.console.StepBoard) and hands its orders over to the worker threads.
 *
 * <p>A hand-over, in order: the old step is over (no thread may enter it; its open-model schedule
 * wakes its sleepers); once every thread that entered it has left — each after its last
 * transaction, whose data-log row Grinder has written by then — its logs are closed
 * ({@link Logs#close}), complete on disk; then the new step's logs are opened and the new order
 * becomes current. The process tells the board "adopted:N" only after all that, so the runner
 * knows from it both that order N holds and that every older step's logs are whole. Each poll
 * also says how many of the process's threads the current step counts ("takes", by the process's
 * place: {@link Order#takes}) and how many have begun their part so far ("begun": ready to send,
 * or found they cannot take part); while some are still to come, the process polls at once every
 * {@link #JOINING_POLL_MILLIS}, so the runner starts the step's clock when the last one has.</p>
 *
 * <p>Threads use {@link #current}, {@link #enter}, {@link #begun}, {@link #leave} and {@link #awaitOther}.
 * A board that stops answering for {@code lostAfterMillis}, or that no longer knows the run's
 * key, ends the run for this process: its threads stop, and so does the process.</p>
 */
public final class Steps {

  /** How a process opens and closes a step's logs (Grinder's own log files, per step: {@link StepLogs}). */
  public interface Logs {
    void open(Order order) throws IOException;

    void close(Order order, String closingLine) throws IOException;
  }

  /** The worker log's last line of a step whose logs are whole (the runner looks for it: esbperf/run/collect.py). */
  public static final String CLOSED = "closed normally:";
  /** How often a process whose threads are still joining the step tells the board how many have begun. */
  static final long JOINING_POLL_MILLIS = 20;
  private static final long RETRY_MILLIS = 200;
  private static final int READ_TIMEOUT_MILLIS = 15_000;

  private final String url;
  private final String key;
  private final String worker;
  private final Logs logs;
  private final long closeWaitMillis;
  private final long lostAfterMillis;
  private final Consumer<String> log;
  private final Object lock = new Object();
  private volatile Order current = new Order(0, Order.IDLE, Map.of());
  private volatile String state = "ready";
  private volatile Thread poller;
  private int agent;
  private int process;
  private int threads;

  /**
   * @param url             the board's GET /order address
   * @param closeWaitMillis how long a step's threads may take to leave it (a request in flight
   *                        finishes within its timeout) before the process says it is stuck
   * @param log             a line for the worker's log
   */
  public Steps(String url, String key, String worker, Logs logs, long closeWaitMillis, long lostAfterMillis,
               Consumer<String> log) {
    this.url = url;
    this.key = key;
    this.worker = worker;
    this.logs = logs;
    this.closeWaitMillis = closeWaitMillis;
    this.lostAfterMillis = lostAfterMillis;
    this.log = log;
  }

  /**
   * Start polling the board (once), as the process {@code process} (from the first) of agent
   * {@code agent}, with {@code threads} worker threads: what it tells the board of its threads'
   * part in each step.
   */
  public synchronized void start(int agent, int process, int threads) {
    if (poller == null) {
      this.agent = agent;
      this.process = process;
      this.threads = threads;
      poller = new Thread(this::run, "esbperf-steps");
      poller.setDaemon(true);
      poller.start();
    }
  }

  /** The order now in force. */
  public Order current() {
    return current;
  }

  /** A thread takes part in {@code order}: false once it is over or no longer current. */
  public boolean enter(Order order) {
    synchronized (lock) {
      if (order.isOver() || order != current) {
        return false;
      }
      order.threads++;
      order.entered++;
      return true;
    }
  }

  /**
   * A thread that entered {@code order} has begun its part: its first transaction comes next (in
   * the open model, once its schedule gives it a ticket), or it found it cannot take part at all.
   * A new worker's thread can take seconds from entering to here on a busy client (its first
   * request's objects built by Jython, interpreted): the step's clock waits for the last one.
   */
  public void begun(Order order) {
    synchronized (lock) {
      order.begun++;
    }
  }

  /** A thread that entered {@code order} has ended its last transaction in it. */
  public void leave(Order order) {
    synchronized (lock) {
      order.threads--;
      lock.notifyAll();
    }
  }

  /**
   * Wait at most {@code millis} for an order other than {@code seen}; the current one. (An order
   * that is over stays current until its last thread has left it: waiting for it to be over would
   * spin meanwhile.)
   */
  public Order awaitOther(Order seen, long millis) throws InterruptedException {
    final long until = System.nanoTime() + millis * 1_000_000;
    synchronized (lock) {
      long left;
      while (current == seen && (left = until - System.nanoTime()) > 0) {
        lock.wait(Math.max(1, left / 1_000_000));
      }
      return current;
    }
  }

  /** What this process last told the board. */
  public String getState() {
    return state;
  }

  /** How many of this process's threads {@code order} counts. */
  int takes(Order order) {
    int count = 0;
    for (int thread = 0; thread < threads; thread++) {
      count += order.takes(agent, process, thread) ? 1 : 0;
    }
    return count;
  }

  /** Whether some threads the current step counts have not begun their part in it yet. */
  private boolean joining() {
    final Order order = current;
    if (!order.isStep() || order.isOver()) {
      return false;
    }
    synchronized (lock) {
      return order.begun < takes(order);
    }
  }

  private void run() {
    long failingSince = -1;
    while (true) {
      Order next;
      try {
        final boolean joining = joining();
        if (joining) {
          sleep(JOINING_POLL_MILLIS);
        }
        next = poll(joining ? -1 : current.getSeq());   // -1: the board answers at once
        failingSince = -1;
      }
      catch (Refused e) {
        log.accept("the step board no longer knows this run (" + e.getMessage().trim() + "): ending");
        next = new Order(current.getSeq() + 1, Order.END, Map.of());
      }
      catch (IOException e) {
        final long now = System.currentTimeMillis();
        failingSince = failingSince < 0 ? now : failingSince;
        if (now - failingSince < lostAfterMillis) {
          sleep(RETRY_MILLIS);
          continue;
        }
        log.accept("the step board has not answered for " + (now - failingSince) / 1000 + " s (" + e + "): ending");
        next = new Order(current.getSeq() + 1, Order.END, Map.of());
      }
      if (next.getSeq() == current.getSeq() && next.getKind().equals(current.getKind())) {
        continue;   // the poll's hold ran out with nothing new
      }
      if (!handOver(next)) {
        sleep(1000);   // told to the board; tried again with the order's next poll
        continue;
      }
      if (next.isEnd()) {
        report();
        return;
      }
    }
  }

  private boolean handOver(Order next) {
    final Order old = current;
    try {
      if (old.isStep()) {
        old.end();
        awaitLeft(old);
        logs.close(old, "esbperf: step " + old.getSeq() + " " + CLOSED + " " + old.entered + " thread(s) took part");
      }
      if (next.isStep()) {
        logs.open(next);
      }
    }
    catch (IOException e) {
      // The runner sees a worker that never adopts the order, and sets the step aside.
      state = "failed:" + next.getSeq() + ": " + e;
      log.accept("step " + next.getSeq() + ": its logs could not be opened or closed: " + e);
      return false;
    }
    synchronized (lock) {
      current = next;
      lock.notifyAll();
    }
    state = next.isEnd() ? "ended" : "adopted:" + next.getSeq();
    return true;
  }

  private void awaitLeft(Order old) {
    final long until = System.currentTimeMillis() + closeWaitMillis;
    synchronized (lock) {
      lock.notifyAll();   // idle threads waiting on the old order look again
      while (old.threads > 0) {
        final long left = until - System.currentTimeMillis();
        if (left <= 0 && !state.startsWith("stuck:")) {
          state = "stuck:" + old.getSeq() + ": " + old.threads + " thread(s) still in it";
          new Thread(this::report, "esbperf-steps-report").start();
        }
        try {
          lock.wait(left > 0 ? left : 1000);
        }
        catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  /** Tell the board the state now, without waiting for an order. */
  private void report() {
    try {
      poll(-1);
    }
    catch (IOException e) {
      // best effort: the board may be gone at the end
    }
  }

  private Order poll(long have) throws IOException {
    final Order order = current;
    final int begun;
    synchronized (lock) {
      begun = order.begun;
    }
    final String query = "key=" + enc(key) + "&worker=" + enc(worker) + "&state=" + enc(state) + "&have=" + have
        + "&begun=" + begun + "&takes=" + takes(order);
    final HttpURLConnection c = (HttpURLConnection) URI.create(url + "?" + query).toURL().openConnection();
    c.setConnectTimeout(5000);
    c.setReadTimeout(READ_TIMEOUT_MILLIS);
    try {
      final int status = c.getResponseCode();
      if (status == 409) {
        throw new Refused(read(c.getErrorStream()));
      }
      if (status != 200) {
        throw new IOException("the step board answered " + status);
      }
      final Properties p = new Properties();
      try (InputStream in = c.getInputStream()) {
        p.load(new InputStreamReader(in, StandardCharsets.ISO_8859_1));
      }
      final Map<String, String> properties = new LinkedHashMap<>();
      for (String name : p.stringPropertyNames()) {
        if (name.startsWith("esbperf.")) {
          properties.put(name, p.getProperty(name));
        }
      }
      return new Order(Long.parseLong(p.getProperty("seq", "0").trim()), p.getProperty("kind", Order.IDLE).trim(),
                       properties);
    }
    catch (NumberFormatException e) {
      throw new IOException("the step board's answer has no order number");
    }
    finally {
      c.disconnect();
    }
  }

  private static String read(InputStream in) throws IOException {
    if (in == null) {
      return "";
    }
    try (in) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    }
    catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The board refused the run's key: the run is over (or this worker belongs to an earlier one). */
  static final class Refused extends IOException {
    Refused(String message) {
      super(message);
    }
  }
}
