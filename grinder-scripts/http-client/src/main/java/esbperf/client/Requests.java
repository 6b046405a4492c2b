package esbperf.client;

import java.util.ArrayList;
import java.util.List;

/**
 * The requests a worker process cycles through, prepared once and shared read-only by its
 * threads (a 1 MB payload is held once per process, not once per thread), each with the fast
 * checks of its answer: a fixed {@link Expected} (null: none can be foreseen) and the answers
 * learned right ({@link KnownAnswers}, filled as the scenario's own check accepts them).
 */
public final class Requests {

  private final boolean keepAlive;
  private final List<PreparedRequest> prepared = new ArrayList<>();
  private final List<Expected> expected = new ArrayList<>();
  private final List<KnownAnswers> known = new ArrayList<>();

  public Requests(boolean keepAlive) {
    this.keepAlive = keepAlive;
  }

  public void add(String baseUrl, String path, String contentType, String[] headers, byte[] body,
                  Expected expectation) {
    prepared.add(HttpClient.prepare(baseUrl, keepAlive, path, contentType, headers, body));
    expected.add(expectation);
    known.add(new KnownAnswers());
  }

  public boolean isKeepAlive() {
    return keepAlive;
  }

  public int size() {
    return prepared.size();
  }

  PreparedRequest get(int i) {
    return prepared.get(i);
  }

  Expected expected(int i) {
    return expected.get(i);
  }

  KnownAnswers known(int i) {
    return known.get(i);
  }
}
