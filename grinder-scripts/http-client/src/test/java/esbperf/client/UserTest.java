package esbperf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;

import org.junit.jupiter.api.Test;

/** A worker thread's transactions and the open model's schedule, against the canned server. */
class UserTest {

  private static final byte[] BODY = "<m:buyStocks/>".getBytes();

  private static Requests requests(String url) {
    final Requests r = new Requests(true);
    r.add(url, "/raw", "text/xml", new String[] {"SOAPAction", "\"buyStocks\""}, BODY,
          new Expected("ws1", BODY, null));
    r.add(url, "/raw", "text/xml", null, "other".getBytes(), new Expected("ws1", "other".getBytes(), null));
    return r;
  }

  private static CannedServer echoOfBody() throws Exception {
    return CannedServer.start(CannedServer.answer(new String[] {"X-Echo-Backend", "ws1"}, BODY));
  }

  @Test
  void closedModelCyclesThroughTheRequestsAndChecksFast() throws Exception {
    try (CannedServer server = echoOfBody()) {
      final User user = new User(requests(server.getUrl()), 5000, null, null);
      for (int i = 0; i < 6; i++) {
        user.awaitTurn();
        user.exchange();
        // Request 0's answer is its echo; request 1 gets the same canned answer, which is wrong for it.
        assertEquals(i % 2 == 0 ? User.RIGHT : User.CHECK, user.finish());
        assertEquals(i % 2, user.getIndex());
        assertNotNull(user.getAnswer());
        assertTrue(user.getMicros() >= 0 && user.getMicros() < 1_000_000);
      }
      assertEquals(false, user.close());
      assertEquals(6, server.getServed());
    }
  }

  @Test
  void anAnswerTheCheckAcceptedIsRightInJavaForEveryThreadOfTheProcess() throws Exception {
    // An ESB's own JSON: no fixed expectation can foresee it.
    final byte[] json = "{\"WSResponse\":\"1 hello [echoed by ws1]\"}".getBytes();
    try (CannedServer server = CannedServer.start(CannedServer.answer(new String[] {"X-Echo-Backend", "ws1"}, json))) {
      final Requests r = new Requests(true);
      r.add(server.getUrl(), "/transform/json", "application/json", null, "{\"id\": 1}".getBytes(), null);
      final User first = new User(r, 5000, null, null);
      final User second = new User(r, 5000, null, null);
      first.exchange();
      assertEquals(User.CHECK, first.finish(), "not known until the scenario's check accepted it");
      assertTrue(first.learn());
      first.exchange();
      assertEquals(User.RIGHT, first.finish());
      second.exchange();
      assertEquals(User.RIGHT, second.finish(), "learned by one thread, known to all");
      assertFalse(second.learn(), "known already");
      first.close();
      second.close();
    }
  }

  @Test
  void theThreadsCpuTimePerTransactionIsCountedFromItsMark() throws Exception {
    try (CannedServer server = echoOfBody()) {
      final User counted = new User(requests(server.getUrl()), 5000, null, null);
      final User notYet = new User(requests(server.getUrl()), 5000, null, null);
      notYet.countCpuAfter(60_000);
      for (int i = 0; i < 200; i++) {
        for (User user : new User[] {counted, notYet}) {
          user.exchange();
          user.finish();
        }
      }
      counted.close();
      notYet.close();
      assertEquals(200, counted.getTransactions());
      // The first transaction marks the start; the 199 after it are counted. A loopback
      // exchange costs this thread some µs of CPU, far less than a second.
      final double micros = counted.getCpuMicrosPerTransaction();
      assertTrue(micros > 0 && micros < 100_000, micros + " us");
      assertTrue(counted.getCpuSummary().endsWith("over 199 transactions)"), counted.getCpuSummary());
      assertEquals(-1, notYet.getCpuMicrosPerTransaction());
      assertEquals("client CPU: not measured (no transaction counted)", notYet.getCpuSummary());
    }
  }

  @Test
  void noAnswerIsKeptNotThrown() throws Exception {
    final int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    final User user = new User(requests("http://127.0.0.1:" + port), 2000, null, null);
    user.exchange();
    assertEquals(User.NO_ANSWER, user.finish());
    assertNull(user.getAnswer());
    assertTrue(user.getFailure().startsWith("ConnectException"), user.getFailure());
  }

  @Test
  void openModelKeepsTheRateAndCountsNoLagWhenThePoolKeepsUp() throws Exception {
    try (CannedServer server = echoOfBody()) {
      final Schedule schedule = new Schedule(500, 5000);
      final User user = new User(requests(server.getUrl()), 5000, schedule, null);
      final long start = System.nanoTime();
      for (int i = 0; i < 100; i++) {
        user.awaitTurn();
        user.exchange();
        user.finish();
        assertTrue(user.getLatencyMicros() >= user.getMicros());
      }
      final double seconds = (System.nanoTime() - start) / 1e9;
      // 100 starts at 500/s: the last is due 0.198 s after the first.
      assertTrue(seconds > 0.19 && seconds < 0.4, "took " + seconds + " s");
      assertEquals(100, schedule.getStarted());
      assertTrue(schedule.getMaxLagMicros() < 50_000, "lag " + schedule.getMaxLagMicros());
      assertTrue(schedule.getBehind() <= 1, "behind " + schedule.getBehind());
      assertTrue(user.close(), "the only thread of the pool is its last");
    }
  }

  @Test
  void aPoolTooSmallFallsBehindAndTheLagShowsIt() throws Exception {
    // One thread, a server that takes 10 ms, 400 starts/s asked: at most ~100/s happen.
    final Schedule schedule = new Schedule(400, 1000);
    final String url = SlowServer.start(10);
    final Requests r = new Requests(true);
    r.add(url, "/x", "text/plain", null, "a".getBytes(), null);
    final User user = new User(r, 5000, schedule, null);
    long lastLag = 0;
    for (int i = 0; i < 20; i++) {
      user.awaitTurn();
      user.exchange();
      assertEquals(User.CHECK, user.finish());
      lastLag = user.getLatencyMicros() - user.getMicros();
    }
    // The 20th start was due 19 × 2.5 ms after the first but happened ≥ 19 × 10 ms after it.
    assertTrue(lastLag > 19 * 7_000, "lag of the last start " + lastLag + " µs");
    assertEquals(schedule.getMaxLagMicros() >= lastLag - 1, true);
    assertTrue(schedule.getLate() >= 18, "late starts " + schedule.getLate());
    assertTrue(schedule.getDue(System.nanoTime()) > 60, "due " + schedule.getDue(System.nanoTime()));
    // At the last start, ~19 × (10 - 2.5) ms behind: about 57 starts were due and not started.
    assertTrue(schedule.getBehind() > 40, "behind " + schedule.getBehind());
    assertTrue(schedule.summary().contains("20 starts at 400.0/s"), schedule.summary());
    user.close();
  }

  @Test
  void ticketsAreDueOneOverTheRateApart() {
    final Schedule schedule = new Schedule(1000, 1000);
    final long first = schedule.take();
    final long second = schedule.take();
    final long third = schedule.take();
    assertEquals(1_000_000, second - first);
    assertEquals(2_000_000, third - first);
    assertEquals(1, schedule.getDue(first));
    assertEquals(3, schedule.getDue(first + 2_000_000));
  }
}
