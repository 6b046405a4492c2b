package esbperf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

/** The learned fast check: what it compares, its bound, and threads learning at once. */
class KnownAnswersTest {

  private static final String JSON = "{\"WSResponse\":\"1 hello [echoed by ws1]\"}";

  /** An answer as the client reads it; {@code backend} null: no X-Echo-Backend header. */
  static Response answer(int status, String backend, String body, String... otherHeaders) {
    final StringBuilder head = new StringBuilder("HTTP/1.1 " + status + " X\r\nContent-Type: application/json\r\n");
    for (String h : otherHeaders) {
      head.append(h).append("\r\n");
    }
    if (backend != null) {
      head.append("x-echo-BACKEND: ").append(backend).append("\r\n");
    }
    final byte[] bytes = head.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1);
    return new Response(status, bytes, AnswerReader.lineStarts(bytes), body.getBytes(StandardCharsets.UTF_8),
                        true, 0, 0);
  }

  @Test
  void aLearnedAnswerIsKnownAgainByStatusBackendAndBodyAlone() {
    final KnownAnswers known = new KnownAnswers();
    assertFalse(known.contain(answer(200, "ws1", JSON)), "nothing is known before the check accepted it");
    assertTrue(known.learn(answer(200, "ws1", JSON)));
    // Another answer with the same three parts: other headers (a date) do not matter.
    assertTrue(known.contain(answer(200, "ws1", JSON, "Date: Tue, 24 Nov 2026 10:00:00 GMT")));
    assertFalse(known.contain(answer(200, "ws2", JSON)), "another back end");
    assertFalse(known.contain(answer(200, null, JSON)), "no back-end header");
    assertFalse(known.contain(answer(500, "ws1", JSON)), "another status");
    assertFalse(known.contain(answer(200, "ws1", JSON.replace("hello", "hellO"))), "one byte changed");
    assertFalse(known.contain(answer(200, "ws1", JSON + " ")), "one byte more");
  }

  @Test
  void anAnswerWithoutTheHeaderIsKnownOnlyWithoutIt() {
    final KnownAnswers known = new KnownAnswers();
    assertTrue(known.learn(answer(200, null, JSON)));
    assertTrue(known.contain(answer(200, null, JSON)));
    assertFalse(known.contain(answer(200, "ws1", JSON)));
  }

  @Test
  void aFewVariantsAreKeptOnceEachAndNoMore() {
    final KnownAnswers known = new KnownAnswers();
    assertTrue(known.learn(answer(200, "ws1", "a")));
    assertFalse(known.learn(answer(200, "ws1", "a")), "known already: not kept twice");
    for (int i = 1; i < KnownAnswers.VARIANTS; i++) {
      assertTrue(known.learn(answer(200, "ws1", "a" + i)));
    }
    assertEquals(KnownAnswers.VARIANTS, known.size());
    assertFalse(known.learn(answer(200, "ws1", "one too many")));
    assertFalse(known.contain(answer(200, "ws1", "one too many")));
    assertEquals(KnownAnswers.VARIANTS, known.size());
    assertTrue(known.contain(answer(200, "ws1", "a")) && known.contain(answer(200, "ws1", "a1")));
  }

  @Test
  void threadsLearningAtOnceKeepEachVariantOnceWithinTheBound() throws Exception {
    final KnownAnswers known = new KnownAnswers();
    final int threads = 16;
    final CountDownLatch go = new CountDownLatch(1);
    final List<Thread> started = new ArrayList<>();
    final AtomicInteger lost = new AtomicInteger();   // learned, then not found
    for (int t = 0; t < threads; t++) {
      final int n = t;
      final Thread thread = new Thread(() -> {
        try {
          go.await();
        }
        catch (InterruptedException e) {
          return;
        }
        // Every thread learns the 6 variants in its own order and looks each one up at once.
        for (int i = 0; i < 200; i++) {
          final Response a = answer(200, "ws1", "variant " + (n + i) % 6);
          if (known.learn(a) && !known.contain(a)) {
            lost.incrementAndGet();
          }
        }
      });
      started.add(thread);
      thread.start();
    }
    go.countDown();
    for (Thread thread : started) {
      thread.join();
    }
    assertEquals(0, lost.get());
    assertEquals(KnownAnswers.VARIANTS, known.size());
    int found = 0;
    for (int v = 0; v < 6; v++) {
      found += known.contain(answer(200, "ws1", "variant " + v)) ? 1 : 0;
    }
    assertEquals(KnownAnswers.VARIANTS, found, "each kept variant is distinct and found");
  }
}
