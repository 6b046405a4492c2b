package esbperf.client;

import java.util.Arrays;
import java.util.Objects;

/**
 * One request's answers that its scenario's own check (contract.py) has accepted, so that the
 * same answer again is right at the cost of a byte comparison in Java: the fast check of the
 * answers an ESB re-serialises (its JSON, its XML declaration and prefixes), which no fixed
 * {@link Expected} can foresee. An ESB answers the same request with the same bytes.
 *
 * <p>Sufficient by construction: a known answer is kept as its status, its X-Echo-Backend header
 * and its body, exactly the parts of an answer the checks read, and a check decides the same for
 * the same parts (tests/test_timing.py proves both for every scenario). So an answer equal to a
 * known one in all three passes the check that accepted that one.
 *
 * <p>Shared by the threads of a worker process, like the request itself: lookups read an
 * immutable array without locking, learning replaces it under the lock. At most {@link #VARIANTS}
 * answers are kept; an ESB whose every answer differs keeps missing this check, and the worker
 * log's count of right answers judged in Jython shows it (grinder-scripts/scenario.py).
 */
public final class KnownAnswers {

  /** Distinct answers kept per request: enough for an ESB with a few ways of answering. */
  public static final int VARIANTS = 4;

  private volatile Known[] known = new Known[0];

  /** The answer equals a known right one in status, X-Echo-Backend header and body. */
  public boolean contain(Response answer) {
    for (Known k : known) {
      if (k.matches(answer)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Keep an answer that the scenario's check has just accepted. False when it was known already
   * or {@link #VARIANTS} are kept (then it is not kept).
   */
  public synchronized boolean learn(Response answer) {
    final Known[] now = known;
    if (now.length == VARIANTS || contain(answer)) {
      return false;
    }
    final Known[] more = Arrays.copyOf(now, now.length + 1);
    more[now.length] = new Known(answer.getStatus(), answer.header(Response.ECHO_BACKEND), answer.getBody());
    known = more;
    return true;
  }

  /** How many answers are kept. */
  public int size() {
    return known.length;
  }

  private static final class Known {
    final int status;
    final String backend;   // null: the answer had no such header
    final byte[] body;      // the answer's own array: the client never reuses it

    Known(int status, String backend, byte[] body) {
      this.status = status;
      this.backend = backend;
      this.body = body;
    }

    boolean matches(Response answer) {
      // The header last: its lookup is the only part that allocates.
      return answer.getStatus() == status && answer.bodyEquals(body)
          && Objects.equals(backend, answer.header(Response.ECHO_BACKEND));
    }
  }
}
