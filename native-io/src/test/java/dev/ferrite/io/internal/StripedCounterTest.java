package dev.ferrite.io.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

class StripedCounterTest {
    @Test
    void addsFromOneThreadSumExactly() {
        StripedCounter c = new StripedCounter();
        assertEquals(0, c.sum());
        c.increment();
        c.add(41);
        c.add(-2);
        assertEquals(40, c.sum());
    }

    /** More threads than stripes, so some share one: every add is counted all the same. */
    @Test
    void concurrentAddsOnSharedAndOwnStripesSumExactly() throws InterruptedException {
        StripedCounter c = new StripedCounter();
        int threads = 40, each = 50_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int add = t % 3 + 1;
            ts.add(Thread.ofPlatform().start(() -> {
                awaitQuietly(start);
                for (int i = 0; i < each; i++) {
                    c.add(add);
                }
            }));
        }
        start.countDown();
        for (Thread t : ts) {
            t.join();
        }
        long expected = 0;
        for (int t = 0; t < threads; t++) {
            expected += (long) each * (t % 3 + 1);
        }
        assertEquals(expected, c.sum());
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
