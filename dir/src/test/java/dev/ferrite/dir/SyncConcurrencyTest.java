package dev.ferrite.dir;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two syncs of the same data at once: the one that finds the file's (or the volume's) mark taken by the
 * other, whose device flush is still under way, must not return before a flush covers the writes the
 * other took the mark for, which returned before it began. (It used to return at once, the data not
 * yet durable.)
 */
class SyncConcurrencyTest extends FileTestBase {
    private static final long PROMPT_SECONDS = 10;
    /** How long a sync that must wait is watched not returning. */
    private static final long HELD_MILLIS = 300;
    private HeldFlushDevice held;
    private final ExecutorService threads = Executors.newCachedThreadPool();

    /** Holds the first device flush of thread {@link #holding} until {@link #release} opens; counts flushes begun. */
    static final class HeldFlushDevice extends ForwardingDevice {
        volatile Thread holding;
        final CountDownLatch entered = new CountDownLatch(1), release = new CountDownLatch(1);
        final AtomicInteger begun = new AtomicInteger();

        HeldFlushDevice(BlockDevice inner) {
            super(inner);
        }

        @Override
        public void flush() {
            begun.incrementAndGet();
            if (holding == Thread.currentThread()) { // not a background thread's flush
                holding = null;
                entered.countDown();
                try {
                    assertTrue(release.await(60, TimeUnit.SECONDS), "the held flush was never released");
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            }
            super.flush();
        }
    }

    @AfterEach
    void stopThreads() {
        held.release.countDown(); // a failed test's held flush too, so the volume closes
        threads.shutdown();
    }

    @Override
    BlockDevice device(MemoryDevice formatted) {
        return held = new HeldFlushDevice(formatted);
    }

    /** Runs {@code first} until its flush is held, then {@code second}: which must wait for a flush that begins after it. */
    private void secondWaitsForAFlushOfItsOwn(Runnable first, Runnable second) throws Exception {
        CompletableFuture<Void> a = CompletableFuture.runAsync(() -> {
            held.holding = Thread.currentThread();
            first.run();
        }, threads);
        assertTrue(held.entered.await(PROMPT_SECONDS, TimeUnit.SECONDS), "the first sync's flush reached the device");
        int begunBefore = held.begun.get();
        CompletableFuture<Void> b = CompletableFuture.runAsync(second, threads);
        assertThrows(TimeoutException.class, () -> b.get(HELD_MILLIS, TimeUnit.MILLISECONDS),
                "the second sync returned while the flush covering the write was held");
        held.release.countDown();
        a.get(PROMPT_SECONDS, TimeUnit.SECONDS);
        b.get(PROMPT_SECONDS, TimeUnit.SECONDS);
        assertTrue(held.begun.get() > begunBefore, "a flush began after the second sync did");
    }

    @Test
    void anFdatasyncBesideAnotherWhoseFlushIsUnderWayWaitsForAFlush() throws Exception {
        Handle f = written("f", 2, 1);
        ns.fsync(f);
        ns.write(f, 0, stamped(0, 1, 2)); // in place: the file marked, nothing to log for fdatasync
        secondWaitsForAFlushOfItsOwn(() -> ns.fdatasync(f), () -> ns.fdatasync(f));
        int begun = held.begun.get();
        ns.fdatasync(f);
        assertEquals(begun, held.begun.get(), "nothing written since: no flush");
        f.close();
    }

    @Test
    void aVolumeSyncBesideAnotherWhoseFlushIsUnderWayWaitsForAFlush() throws Exception {
        Handle f = written("f", 2, 1);
        ns.write(f, 0, stamped(0, 1, 2)); // in place: the volume marked
        ns.fsync(f); // the file's time logged and forced: the syncs find nothing for the journal to force
        secondWaitsForAFlushOfItsOwn(v::sync, v::sync);
        int begun = held.begun.get();
        v.sync();
        assertEquals(begun, held.begun.get(), "nothing written since: no flush");
        f.close();
    }
}
