package esbperf.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.junit.jupiter.api.Test;

/** The step board: the runner's orders, the workers' polls, the run's key and its lease. */
class StepBoardTest {

  private static final String KEY = "0123456789abcdef-run";
  private final AtomicLong now = new AtomicLong(1_000_000);
  private final StepBoard board = new StepBoard(new ObjectMapper(), now::get);

  private static byte[] json(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private void order(long seq, String kind, String properties) throws Exception {
    board.order(json("{\"key\":\"" + KEY + "\",\"seq\":" + seq + ",\"kind\":\"" + kind + "\",\"properties\":{"
                     + properties + "},\"lease_s\":60}"));
  }

  private Properties poll(long have, String state) throws Exception {
    final Properties p = new Properties();
    p.load(new StringReader(board.poll(Map.of("key", KEY, "worker", "w-0", "have", Long.toString(have),
                                              "state", state))));
    return p;
  }

  @Test
  void aWorkerGetsTheOrderAndItsStateIsKept() throws Exception {
    order(1, "step", "\"esbperf.scenario\":\"proxy\",\"esbperf.users\":3");
    final Properties p = poll(0, "ready");
    assertEquals("1", p.getProperty("seq"));
    assertEquals("step", p.getProperty("kind"));
    assertEquals("proxy", p.getProperty("esbperf.scenario"));
    assertEquals("3", p.getProperty("esbperf.users"));
    poll(-1, "adopted:1");
    @SuppressWarnings("unchecked")
    final Map<String, Map<String, Object>> workers = (Map<String, Map<String, Object>>)
        ((Map<String, Object>) board.status()).get("workers");
    assertEquals("adopted:1", workers.get("w-0").get("state"));
  }

  @Test
  void aPollWaitsForTheNextOrder() throws Exception {
    order(1, "idle", "");
    final long began = System.nanoTime();
    new Thread(() -> {
      try {
        Thread.sleep(200);
        order(2, "step", "\"esbperf.scenario\":\"raw\"");
      }
      catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }).start();
    final Properties p = poll(1, "adopted:1");
    assertEquals("2", p.getProperty("seq"));
    final long waited = (System.nanoTime() - began) / 1_000_000;
    assertTrue(waited >= 150 && waited < StepBoard.HOLD_MS, "waited " + waited + " ms");
  }

  @Test
  void ordersGoForwardAndCarryEsbperfSettingsOnly() throws Exception {
    order(5, "idle", "");
    assertEquals(409, assertThrows(ApiError.class, () -> order(5, "idle", "")).status);
    assertEquals(400, assertThrows(ApiError.class, () -> order(6, "step", "\"grinder.jvm\":\"/bin/sh\"")).status);
    assertEquals(400, assertThrows(ApiError.class, () -> order(6, "bogus", "")).status);
  }

  @Test
  void anOrderRefusedForItsNumberLeavesTheRunningRunsKey() throws Exception {
    order(3, "step", "");
    poll(-1, "adopted:3");
    for (String seq : new String[] {"0", "-1", "\"x\""}) {
      final ApiError e = assertThrows(ApiError.class, () -> board.order(json(
          "{\"key\":\"another-run-key-0000\",\"seq\":" + seq + ",\"kind\":\"idle\",\"lease_s\":60}")));
      assertEquals(400, e.status);
    }
    final Properties p = poll(3, "adopted:3");   // not told to end: its run still holds the board
    assertEquals("3", p.getProperty("seq"));
    assertEquals("step", p.getProperty("kind"));
  }

  @Test
  void aPollsThreadCountsAreKeptForTheRunner() throws Exception {
    order(1, "step", "");
    board.poll(Map.of("key", KEY, "worker", "w-0", "have", "-1", "state", "adopted:1", "begun", "3", "takes", "5"));
    board.poll(Map.of("key", KEY, "worker", "w-1", "have", "-1", "state", "adopted:1"));
    @SuppressWarnings("unchecked")
    final Map<String, Map<String, Object>> workers = (Map<String, Map<String, Object>>)
        ((Map<String, Object>) board.status()).get("workers");
    assertEquals(3L, workers.get("w-0").get("begun"));
    assertEquals(5L, workers.get("w-0").get("takes"));
    assertTrue(!workers.get("w-1").containsKey("begun"), "a worker that does not count its threads says nothing");
  }

  @Test
  void aWorkerOfAnotherRunIsToldToEnd() throws Exception {
    order(1, "idle", "");
    final ApiError e = assertThrows(ApiError.class, () -> board.poll(Map.of("key", "another-run-key-0000",
                                                                           "worker", "w-0", "have", "0")));
    assertEquals(409, e.status);
  }

  @Test
  void anOrderWhoseLeaseRanOutEndsTheRun() throws Exception {
    order(1, "step", "");
    now.addAndGet(61_000);
    assertEquals("end", poll(0, "adopted:1").getProperty("kind"));
    board.lease(json("{\"key\":\"" + KEY + "\",\"lease_s\":60}"));
    assertEquals("step", poll(0, "adopted:1").getProperty("kind"));
  }
}
