package dev.ferrite.journal.internal;

import dev.ferrite.journal.VolumeShutdownException;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@ExtendWith(TestSeed.class)
class LogSpaceTest {
    private static final long START = (1L << 32); // cycle 1, byte 0

    @Test
    void grantWordsCarryAndBorrowAcrossCycles() {
        long w = LogSpace.add(START, 1500, 1000);
        assertEquals((2L << 32) | 500, w);
        assertEquals(START, LogSpace.sub(w, 1500, 1000));
        assertEquals(1500, LogSpace.used(w, START, 1000));
        assertEquals(-500, LogSpace.distanceFree(w, START, 1000));
        assertEquals((3L << 32) | 200, LogSpace.add(START, 2200, 1000), "two cycles at once");
        assertEquals(START | 999, LogSpace.sub((2L << 32) | 999, 1000, 1000), "a whole cycle back");
    }

    /** Against the plain definition (cycle * logBytes + bytes), every step from 0 to the log's size at every offset of a small log. */
    @Test
    void carryAndBorrowMatchTheirDefinition() {
        long logBytes = 97;
        for (long cycle = 1; cycle < 4; cycle++) {
            for (long b = 0; b < logBytes; b++) {
                long word = cycle << 32 | b;
                long at = cycle * logBytes + b;
                for (long n = 0; n <= 3 * logBytes; n++) {
                    long up = LogSpace.add(word, n, logBytes);
                    assertEquals(at + n, (up >>> 32) * logBytes + (up & 0xFFFF_FFFFL), "add " + n + " at " + cycle + "/" + b);
                    assertTrue((up & 0xFFFF_FFFFL) < logBytes);
                    if (n > at) {
                        continue; // no cycle before 0
                    }
                    long down = LogSpace.sub(word, n, logBytes);
                    assertEquals(at - n, (down >>> 32) * logBytes + (down & 0xFFFF_FFFFL), "sub " + n + " at " + cycle + "/" + b);
                    assertTrue((down & 0xFFFF_FFFFL) < logBytes);
                }
            }
        }
    }

    @Test
    void reservationLargerThanHalfTheLogIsRefused() {
        LogSpace s = new LogSpace(1000, START, () -> { });
        NoSpaceException e = assertThrows(NoSpaceException.class, () -> s.reserve(new Ticket(600, 1)));
        assertTrue(e.getMessage().contains("600"), e.getMessage());
        assertEquals(1000, s.freeBytes(), "nothing reserved");
    }

    @Test
    void aSmallRequestDoesNotJumpAQueuedLargeOne() throws Exception {
        LogSpace s = new LogSpace(1000, START, () -> { });
        s.reserve(new Ticket(450, 1));
        s.reserve(new Ticket(450, 1)); // 900 of 1000 reserved
        List<String> order = new ArrayList<>();
        Thread a = waiter(s, new Ticket(400, 1), "A", order);
        awaitQueued(s.reserveHead, 1);
        Thread b = waiter(s, new Ticket(50, 1), "B", order); // 100 free: B fits, yet must queue behind A
        awaitQueued(s.reserveHead, 2);
        synchronized (order) {
            assertTrue(order.isEmpty(), "B must not jump the queue: " + order);
        }
        // 400 free: exactly A. Had B been granted first, A would not fit and B would finish alone.
        s.moveTail(LogSpace.add(START, 300, 1000));
        a.join(5000);
        assertFalse(a.isAlive(), "A was not granted");
        assertEquals(1, s.reserveHead.queued(), "B waits behind A");
        s.moveTail(LogSpace.add(START, 350, 1000));
        b.join(5000);
        synchronized (order) {
            assertEquals(List.of("A", "B"), order);
        }
        assertEquals(0, s.reserveHead.queued());
    }

    @Test
    void tailMoveWakesOnlyWhatFits() throws Exception {
        LogSpace s = new LogSpace(1000, START, () -> { });
        s.reserve(new Ticket(450, 1));
        s.reserve(new Ticket(450, 1));
        List<String> order = new ArrayList<>();
        Thread a = waiter(s, new Ticket(300, 1), "A", order);
        awaitQueued(s.reserveHead, 1);
        Thread b = waiter(s, new Ticket(200, 1), "B", order);
        awaitQueued(s.reserveHead, 2);
        s.moveTail(LogSpace.add(START, 250, 1000)); // 350 free: A fits, B (200) does not after A
        a.join(5000);
        assertFalse(a.isAlive());
        synchronized (order) {
            assertEquals(List.of("A"), order);
        }
        assertEquals(1, s.reserveHead.queued(), "B still waits");
        s.moveTail(LogSpace.add(START, 400, 1000));
        b.join(5000);
        synchronized (order) {
            assertEquals(List.of("A", "B"), order);
        }
    }

