package esbperf.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;

import net.grinder.common.GrinderProperties;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkerPropertiesTest {

  @TempDir
  Path distribution;

  private String refusal(String name, String value) throws Exception {
    final GrinderProperties p = new GrinderProperties();
    p.setProperty(name, value);
    final ApiError e = assertThrows(ApiError.class, () -> new WorkerProperties(distribution.toFile()).check(p));
    assertEquals(400, e.status);
    assertTrue(e.getMessage().contains(name), e.getMessage());
    return e.getMessage();
  }

  @Test
  void theRunnersPropertiesPass() throws Exception {
    Files.writeString(distribution.resolve("scenario.py"), "");
    Files.createDirectories(distribution.resolve("user"));
    Files.writeString(distribution.resolve("user/thesis.py"), "");
    final GrinderProperties p = new GrinderProperties();
    p.setProperty("grinder.processes", "2");
    p.setProperty("grinder.threads", "51");
    p.setProperty("grinder.runs", "0");
    p.setProperty("grinder.duration", "360000");
    p.setProperty("grinder.logDirectory", "runs/run-1/camel/proxy/1KB/1/iter-1/1795000000000");
    p.setProperty("grinder.script", "user/thesis.py");
    p.setProperty("grinder.sleepTimeFactor", "0.5");
    p.setProperty("grinder.useNanoTime", "true");
    p.setProperty("esbperf.rate", "83.3333");
    p.setProperty("esbperf.scenario", "proxy");
    new WorkerProperties(distribution.toFile()).check(p);
  }

  @Test
  void whatWouldChooseTheProgramOrItsPlaceIsRefusedByName() throws Exception {
    refusal("grinder.jvm", "/bin/sh");
    refusal("grinder.jvm.arguments", "-XX:OnOutOfMemoryError=touch /tmp/x");
    refusal("grinder.jvm.classpath", "/tmp/evil.jar");
    refusal("grinder.hostID", "other");
    refusal("grinder.consoleHost", "198.18.9.9");
    refusal("grinder.debug.singleprocess", "true");
    refusal("grinder.anythingNew", "1");
    refusal("grinder.logDirectory", "/etc/cron.d");
    refusal("grinder.logDirectory", "../../elsewhere");
    refusal("grinder.script", "../outside.py");
    refusal("grinder.script", new File("/etc/passwd").getPath());
    refusal("grinder.script", "missing.py");
    refusal("grinder.threads", "-1");
    refusal("grinder.threads", "ten");
    refusal("grinder.useNanoTime", "yes");
  }
}
