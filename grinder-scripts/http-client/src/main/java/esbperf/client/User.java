package esbperf.client;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

import net.grinder.common.GrinderException;
import net.grinder.script.Statistics;
import net.grinder.script.Statistics.StatisticsForTest;

/**
 * One Grinder worker thread's transactions, everything per transaction done in Java so that
 * the script's Jython does three calls per transaction and nothing else when the answer is right:
 * <ol>
 *   <li>{@link #awaitTurn()}: in the open model, take the next ticket of the process's
 *       {@link Schedule} and sleep until it is due (nothing in the closed model);</li>
 *   <li>{@link #exchange()}: the Grinder test (the script records a function calling it): send
 *       the next request's prepared bytes and read the answer, timed by the client; never
 *       throws, a failure is kept;</li>
 *   <li>{@link #finish()}: the data-log columns of the last test, and the fast answer check.</li>
 * </ol>
 * An answer the fast check does not accept goes to the scenario's own check; when that accepts
 * it, {@link #learn()} makes the same answer right in Java from then on, for every thread.
 *
 * <p>It also measures what the client costs: the thread's own CPU time per transaction, from the
 * first transaction that ends after {@link #countCpuAfter} (JIT warm-up left out) to
 * {@link #close()} — Java, Jython and Grinder's bookkeeping alike ({@link #getCpuSummary()}).
 * Not thread-safe: one instance per worker thread.
 */
public final class User {

  /** {@link #finish()}: the answer met its fast check, fixed or learned (a right answer). */
  public static final int RIGHT = 0;
  /** {@link #finish()}: the scenario's own check must judge the answer. */
  public static final int CHECK = 1;
  /** {@link #finish()}: no answer (refused, reset, timed out, malformed); already marked failed. */
  public static final int NO_ANSWER = 2;

  // The data-log columns scenario.py registers (Grinder 3.11 has userLong0..4).
  static final String STATUS = "userLong0";
  static final String REQUEST_BYTES = "userLong1";
  static final String RESPONSE_BYTES = "userLong2";
  static final String RESPONSE_US = "userLong3";
  static final String LATENCY_US = "userLong4";

  private static final long MAX_PARK_NANOS = 50_000_000;
  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
  private static final boolean CPU_CLOCK = THREADS.isThreadCpuTimeSupported() && THREADS.isThreadCpuTimeEnabled();

  private final Requests requests;
  private final HttpClient[] clients;   // per request; requests to one server share a client
  private final Schedule schedule;      // null: closed model
  private final Statistics statistics;  // grinder.statistics; null outside Grinder (unit tests)
  private int next;
  private int index;
  private long due;
  private Response answer;
  private IOException failure;
  private long failedAt;
  private long micros;
  private long latencyMicros;
  private boolean closed;
  private long transactions;
  private long cpuFrom = System.nanoTime();   // transactions ending from then on are counted
  private long cpuThreadId = -1;              // the worker thread, once the count has begun
  private long cpuAtStart;                    // its CPU time (ns) then
  private long cpuTransactions;               // transactions ended after that
  private long cpuNanos = -1;                 // its CPU time from cpuAtStart to close()

  /**
   * @param schedule   the process's open-model schedule, or null for the closed model
   * @param statistics grinder.statistics, or null to set no data-log column
   */
  public User(Requests requests, int timeoutMs, Schedule schedule, Statistics statistics) {
    if (requests.size() == 0) {
      throw new IllegalArgumentException("no requests");
    }
    this.requests = requests;
    this.schedule = schedule;
    this.statistics = statistics;
    this.clients = new HttpClient[requests.size()];
    final Map<String, HttpClient> byServer = new HashMap<>();
    for (int i = 0; i < clients.length; i++) {
      clients[i] = byServer.computeIfAbsent(requests.get(i).getBaseUrl(),
          url -> new HttpClient(url, timeoutMs, requests.isKeepAlive()));
    }
    if (schedule != null) {
      schedule.join();
    }
  }

  /**
   * Open model: sleep until the next ticket is due (at once if it is past); false when the
   * schedule was cancelled meanwhile (its step is over: send nothing). Closed: true at once.
   */
  public boolean awaitTurn() {
    if (schedule == null) {
      return true;
    }
    if (schedule.isCancelled()) {
      return false;
    }
    due = schedule.take();
    long wait;
    while ((wait = due - System.nanoTime()) > 0) {
      // Parked in slices, so that a cancelled schedule wakes its sleepers within one.
      LockSupport.parkNanos(Math.min(wait, MAX_PARK_NANOS));
      if (Thread.currentThread().isInterrupted()) {
        return true;   // the worker is stopping
      }
      if (schedule.isCancelled()) {
        return false;
      }
    }
    return true;
  }

