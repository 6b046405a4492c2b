package esbperf.client;

/**
 * A request's bytes (request line, headers, body), built once by {@link HttpClient#prepare}
 * and shared read-only by every thread that sends it.
 */
public final class PreparedRequest {

  final String baseUrl;
  final boolean keepAlive;
  final byte[] bytes;
  private final int bodyLength;

  PreparedRequest(String baseUrl, boolean keepAlive, byte[] bytes, int bodyLength) {
    this.baseUrl = baseUrl;
    this.keepAlive = keepAlive;
    this.bytes = bytes;
    this.bodyLength = bodyLength;
  }

  /** The server it was prepared for (http://host:port). */
  public String getBaseUrl() {
    return baseUrl;
  }

  public int getBodyLength() {
    return bodyLength;
  }

  /** Bytes on the wire: head and body. */
  public int getLength() {
    return bytes.length;
  }
}