    @Test
    void shutdownFailsWaiters() throws Exception {
        LogSpace s = new LogSpace(1000, START, () -> { });
        s.reserve(new Ticket(500, 1));
        s.reserve(new Ticket(450, 1));
        AtomicReference<Throwable> err = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                s.reserve(new Ticket(100, 1));
            } catch (Throwable e) {
                err.set(e);
            }
        });
        t.start();
        awaitQueued(s.reserveHead, 1);
        s.shutdown(new RuntimeException("log write failed"));
        t.join(5000);
        assertInstanceOf(VolumeShutdownException.class, err.get());
        assertTrue(err.get().getMessage().contains("100 bytes"), err.get().getMessage());
    }

    /**
     * Many threads take tickets (one-shot and permanent, rolled several times) against a log far too
     * small for all of them, "write" part of each unit, and hand the rest back; a tail mover frees what
     * was written. At every step the write head must stay within one log of the tail, and at the end
     * both heads must account for exactly what was written.
     */
    @Test
    void concurrentReserversNeverOverrunTheLog() throws Exception {
        long seed = TestSeed.get(7);
        long logBytes = 64 * 1024;
        AtomicLong written = new AtomicLong();
        AtomicReference<LogSpace> ref = new AtomicReference<>();
        // The pressure callback plays the AIL: free everything written so far. Like the real pusher, it
        // moves the tail forward only, one mover at a time.
        Runnable pressure = () -> {
            synchronized (written) {
                LogSpace space = ref.get();
                long target = LogSpace.add(START, written.get(), logBytes);
                if (LogSpace.used(target, space.tail(), logBytes) > 0) {
                    space.moveTail(target);
                }
            }
        };
        LogSpace s = new LogSpace(logBytes, START, pressure);
        ref.set(s);
        int threads = 8;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(threads);
        Thread checker = new Thread(() -> {
            while (!stop.get()) {
                check(s, logBytes, failure);
            }
        });
        checker.start();
        for (int t = 0; t < threads; t++) {
            Random rnd = new Random(seed * 31 + t);
            new Thread(() -> {
                try {
                    for (int i = 0; i < 10000 && failure.get() == null; i++) {
                        long unit = 500 + rnd.nextInt(4000);
                        int count = rnd.nextInt(4) == 0 ? 2 + rnd.nextInt(3) : 1;
                        Ticket tk = new Ticket(unit, count);
                        s.reserve(tk);
                        check(s, logBytes, failure);
                        int rolls = count > 1 ? 1 + rnd.nextInt(count + 2) : 0;
                        for (int r = 0; r < rolls; r++) {
                            consume(tk, rnd, written);
                            s.rolled(tk);
                            s.regrant(tk);
                            check(s, logBytes, failure);
                        }
                        consume(tk, rnd, written);
                        s.ungrant(tk);
                        check(s, logBytes, failure);
                        if (rnd.nextInt(16) == 0) {
                            pressure.run();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                } finally {
                    done.countDown();
                }
            }).start();
        }
        assertTrue(done.await(120, TimeUnit.SECONDS), "reservers deadlocked (seed " + seed + ")");
        stop.set(true);
        checker.join();
        if (failure.get() != null) {
            throw new AssertionError("seed " + seed, failure.get());
        }
        // Every reservation is handed back; what remains on both heads is exactly what was written.
        assertEquals(written.get(), LogSpace.used(s.writeHead.get(), START, logBytes), "write head, seed " + seed);
        assertEquals(written.get(), LogSpace.used(s.reserveHead.get(), START, logBytes), "reserve head, seed " + seed);
    }

    private static void consume(Ticket tk, Random rnd, AtomicLong written) {
        long used = rnd.nextInt((int) tk.current + 1);
        tk.current -= used;
        written.addAndGet(used);
    }

    private static void check(LogSpace s, long logBytes, AtomicReference<Throwable> failure) {
        long head = s.writeHead.get();
        long tail = s.tail(); // read second: a tail that moved since only makes "used" look smaller
        long used = LogSpace.used(head, tail, logBytes);
        if (used > logBytes) {
            failure.compareAndSet(null, new AssertionError("write head " + used + " bytes past the tail in a log of " + logBytes));
        }
    }

    private static Thread waiter(LogSpace s, Ticket t, String name, List<String> order) {
        Thread th = new Thread(() -> {
            s.reserve(t);
            synchronized (order) {
                order.add(name);
            }
        }, name);
        th.start();
        return th;
    }

    private static void awaitQueued(GrantHead h, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (h.queued() < n) {
            assertTrue(System.nanoTime() < deadline, "waiter never queued");
            Thread.sleep(1);
        }
    }
}
