package esbperf.monitor;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Everything sampled at one instant: the values of (metric, subject) pairs. The pairs are kept
 * apart from the values and shared by consecutive ticks while they do not change, so two hours
 * of samples cost about a double per value.
 */
record Tick(long timeMs, List<Key> keys, double[] values) {

  record Key(String metric, String subject) {
  }

  /** Collects one tick's values; {@link #build} reuses an equal key list seen before. */
  static final class Builder {
    private final List<Key> keys = new ArrayList<>();
    private double[] values = new double[64];

    void add(String metric, String subject, double value) {
      if (keys.size() == values.length) {
        values = Arrays.copyOf(values, values.length * 2);
      }
      values[keys.size()] = value;
      keys.add(new Key(metric, subject));
    }

    /** {@code known} interns key lists: ticks alternate between a few (with and without
     * process readings), and a new one appears only when an interface or process does. */
    Tick build(long timeMs, Map<List<Key>, List<Key>> known) {
      List<Key> shared = known.get(keys);
      if (shared == null) {
        if (known.size() > 64) {
          known.clear();
        }
        shared = List.copyOf(keys);
        known.put(shared, shared);
      }
      return new Tick(timeMs, shared, Arrays.copyOf(values, keys.size()));
    }
  }
}
