package esbperf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import com.sun.net.httpserver.HttpServer;

import org.junit.jupiter.api.Test;

/** A warm worker's side of the step board: orders handed to its threads, steps closed before the next opens. */
class StepsTest {

  /** A step board that answers the order it was last given, and keeps each poll's state. */
  static final class Board implements AutoCloseable {
    final HttpServer server;
    volatile String answer = "seq=1\nkind=idle\n";
    volatile int status = 200;
    final List<String> states = Collections.synchronizedList(new ArrayList<>());
    final List<String> queries = Collections.synchronizedList(new ArrayList<>());

    /** Whether a poll so far matched: read under the list's lock, as the board's thread adds to it meanwhile. */
    boolean asked(java.util.function.Predicate<String> query) {
      synchronized (queries) {
        return queries.stream().anyMatch(query);
      }
    }

    Board() throws IOException {
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
      server.createContext("/order", exchange -> {
        final String query = exchange.getRequestURI().getQuery();
        queries.add(query);
        for (String pair : query.split("&")) {
          if (pair.startsWith("state=")) {
            states.add(java.net.URLDecoder.decode(pair.substring(6), StandardCharsets.UTF_8));
          }
        }
        try {
          Thread.sleep(5);   // a real board holds a poll until the next order; never busy-loop here
        }
        catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        final byte[] body = answer.getBytes(StandardCharsets.ISO_8859_1);
        exchange.sendResponseHeaders(status, body.length);
        try (OutputStream os = exchange.getResponseBody()) {
          os.write(body);
        }
      });
      server.start();
    }

    String url() {
      return "http://127.0.0.1:" + server.getAddress().getPort() + "/order";
    }

    @Override
    public void close() {
      server.stop(0);
    }
  }

  /** Logs that only say what was opened and closed, and when. */
  static final class Recorded implements Steps.Logs {
    final List<String> events = Collections.synchronizedList(new ArrayList<>());

    @Override
    public void open(Order order) {
      events.add("open " + order.getSeq());
    }

    @Override
    public void close(Order order, String closingLine) {
      events.add("close " + order.getSeq() + " " + closingLine);
    }
  }

  private static void await(java.util.function.BooleanSupplier condition) throws InterruptedException {
    final long until = System.currentTimeMillis() + 5000;
    while (!condition.getAsBoolean()) {
      assertTrue(System.currentTimeMillis() < until, "timed out");
      Thread.sleep(5);
    }
  }

  @Test
  void aThreadLeftOutWaitsForTheNextOrderWithoutSpinning() throws Exception {
    try (Board board = new Board()) {
      final Steps steps = new Steps(board.url(), "key", "w-0", new Recorded(), 5000, 5000, line -> { });
      steps.start(0, 0, 2);
      await(() -> steps.current().getSeq() == 1);
      final Order idle = steps.current();
      final long began = System.nanoTime();
      assertSame(idle, steps.awaitOther(idle, 300));
      assertTrue(System.nanoTime() - began >= 290_000_000L, "returned after " + (System.nanoTime() - began) / 1e6 + " ms");
    }
  }

  @Test
  void aStepClosesOnceItsLastThreadLeftAndOnlyThenTheNextOpens() throws Exception {
    try (Board board = new Board()) {
      final Recorded logs = new Recorded();
      final Steps steps = new Steps(board.url(), "key", "w-0", logs, 5000, 5000, line -> { });
      steps.start(0, 0, 2);
      board.answer = "seq=2\nkind=step\nesbperf.step.processes=1\nesbperf.step.threads=2\nesbperf.users=2\n";
      await(() -> steps.current().getSeq() == 2);
      final Order step = steps.current();
      assertTrue(step.takes(0, 0, 1) && !step.takes(0, 0, 2) && !step.takes(0, 1, 0) && !step.takes(1, 0, 0));
      assertTrue(steps.enter(step));
      assertTrue(steps.enter(step));
      await(() -> board.states.contains("adopted:2"));
      board.answer = "seq=3\nkind=idle\n";
      await(step::isOver);
      assertFalse(steps.enter(step), "no thread enters a step that is over");
      steps.leave(step);
      Thread.sleep(100);
      assertEquals(List.of("open 2"), logs.events, "closed only once every thread left");
      assertEquals(2, steps.current().getSeq());
      steps.leave(step);
      await(() -> steps.current().getSeq() == 3);
      assertEquals("close 2 esbperf: step 2 closed normally: 2 thread(s) took part", logs.events.get(1));
      await(() -> board.states.contains("adopted:3"));
    }
  }

