package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** The push thread's wait for committers to leave a switched-out CIL context: parked, and bounded. */
@Timeout(value = 1, unit = TimeUnit.MINUTES)
class CilDrainTest {
    static final int BS = 4096;

    /** An item whose image (read by the commit, inside the context) is held at a gate. */
    private static final class GatedItem extends LogItem {
        final MemorySegment image;
        final CountDownLatch inside = new CountDownLatch(1);
        final CountDownLatch open = new CountDownLatch(1);

        GatedItem(Arena arena) {
            super(1, 7);
            image = arena.allocate(BS);
        }

        @Override
        protected MemorySegment image() {
            inside.countDown();
            try {
                if (!open.await(30, TimeUnit.SECONDS)) {
                    throw new AssertionError("the gate stayed closed");
                }
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            return image;
        }

        @Override
        protected boolean tryLock() {
            return true;
        }

        @Override
        protected void unlock() {
        }

        @Override
        protected void stamp(MemorySegment copy, long lsn) {
        }
    }

    /** Starts a committer that stops inside the current context, at the item's gate. */
    private static Thread commitInside(Cil cil, GatedItem item, AtomicReference<Throwable> error) throws InterruptedException {
        item.txDirty = DirtyMap.low(0, 8, cil.chunkShift());
        Thread committer = new Thread(() -> {
            try {
                cil.commit(new LogItem[] {item}, 1, new Ticket(1 << 20, 1), -1);
            } catch (Throwable e) {
                error.set(e);
            }
        }, "gated-committer");
        committer.setDaemon(true);
        committer.start();
        assertTrue(item.inside.await(10, TimeUnit.SECONDS), "the committer never reached the item");
        return committer;
    }

    /**
     * Committing threads started one after another, another thread made before each (ids two apart, which
     * the old hash of the thread id never spread over four stripes), commit on different stripes while
     * there are stripes for them all: four, the fewest a Cil has.
     */
    @Test
    void threadsStartedOneAfterAnotherCommitOnStripesOfTheirOwn() throws Exception {
        try (ShadowPool shadows = new ShadowPool(BS, 1L << 20)) {
            Cil cil = new Cil(1, BS, Long.MAX_VALUE, shadows, () -> { }, TimeUnit.SECONDS.toNanos(30));
            int[] stripes = new int[4];
            for (int t = 0; t < stripes.length; t++) {
                Thread other = new Thread(() -> { });
                other.start();
                other.join();
                int k = t;
                Thread committer = new Thread(() -> stripes[k] = cil.stripe());
                committer.start();
                committer.join();
            }
            assertEquals(stripes.length, Arrays.stream(stripes).distinct().count(), Arrays.toString(stripes));
        }
    }

    @Test
    void thePushThreadParksUntilTheLastCommitterLeaves() throws Exception {
        try (Arena arena = Arena.ofShared(); ShadowPool shadows = new ShadowPool(BS, 1L << 20)) {
            Cil cil = new Cil(1, BS, Long.MAX_VALUE, shadows, () -> { }, TimeUnit.SECONDS.toNanos(30));
            GatedItem item = new GatedItem(arena);
            AtomicReference<Throwable> error = new AtomicReference<>();
            Thread committer = commitInside(cil, item, error);
            AtomicReference<Cil.Context> drained = new AtomicReference<>();
            Thread pusher = new Thread(() -> drained.set(cil.switchContext()), "drainer");
            pusher.setDaemon(true);
            pusher.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!(pusher.getState() == Thread.State.TIMED_WAITING && LockSupport.getBlocker(pusher) == cil)) {
                if (System.nanoTime() - deadline > 0) {
                    fail("the push thread never parked while a committer was inside: " + pusher.getState());
                }
                Thread.onSpinWait();
            }
            item.open.countDown();
            committer.join(TimeUnit.SECONDS.toMillis(10));
            pusher.join(TimeUnit.SECONDS.toMillis(10)); // well before its 30 s bound: the committer woke it
            assertEquals(null, error.get());
            assertTrue(drained.get() != null, "the push thread was not woken when the committer left");
            assertEquals(1, drained.get().seq);
            assertEquals(1, drained.get().items().length);
        }
    }

    @Test
    void aCommitterStuckInsideEndsTheWaitWithAnExceptionNamingTheContext() throws Exception {
        try (Arena arena = Arena.ofShared(); ShadowPool shadows = new ShadowPool(BS, 1L << 20)) {
            Cil cil = new Cil(1, BS, Long.MAX_VALUE, shadows, () -> { }, TimeUnit.MILLISECONDS.toNanos(200));
            GatedItem item = new GatedItem(arena);
            AtomicReference<Throwable> error = new AtomicReference<>();
            Thread committer = commitInside(cil, item, error);
            try {
                IllegalStateException e = assertThrows(IllegalStateException.class, cil::switchContext);
                assertTrue(e.getMessage().startsWith("CIL context 1 did not drain in 200 ms: 1 committer(s) still inside"),
                        e.getMessage());
            } finally {
                item.open.countDown();
                committer.join(TimeUnit.SECONDS.toMillis(10));
            }
        }
    }
}
