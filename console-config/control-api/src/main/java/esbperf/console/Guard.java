package esbperf.console;

import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Locale;

/**
 * Who may drive the control API: a request must name this API's own address in its Host header
 * (so a web page whose name was rebound to this address cannot), carry the console's secret token,
 * and, when it posts, post JSON (so a cross-site form or text/plain POST cannot). Only the runner,
 * which reads the token from the console's state folder, passes all three.
 */
final class Guard {

  private final byte[] token;
  private final InetAddress bound;
  private final int port;

  Guard(byte[] token, InetSocketAddress bound) {
    this.token = token.clone();
    this.bound = bound.getAddress();
    this.port = bound.getPort();
  }

  void check(String method, String host, String authorization, String contentType) throws ApiError {
    if (host == null || !isOwnAddress(host)) {
      throw new ApiError(403, "the Host header " + (host == null ? "is missing" : "'" + host + "' does not name")
          + " this control API's address (" + hostPort() + ")");
    }
    final byte[] given = authorization != null && authorization.startsWith("Bearer ")
        ? authorization.substring("Bearer ".length()).trim().getBytes(StandardCharsets.UTF_8) : new byte[0];
    if (!MessageDigest.isEqual(given, token)) {   // constant time
      throw new ApiError(401, "a valid token is needed (Authorization: Bearer <the token in the console's "
          + "control-api.token file>)");
    }
    if ("POST".equals(method) && !isJson(contentType)) {
      throw new ApiError(415, "POST bodies must be application/json, got " + (contentType == null ? "none" : contentType));
    }
  }

  private String hostPort() {
    final String address = bound.getHostAddress();
    return (bound instanceof Inet6Address ? "[" + address + "]" : address) + ":" + port;
  }

  /** An IP literal equal to the listening address (any IP literal when it listens on all), or
   * `localhost` when it listens on loopback; with this API's port. Names other than localhost
   * never pass: DNS rebinding needs a name. */
  boolean isOwnAddress(String header) {
    final String value = header.trim().toLowerCase(Locale.ROOT);
    final int colon = value.lastIndexOf(':');
    if (colon < 0 || value.endsWith("]")) {
      return false;   // no port: browsers send one for a non-default port, and ours is never 80
    }
    if (!value.substring(colon + 1).equals(Integer.toString(port))) {
      return false;
    }
    String name = value.substring(0, colon);
    if (name.equals("localhost")) {
      return bound.isLoopbackAddress();
    }
    if (name.startsWith("[") && name.endsWith("]")) {
      name = name.substring(1, name.length() - 1);
    }
    else if (name.contains(":")) {
      return false;   // an IPv6 literal must be bracketed
    }
    if (!name.matches("[0-9a-f.:]+")) {
      return false;   // not an IP literal: never resolve names here
    }
    try {
      final InetAddress given = InetAddress.getByName(name);
      return bound.isAnyLocalAddress() || given.equals(bound)
          || bound.isLoopbackAddress() && given.isLoopbackAddress();
    }
    catch (UnknownHostException e) {
      return false;
    }
  }

  private static boolean isJson(String contentType) {
    if (contentType == null) {
      return false;
    }
    final String type = contentType.split(";", 2)[0].trim().toLowerCase(Locale.ROOT);
    return type.equals("application/json");
  }
}