  @Test
  void aProcessTellsTheBoardHowManyOfItsThreadsHaveBegunTheStepUntilAllHave() throws Exception {
    try (Board board = new Board()) {
      // The second process of agent 1, of 3 threads; 2 x 3 per agent and 11 users: agent 1 holds
      // users 6-10, its second process users 9 and 10 (its threads 0 and 1).
      final Steps steps = new Steps(board.url(), "key", "w-0", new Recorded(), 5000, 5000, line -> { });
      steps.start(1, 1, 3);
      board.answer = "seq=2\nkind=step\nesbperf.step.processes=2\nesbperf.step.threads=3\nesbperf.users=11\n";
      await(() -> steps.current().getSeq() == 2);
      final Order step = steps.current();
      assertEquals(2, steps.takes(step));
      await(() -> board.asked(q -> q.contains("state=adopted:2") && q.contains("begun=0&takes=2")));
      assertTrue(steps.enter(step));
      assertTrue(steps.enter(step));
      Thread.sleep(100);
      assertFalse(board.asked(q -> q.contains("begun=1")), "entered is not begun");
      steps.begun(step);
      await(() -> board.asked(q -> q.contains("begun=1&takes=2")));
      steps.begun(step);
      await(() -> board.asked(q -> q.contains("begun=2&takes=2")));
      board.answer = "seq=3\nkind=idle\n";
      steps.leave(step);
      steps.leave(step);
      await(() -> board.asked(q -> q.contains("state=adopted:3") && q.contains("takes=0")));
    }
  }

  @Test
  void aJoiningProcessPollsOftenAndAJoinedOneWaitsForTheBoard() throws Exception {
    try (Board board = new Board()) {
      board.answer = "seq=2\nkind=step\nesbperf.step.processes=1\nesbperf.step.threads=2\nesbperf.users=2\n";
      final Steps steps = new Steps(board.url(), "key", "w-0", new Recorded(), 5000, 5000, line -> { });
      steps.start(0, 0, 2);
      await(() -> steps.current().getSeq() == 2);
      await(() -> board.asked(q -> q.contains("have=-1")));
      final Order step = steps.current();
      for (int thread = 0; thread < 2; thread++) {
        steps.enter(step);
        steps.begun(step);
      }
      await(() -> board.asked(q -> q.contains("begun=2")));
      Thread.sleep(50);
      final int begun = board.queries.size();
      await(() -> board.queries.size() >= begun + 3);
      final List<String> after = new ArrayList<>(board.queries.subList(begun, board.queries.size()));
      assertTrue(after.stream().allMatch(q -> q.contains("have=2")), "every thread in: polls name the order held " + after);
    }
  }

  @Test
  void anOpenModelSchedulesSleepersWakeWhenTheStepIsOver() throws Exception {
    try (Board board = new Board()) {
      final Steps steps = new Steps(board.url(), "key", "w-0", new Recorded(), 5000, 5000, line -> { });
      steps.start(0, 0, 2);
      board.answer = "seq=2\nkind=step\n";
      await(() -> steps.current().getSeq() == 2);
      final Order step = steps.current();
      final Schedule schedule = new Schedule(0.1, 1000);   // a ticket every 10 s
      step.cancelWhenOver(schedule);
      try (CannedServer server = CannedServer.start(CannedServer.answer(new String[0], new byte[0]))) {
        final Requests requests = new Requests(true);
        requests.add(server.getUrl(), "/", "text/plain", null, new byte[1], null);
        final User user = new User(requests, 1000, schedule, null);
        assertTrue(user.awaitTurn(), "the first ticket is due at once");
        final long began = System.nanoTime();
        new Thread(() -> board.answer = "seq=3\nkind=idle\n").start();
        assertFalse(user.awaitTurn(), "the next ticket is not sent once the step is over");
        assertTrue(System.nanoTime() - began < 2_000_000_000L);
        user.close();
      }
    }
  }

  @Test
  void aBoardThatForgetsTheRunEndsIt() throws Exception {
    try (Board board = new Board()) {
      final Steps steps = new Steps(board.url(), "key", "w-0", new Recorded(), 5000, 5000, line -> { });
      steps.start(0, 0, 2);
      await(() -> steps.current().getSeq() == 1);
      board.status = 409;
      await(() -> steps.current().isEnd());
      assertEquals("ended", steps.getState());
    }
  }

  @Test
  void anOrderLaysUsersOutAsAFreshStartWould() {
    final Order three = new Order(5, Order.STEP, Map.of("esbperf.step.processes", "1", "esbperf.step.threads", "2",
                                                        "esbperf.users", "3"));
    // 3 users over 2 agents of 1 x 2: agent 0 threads 0 and 1, agent 1 thread 0.
    assertTrue(three.takes(0, 0, 0) && three.takes(0, 0, 1) && three.takes(1, 0, 0));
    assertFalse(three.takes(1, 0, 1));
    assertFalse(new Order(6, Order.IDLE, Map.of()).takes(0, 0, 0));
  }
}