  /** Send the next request and read its answer (the timed exchange). Never throws. */
  public void exchange() {
    index = next;
    next = next + 1 == clients.length ? 0 : next + 1;
    answer = null;
    failure = null;
    try {
      answer = clients[index].send(requests.get(index));
    }
    catch (IOException e) {
      failedAt = System.nanoTime();
      failure = e;
    }
  }

  /**
   * Fill the last test's data-log columns (and mark it failed when there was no answer), then
   * test the answer against its fast check: its request's {@link Expected}, then the answers
   * learned right for it. {@link #RIGHT}, {@link #CHECK} or {@link #NO_ANSWER}.
   */
  public int finish() throws GrinderException {
    final long start = answer != null ? answer.getStartNanos() : clients[index].getLastStartNanos();
    final long end = answer != null ? answer.getEndNanos() : failedAt;
    micros = (end - start) / 1000;
    transactions++;
    if (end - cpuFrom >= 0) {
      if (cpuThreadId >= 0) {
        cpuTransactions++;
      }
      else if (CPU_CLOCK) {
        cpuThreadId = Thread.currentThread().getId();
        cpuAtStart = THREADS.getCurrentThreadCpuTime();
      }
    }
    if (schedule != null) {
      latencyMicros = (end - due) / 1000;
      schedule.started(start, start - due);
    }
    if (statistics != null) {
      final StatisticsForTest last = statistics.getForLastTest();
      last.setLong(REQUEST_BYTES, requests.get(index).getBodyLength());
      last.setLong(RESPONSE_US, micros);
      if (schedule != null) {
        last.setLong(LATENCY_US, latencyMicros);
      }
      if (answer != null) {
        last.setLong(STATUS, answer.getStatus());
        last.setLong(RESPONSE_BYTES, answer.getLength());
      }
      else {
        last.setSuccess(false);
      }
    }
    if (answer == null) {
      return NO_ANSWER;
    }
    final Expected expected = requests.expected(index);
    if (expected != null && expected.isMetBy(answer)) {
      return RIGHT;
    }
    return requests.known(index).contain(answer) ? RIGHT : CHECK;
  }

  /**
   * The scenario's own check accepted the last answer: keep it as a right answer of its request,
   * for every thread of the process. False when it is not kept (known already, or its request
   * has {@link KnownAnswers#VARIANTS} kept).
   */
  public boolean learn() {
    return answer != null && requests.known(index).learn(answer);
  }

  /** Transactions finished so far. */
  public long getTransactions() {
    return transactions;
  }

  /**
   * Count the thread's CPU time from the first transaction that ends {@code millis} from now on
   * (default: from its first transaction).
   */
  public void countCpuAfter(long millis) {
    cpuFrom = System.nanoTime() + millis * 1_000_000;
  }

  /** The thread's CPU time per transaction in µs, from the count's start to {@link #close()}; -1 if none. */
  public double getCpuMicrosPerTransaction() {
    return cpuNanos < 0 || cpuTransactions == 0 ? -1 : cpuNanos / 1000.0 / cpuTransactions;
  }

  /** One line for the worker log about {@link #getCpuMicrosPerTransaction()}, after {@link #close()}. */
  public String getCpuSummary() {
    if (getCpuMicrosPerTransaction() < 0) {
      return "client CPU: not measured (" + (CPU_CLOCK ? "no transaction counted" : "no thread CPU clock") + ")";
    }
    return String.format(java.util.Locale.ROOT,
        "client CPU: %.1f us per transaction (this thread's CPU time over %d transactions)",
        getCpuMicrosPerTransaction(), cpuTransactions);
  }

  /** Index of the last transaction's request (in the order of {@link Requests#add}). */
  public int getIndex() {
    return index;
  }

  /** The last answer, or null when there was none. */
  public Response getAnswer() {
    return answer;
  }

  /** Why the last exchange had no answer, or null. */
  public String getFailure() {
    return failure == null ? null : failure.getClass().getSimpleName() + ": " + failure.getMessage();
  }

  /** The last exchange's time in µs (until the failure when there was no answer). */
  public long getMicros() {
    return micros;
  }

  /** Open model: the last answer's end minus its ticket's due time, in µs. */
  public long getLatencyMicros() {
    return latencyMicros;
  }

  /** Close the connections; true when this was the last thread of an open-model pool. */
  public boolean close() {
    if (closed) {
      return false;
    }
    closed = true;
    if (cpuThreadId >= 0) {
      final long now = THREADS.getThreadCpuTime(cpuThreadId);   // -1 if the thread has ended
      cpuNanos = now < 0 ? -1 : now - cpuAtStart;
    }
    for (HttpClient c : clients) {
      c.close();
    }
    return schedule != null && schedule.leave();
  }
}
