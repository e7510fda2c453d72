package dev.ferrite.io.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.Test;

class SharedFlushTest {

    /** Waits until {@code t} blocks (on the flush's condition), failing after a bound. */
    private static void awaitBlocked(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (t.getState() != Thread.State.WAITING) {
            assertTrue(System.nanoTime() < deadline, t + " never waited; state " + t.getState());
            Thread.sleep(1);
        }
    }

    @Test
    void callersArrivingDuringAFlushShareTheNextOne() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger runs = new AtomicInteger();
        SharedFlush f = new SharedFlush(() -> {
            if (runs.incrementAndGet() == 1) {
                try {
                    release.await();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
        });
        Thread first = Thread.ofPlatform().start(f::flush);
        while (runs.get() == 0) {
            Thread.onSpinWait();
        }
        List<Thread> later = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Thread t = Thread.ofPlatform().start(f::flush);
            later.add(t);
            awaitBlocked(t);
        }
        release.countDown();
        first.join();
        for (Thread t : later) {
            t.join();
        }
        // the in-flight one may have started before their writes: they need one more, and share it
        assertEquals(2, f.issued());
        assertEquals(2, runs.get());
    }

    @Test
    void everyCallerReturnsAfterAFlushThatStartedAfterItsWrite() throws Exception {
        AtomicLong writes = new AtomicLong(), durable = new AtomicLong();
        SharedFlush f = new SharedFlush(() -> {
            long covered = writes.get(); // writes completed before this flush started
            LockSupport.parkNanos(20_000);
            durable.accumulateAndGet(covered, Math::max);
        });
        int threads = 6, rounds = 300;
        AtomicLong violations = new AtomicLong();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            ts.add(Thread.ofPlatform().start(() -> {
                for (int r = 0; r < rounds; r++) {
                    long mine = writes.incrementAndGet();
                    f.flush();
                    if (durable.get() < mine) {
                        violations.incrementAndGet();
                    }
                }
            }));
        }
        for (Thread t : ts) {
            t.join();
        }
        assertEquals(0, violations.get(), "a flush returned before one covering the caller's write completed");
        assertTrue(f.issued() <= (long) threads * rounds, "issued " + f.issued());
    }

    @Test
    void aFailedFlushCountsForNoOne() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        SharedFlush f = new SharedFlush(() -> {
            if (runs.incrementAndGet() == 1) {
                throw new IllegalStateException("device gone");
            }
        });
        assertThrows(IllegalStateException.class, f::flush);
        f.flush();
        assertEquals(2, f.issued());
    }
}
