package esbperf.monitor;

import java.io.IOException;
import java.io.Writer;
import java.util.List;

/** Ticks as CSV rows {@code time_ms,metric,subject,value}; the runner adds the step's phase. */
final class SampleCsv {

  static final String HEADER = "time_ms,metric,subject,value\n";

  private SampleCsv() {
  }

  static void write(List<Tick> ticks, Writer out) throws IOException {
    out.write(HEADER);
    final StringBuilder line = new StringBuilder(96);
    for (Tick tick : ticks) {
      final String time = Long.toString(tick.timeMs());
      for (int i = 0; i < tick.values().length; i++) {
        final Tick.Key key = tick.keys().get(i);
        line.setLength(0);
        line.append(time).append(',').append(key.metric()).append(',');
        field(key.subject(), line);
        line.append(',');
        number(tick.values()[i], line);
        out.append(line).append('\n');
      }
    }
  }

  /** Counters print as integers, percentages with two decimals. */
  static void number(double value, StringBuilder out) {
    if (value == Math.rint(value) && Math.abs(value) < 1e15) {
      out.append((long) value);
    }
    else {
      out.append(Math.round(value * 100.0) / 100.0);
    }
  }

  /** A subject is an interface name, a core number or a --match text, which may hold anything. */
  static void field(String text, StringBuilder out) {
    if (text.indexOf(',') < 0 && text.indexOf('"') < 0 && text.indexOf('\n') < 0 && text.indexOf('\r') < 0) {
      out.append(text);
    }
    else {
      out.append('"').append(text.replace("\"", "\"\"")).append('"');
    }
  }
}
