package esbperf.monitor;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The last {@code capacity} ticks, oldest first. Bounded by count rather than by time so that
 * a clock step on the host can neither grow it nor empty it. Written by the sampling thread,
 * read by the HTTP threads.
 */
final class SampleRing {

  private final int capacity;
  private final ArrayDeque<Tick> ticks;

  SampleRing(int capacity) {
    this.capacity = capacity;
    this.ticks = new ArrayDeque<>(capacity);
  }

  synchronized void add(Tick tick) {
    if (ticks.size() == capacity) {
      ticks.removeFirst();
    }
    ticks.addLast(tick);
  }

  synchronized Tick newest() {
    return ticks.peekLast();
  }

  synchronized Tick oldest() {
    return ticks.peekFirst();
  }

  synchronized int size() {
    return ticks.size();
  }

  /** The ticks with {@code fromMs <= time < toMs}, in the order they were taken. */
  synchronized List<Tick> between(long fromMs, long toMs) {
    final List<Tick> selected = new ArrayList<>();
    for (Tick t : ticks) {
      if (t.timeMs() >= fromMs && t.timeMs() < toMs) {
        selected.add(t);
      }
    }
    return selected;
  }
}
