package esbperf.client;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * One order of the step board as a worker process holds it ({@link Steps}): a step (what its
 * threads send, and which of them take part), idle (none does), or the end of the run. Its
 * threads enter it before their first transaction and leave it after their last; once it is
 * over (a newer order came), no thread may enter, and the hooks registered with
 * {@link #whenOver} run (an open-model schedule wakes its sleepers with them).
 */
public final class Order {

  public static final String STEP = "step";
  public static final String IDLE = "idle";
  public static final String END = "end";

  private final long seq;
  private final String kind;
  private final Map<String, String> properties;
  private final List<Runnable> overHooks = new ArrayList<>();
  private volatile boolean over;
  int threads;          // guarded by the Steps lock
  int entered;          // threads that took part, for the step's closing line
  int begun;            // threads that began their part (Steps#begun)
  Object shared;        // what the script builds once per step for all its threads

  public Order(long seq, String kind, Map<String, String> properties) {
    this.seq = seq;
    this.kind = kind;
    this.properties = Collections.unmodifiableMap(properties);
  }

  public long getSeq() {
    return seq;
  }

  public String getKind() {
    return kind;
  }

  public boolean isStep() {
    return STEP.equals(kind);
  }

  public boolean isEnd() {
    return END.equals(kind);
  }

  /** A newer order came: no thread may enter this one any more. */
  public boolean isOver() {
    return over;
  }

  public String get(String name, String otherwise) {
    final String value = properties.get(name);
    return value == null ? otherwise : value;
  }

  public int getInt(String name, int otherwise) {
    final String value = properties.get(name);
    try {
      return value == null ? otherwise : Integer.parseInt(value.trim());
    }
    catch (NumberFormatException e) {
      return otherwise;
    }
  }

  public Map<String, String> getProperties() {
    return properties;
  }

  /**
   * Whether the thread {@code thread} of process {@code process} (from the first) of agent
   * {@code agent} takes part: the step lays its users out as a fresh start would,
   * {@code esbperf.step.processes} processes of {@code esbperf.step.threads} threads per agent,
   * and counts threads in that order up to {@code esbperf.users} (0: every thread of the layout).
   */
  public boolean takes(int agent, int process, int thread) {
    if (!isStep()) {
      return false;
    }
    final int processes = getInt("esbperf.step.processes", 1);
    final int perProcess = getInt("esbperf.step.threads", 1);
    if (process >= processes || thread >= perProcess) {
      return false;
    }
    final int users = getInt("esbperf.users", 0);
    final long index = ((long) Math.max(agent, 0) * processes + process) * perProcess + thread;
    return users <= 0 || index < users;
  }

  /** What the script shares between the step's threads (built by the first that enters). */
  public synchronized Object getShared() {
    return shared;
  }

  public synchronized void setShared(Object value) {
    shared = value;
  }

  /** Run {@code hook} once the order is over (at once if it is). */
  public void whenOver(Runnable hook) {
    synchronized (overHooks) {
      if (!over) {
        overHooks.add(hook);
        return;
      }
    }
    hook.run();
  }

  /** Wake the schedule's sleepers once the order is over (Schedule#cancel). */
  public void cancelWhenOver(Schedule schedule) {
    whenOver(schedule::cancel);
  }

  void end() {
    final List<Runnable> hooks;
    synchronized (overHooks) {
      if (over) {
        return;
      }
      over = true;
      hooks = new ArrayList<>(overHooks);
    }
    hooks.forEach(Runnable::run);
  }

  @Override
  public String toString() {
    return kind + " " + seq;
  }
}
