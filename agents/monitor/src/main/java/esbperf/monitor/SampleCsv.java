package esbperf.monitor;

/** The served CSV: rows {@code time_ms,metric,subject,value}; the runner adds the step's phase.
 * {@link Spool} stores values already formatted by {@link #number}. */
final class SampleCsv {

  static final String HEADER = "time_ms,metric,subject,value\n";

  private SampleCsv() {
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
