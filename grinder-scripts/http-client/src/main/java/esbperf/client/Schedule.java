package esbperf.client;

import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The open model's arrivals for one worker process: a schedule at {@code rate} starts per second
 * shared by all its threads. Uniform arrivals: ticket k is due at t0 + k / rate (t0: the first
 * ticket taken). Poisson arrivals: the gaps between due times are exponential with mean 1 / rate,
 * drawn from a seeded generator, so the same seed gives the same schedule. A thread takes the next
 * ticket, waits until it is due if it is still ahead, and sends at once if it is already past. A
 * pool too small for the rate therefore never slows the schedule down: its starts fall behind,
 * and the lag of each start (actual - due) is counted. Thread-safe.
 */
public final class Schedule {

  private static final long UNSET = Long.MIN_VALUE;

  private final double rate;
  private final double periodNanos;
  private final long lateNanos;
  private final SplittableRandom random;   // null: uniform arrivals
  private long[] poissonDue = new long[1024];   // ticket -> due offset (ns), as far as drawn
  private int poissonDrawn;
  private final AtomicLong origin = new AtomicLong(UNSET);
  private final AtomicLong tickets = new AtomicLong();
  private final LongAdder started = new LongAdder();
  private final LongAdder late = new LongAdder();
  private final AtomicLong maxLagNanos = new AtomicLong();
  private final AtomicLong lastStart = new AtomicLong(UNSET);
  private final AtomicInteger users = new AtomicInteger();
  private volatile boolean cancelled;

  /**
   * @param rate      starts per second for this process (more than 0)
   * @param lateMicros a start later than its due time by more than this counts as late
   */
  public Schedule(double rate, long lateMicros) {
    this(rate, lateMicros, false, 0);
  }

  /**
   * @param poisson exponential gaps (Poisson arrivals) instead of even ones
   * @param seed    the generator's seed (Poisson arrivals only)
   */
  public Schedule(double rate, long lateMicros, boolean poisson, long seed) {
    if (!(rate > 0) || Double.isInfinite(rate)) {
      throw new IllegalArgumentException("rate must be a positive number of starts per second, not " + rate);
    }
    this.rate = rate;
    this.periodNanos = 1e9 / rate;
    this.lateNanos = lateMicros * 1000;
    this.random = poisson ? new SplittableRandom(seed) : null;
  }

  public boolean isPoisson() {
    return random != null;
  }

  public double getRate() {
    return rate;
  }

  /** The next ticket's due time (System.nanoTime() scale). The first call starts the schedule. */
  public long take() {
    long t0 = origin.get();
    if (t0 == UNSET) {
      origin.compareAndSet(UNSET, System.nanoTime());
      t0 = origin.get();
    }
    return t0 + due(tickets.getAndIncrement());
  }

  /** Ticket {@code ticket}'s due time after t0. */
  private long due(long ticket) {
    if (random == null) {
      return (long) (ticket * periodNanos);
    }
    synchronized (this) {
      while (poissonDrawn <= ticket) {
        if (poissonDrawn == poissonDue.length) {
          poissonDue = Arrays.copyOf(poissonDue, poissonDue.length * 2);
        }
        // Exponential gap by inversion; the first ticket is due at t0.
        final long previous = poissonDrawn == 0 ? 0 : poissonDue[poissonDrawn - 1]
            + (long) (-Math.log(1.0 - random.nextDouble()) * periodNanos);
        poissonDue[poissonDrawn++] = previous;
      }
      return poissonDue[(int) ticket];
    }
  }

  /** Count a start at {@code startNanos}, {@code lagNanos} after its ticket was due. */
  public void started(long startNanos, long lagNanos) {
    lastStart.accumulateAndGet(startNanos, Math::max);
    started.increment();
    if (lagNanos > lateNanos) {
      late.increment();
    }
    maxLagNanos.accumulateAndGet(lagNanos, Math::max);
  }

  public long getStarted() {
    return started.sum();
  }

  public long getLate() {
    return late.sum();
  }

  public long getMaxLagMicros() {
    return maxLagNanos.get() / 1000;
  }

  /** Tickets due by {@code nowNanos} (0 before the first ticket). */
  public long getDue(long nowNanos) {
    final long t0 = origin.get();
    if (t0 == UNSET || nowNanos < t0) {
      return 0;
    }
    if (random == null) {
      return (long) Math.floor((nowNanos - t0) / periodNanos) + 1;
    }
    long ticket = 0;   // the first ticket due after now: draw as far as needed, then search
    while (due(ticket) <= nowNanos - t0) {
      ticket = ticket == 0 ? 1 : ticket * 2;
    }
    synchronized (this) {
      final int found = Arrays.binarySearch(poissonDue, 0, poissonDrawn, nowNanos - t0 + 1);
      return found >= 0 ? found : -found - 1;
    }
  }

  /**
   * The step this schedule serves is over (a warm worker's next order came): threads sleeping
   * until a ticket is due wake and send nothing more.
   */
  public void cancel() {
    cancelled = true;
  }

  public boolean isCancelled() {
    return cancelled;
  }

  /** A thread joins the pool that serves this schedule. */
  public void join() {
    users.incrementAndGet();
  }

  /** A thread leaves; true for the last one, which may then report. */
  public boolean leave() {
    return users.decrementAndGet() == 0;
  }

  /**
   * Starts that were due by the latest start but had not started by then: the schedule's
   * backlog when the pool stopped (0 or about 0 when it kept up).
   */
  public long getBehind() {
    final long last = lastStart.get();
    return last == UNSET ? 0 : Math.max(0, getDue(last) - getStarted());
  }

  /** One line for the worker's log: starts, late starts, largest lag, and the backlog at the end. */
  public String summary() {
    return String.format("open model: %d starts at %.1f/s (this process, %s arrivals); %d late by more than %d us, "
        + "largest lag %d us; %d due but not started by the last start", getStarted(), rate,
        random == null ? "uniform" : "Poisson", getLate(), lateNanos / 1000, getMaxLagMicros(), getBehind());
  }
}
