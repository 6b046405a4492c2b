package esbperf.client;

/**
 * A sufficient condition for a right answer, cheap enough to test on every transaction without
 * decoding the answer: HTTP 200, the X-Echo-Backend header equal to {@code backend} (unless
 * null), and the body equal to {@code body} (unless null) and holding {@code part} (unless
 * null). An answer that meets it is right; one that does not goes to the scenario's own check
 * (contract.py), which decides and says why. Built from contract.Expected; what a request's
 * answer cannot be foreseen as (an ESB's own serialisation) is learned instead ({@link KnownAnswers}).
 */
public final class Expected {

  private final String backend;
  private final byte[] body;
  private final byte[] part;

  public Expected(String backend, byte[] body, byte[] part) {
    this.backend = backend;
    this.body = body;
    this.part = part;
  }

  public boolean isMetBy(Response answer) {
    return answer.getStatus() == 200
        && (body == null || answer.bodyEquals(body))
        && (part == null || answer.bodyContains(part))
        && (backend == null || backend.equals(answer.header(Response.ECHO_BACKEND)));
  }
}
