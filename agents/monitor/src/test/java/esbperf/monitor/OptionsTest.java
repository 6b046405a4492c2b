package esbperf.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;

class OptionsTest {

  @Test
  void parsesEveryOption() throws Exception {
    final Options o = Options.parse(new String[] {
        "--role", "esb", "--listen", "127.0.0.1:17092", "--pid", "42", "--pid", "43", "--match", "camel.Main",
        "--sampler", "oshi", "--state", "st", "--spool-max-bytes", "8192", "--spool-max-age-s", "60"});
    assertEquals("esb", o.role());
    assertEquals("127.0.0.1", o.listen().getAddress().getHostAddress());
    assertEquals(17092, o.listen().getPort());
    assertEquals(List.of(42L, 43L), o.pids());
    assertEquals(List.of("camel.Main"), o.matches());
    assertEquals("oshi", o.sampler());
    assertEquals(Path.of("st", "spool"), o.spool());
    assertEquals(8192, o.spoolMaxBytes());
    assertEquals(60_000, o.spoolMaxAgeMs());
  }

  @Test
  void defaultsToSigarAndASpoolInTheWorkingDirectory() throws Exception {
    final Options o = Options.parse(new String[] {"--listen", "127.0.0.1:17092"});
    assertEquals("sigar", o.sampler());
    assertEquals(Path.of("spool"), o.spool());
    assertEquals(Spool.DEFAULT_MAX_BYTES, o.spoolMaxBytes());
    assertEquals(Spool.DEFAULT_MAX_AGE_MS, o.spoolMaxAgeMs());
  }

  @Test
  void readsACpuList() throws Exception {
    assertEquals(List.of(), Options.parse(new String[] {"--listen", "127.0.0.1:1"}).cpus());
    assertEquals(List.of(0, 1, 2, 5), Options.parse(new String[] {"--listen", "127.0.0.1:1", "--cpus", "5,0-2,1"}).cpus());
    assertMessage("CPU list like 0-2,5", "--listen", "127.0.0.1:1", "--cpus", "2-1");
    assertMessage("CPU list like 0-2,5", "--listen", "127.0.0.1:1", "--cpus", "a");
    assertMessage("CPU list like 0-2,5", "--listen", "127.0.0.1:1", "--cpus", "1,,2");
  }

  @Test
  void acceptsIpv6Loopback() throws Exception {
    assertTrue(Options.parse(new String[] {"--listen", "[::1]:17092"}).listen().getAddress().isLoopbackAddress());
  }

  @Test
  void refusesTheWildcardAndNames() {
    final String anyIpv4 = String.join(".", "0", "0", "0", "0");   // the wildcard, spelled out
    assertMessage("not all interfaces", "--listen", anyIpv4 + ":17092");
    assertMessage("not all interfaces", "--listen", "[::]:17092");
    assertMessage("must be an IP address", "--listen", "localhost:17092");
  }

  @Test
  void refusesBadValues() {
    assertMessage("is required", "--role", "esb");
    assertMessage("must be 1-65535", "--listen", "127.0.0.1:0");
    assertMessage("must be a number", "--listen", "127.0.0.1:http");
    assertMessage("positive number", "--listen", "127.0.0.1:1", "--pid", "-3");
    assertMessage("non-empty", "--listen", "127.0.0.1:1", "--match", "  ");
    assertMessage("needs a value", "--listen");
    assertMessage("unknown option --interval", "--interval", "5");
    assertMessage("sigar or oshi", "--listen", "127.0.0.1:1", "--sampler", "proc");
    assertMessage("at least 2048", "--listen", "127.0.0.1:1", "--spool-max-bytes", "100");
    assertMessage("at least 1", "--listen", "127.0.0.1:1", "--spool-max-age-s", "1h");
  }

  private static void assertMessage(String expected, String... args) {
    final Options.UsageError e = assertThrows(Options.UsageError.class, () -> Options.parse(args));
    assertTrue(e.getMessage().contains(expected), e.getMessage());
  }
}
