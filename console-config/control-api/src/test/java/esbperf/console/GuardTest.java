package esbperf.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

class GuardTest {

  private static final byte[] TOKEN = "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.UTF_8);

  private static Guard on(String address, int port) throws Exception {
    return new Guard(TOKEN, new InetSocketAddress(InetAddress.getByName(address), port));
  }

  @Test
  void loopbackAcceptsItsOwnLiteralsAndLocalhostOnly() throws Exception {
    final Guard guard = on("127.0.0.1", 6373);
    assertTrue(guard.isOwnAddress("127.0.0.1:6373"));
    assertTrue(guard.isOwnAddress("localhost:6373"));
    assertTrue(guard.isOwnAddress("[::1]:6373"));
    assertFalse(guard.isOwnAddress("127.0.0.1:6374"), "another port");
    assertFalse(guard.isOwnAddress("attacker.example:6373"), "a name rebound to 127.0.0.1");
    assertFalse(guard.isOwnAddress("127.0.0.1"), "no port");
    assertFalse(guard.isOwnAddress("198.18.0.10:6373"), "another address");
  }

  @Test
  void aTestbedAddressAcceptsOnlyItself() throws Exception {
    final Guard guard = on("198.18.0.10", 6373);
    assertTrue(guard.isOwnAddress("198.18.0.10:6373"));
    assertFalse(guard.isOwnAddress("localhost:6373"));
    assertFalse(guard.isOwnAddress("127.0.0.1:6373"));
    assertFalse(guard.isOwnAddress("console.lab:6373"));
  }

  @Test
  void theTokenAndJsonAreNeeded() throws Exception {
    final Guard guard = on("127.0.0.1", 6373);
    final String bearer = "Bearer " + new String(TOKEN, StandardCharsets.UTF_8);
    guard.check("POST", "127.0.0.1:6373", bearer, "application/json; charset=UTF-8");
    guard.check("GET", "localhost:6373", bearer, null);
    assertEquals(403, assertThrows(ApiError.class, () -> guard.check("GET", "evil:6373", bearer, null)).status);
    assertEquals(403, assertThrows(ApiError.class, () -> guard.check("GET", null, bearer, null)).status);
    assertEquals(401, assertThrows(ApiError.class, () -> guard.check("GET", "127.0.0.1:6373", null, null)).status);
    assertEquals(401, assertThrows(ApiError.class,
        () -> guard.check("GET", "127.0.0.1:6373", bearer + "x", null)).status);
    assertEquals(415, assertThrows(ApiError.class,
        () -> guard.check("POST", "127.0.0.1:6373", bearer, "text/plain")).status);
    assertEquals(415, assertThrows(ApiError.class,
        () -> guard.check("POST", "127.0.0.1:6373", bearer, null)).status);
  }
}
