package dev.ferrite.dir;

import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link IoLock}, the files' I/O lock: shared and exclusive holds never overlap, an exclusive waiter
 * keeps later shared holders out (so a stream of readers cannot starve a truncate), the exclusive owner
 * may take it again either way, and a shared hold beside others allocates nothing.
 */
class IoLockTest {
    private static final long SEED = Long.getLong("ferrite.seed", 16);
    private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(20);

    @Test
    void sharedAndExclusiveHoldsNeverOverlapAndExclusiveOnesFinishAmongReaders() throws Exception {
        IoLock lock = new IoLock();
        int readers = 6, exclusives = 2, exclusiveRounds = 2_000;
        AtomicInteger inShared = new AtomicInteger(), inExclusive = new AtomicInteger();
        AtomicLong sharedHolds = new AtomicLong(), overlaps = new AtomicLong(), maxShared = new AtomicLong();
        AtomicBoolean done = new AtomicBoolean();
        Thread[] ts = new Thread[readers + exclusives];
        Throwable[] failed = new Throwable[ts.length];
        CountDownLatch exclusivesDone = new CountDownLatch(exclusives);
        for (int t = 0; t < ts.length; t++) {
            int me = t;
            boolean exclusive = t >= readers;
            ts[t] = Thread.ofPlatform().name("io-lock-" + (exclusive ? "exclusive-" : "shared-") + t).start(() -> {
                SplittableRandom random = new SplittableRandom(SEED * 31 + me);
                try {
                    for (int round = 0; exclusive ? round < exclusiveRounds : !done.get(); round++) {
                        if (exclusive) {
                            lock.lock();
                            try {
                                if (inExclusive.incrementAndGet() != 1 | inShared.get() != 0) {
                                    overlaps.incrementAndGet();
                                }
                                busy(random.nextInt(200));
                                if (random.nextInt(4) == 0) { // the owner again, both ways (truncate's release, append's write)
                                    lock.lockShared();
                                    lock.lock();
                                    lock.unlock();
                                    lock.unlockShared();
                                }
                                if (inShared.get() != 0) {
                                    overlaps.incrementAndGet();
                                }
                                inExclusive.decrementAndGet();
                            } finally {
                                lock.unlock();
                            }
                        } else {
                            lock.lockShared();
                            try {
                                int n = inShared.incrementAndGet();
                                maxShared.accumulateAndGet(n, Math::max);
                                if (inExclusive.get() != 0) {
                                    overlaps.incrementAndGet();
                                }
                                busy(random.nextInt(400));
                                if (inExclusive.get() != 0) {
                                    overlaps.incrementAndGet();
                                }
                                inShared.decrementAndGet();
                                sharedHolds.incrementAndGet();
                            } finally {
                                lock.unlockShared();
                            }
                        }
                    }
                } catch (Throwable e) {
                    failed[me] = e;
                } finally {
                    if (exclusive) {
                        exclusivesDone.countDown();
                    }
                }
            });
        }
        boolean finished = exclusivesDone.await(60, TimeUnit.SECONDS); // the readers go on until the exclusive holders are through
        done.set(true);
        for (Thread t : ts) {
            t.join(TimeUnit.NANOSECONDS.toMillis(WAIT_NANOS));
            assertFalse(t.isAlive(), t.getName() + " did not finish (seed " + SEED + ")");
        }
        for (int t = 0; t < ts.length; t++) {
            if (failed[t] != null) {
                throw new AssertionError(ts[t].getName() + " failed (seed " + SEED + ")", failed[t]);
            }
        }
        assertTrue(finished, "the exclusive holders did not get their turns among the readers in 60 s (seed " + SEED + ")");
        assertEquals(0, overlaps.get(), "holds overlapped (seed " + SEED + ")");
        assertTrue(sharedHolds.get() > 0 && maxShared.get() > 1, "the readers held it, side by side: " + sharedHolds + " holds, "
                + maxShared + " at once (seed " + SEED + ")");
        assertTrue(lock.tryLock(), "free at the end");
        lock.unlock();
    }

    @Test
    void aWaitingExclusiveHolderKeepsLaterReadersOut() throws Exception {
        IoLock lock = new IoLock();
        lock.lockShared(); // a writer of the file, inside
        AtomicInteger order = new AtomicInteger();
        int[] at = new int[2];
        FutureTask<Void> exclusive = new FutureTask<>(() -> {
            lock.lock(); // a truncate
            at[0] = order.incrementAndGet();
            lock.unlock();
            return null;
        });
        Thread x = Thread.ofPlatform().name("io-lock-truncate").start(exclusive);
        await(() -> lock.getQueueLength() == 1, "the exclusive holder never queued");
        FutureTask<Void> late = new FutureTask<>(() -> {
            lock.lockShared(); // a writer arriving after the truncate
            at[1] = order.incrementAndGet();
            lock.unlockShared();
            return null;
        });
        Thread r = Thread.ofPlatform().name("io-lock-late-reader").start(late);
        await(() -> lock.getQueueLength() == 2 || late.isDone(), "the late reader neither queued nor got in");
        assertFalse(late.isDone(), "a reader got in past a waiting exclusive holder: a stream of them would starve it");
        assertFalse(exclusive.isDone(), "the exclusive holder got in beside a reader");
        assertFalse(lock.tryLock(), "tryLock took a lock a reader holds");
        lock.unlockShared();
        exclusive.get(20, TimeUnit.SECONDS);
        late.get(20, TimeUnit.SECONDS);
        x.join();
        r.join();
        assertEquals(1, at[0], "the exclusive holder went first");
        assertEquals(2, at[1], "the late reader after it");
    }

    @Test
    void theExclusiveOwnerTakesItAgainAndOthersCannot() throws Exception {
        IoLock lock = new IoLock();
        lock.lock();
        assertTrue(lock.tryLock(), "the owner's tryLock");
        lock.lockShared(); // the owner's write under its append
        lock.lock();
        FutureTask<Boolean> other = new FutureTask<>(lock::tryLock);
        Thread.ofPlatform().start(other).join();
        assertFalse(other.get(), "another thread took a held lock");
        lock.unlock();
        lock.unlockShared();
        lock.unlock();
        FutureTask<Boolean> stillHeld = new FutureTask<>(lock::tryLock);
        Thread.ofPlatform().start(stillHeld).join();
        assertFalse(stillHeld.get(), "let go before the owner's first hold was");
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertThrows(IllegalMonitorStateException.class, lock::unlockShared);
        FutureTask<Boolean> free = new FutureTask<>(() -> {
            boolean got = lock.tryLock();
            lock.unlock();
            return got;
        });
        Thread.ofPlatform().start(free).join();
        assertTrue(free.get(), "free once every hold was let go");
    }

    @Test
    void aSharedHoldBesideAnotherAllocatesNothing() throws Exception {
        IoLock lock = new IoLock();
        CountDownLatch leave = new CountDownLatch(1);
        Thread other = holdShared(lock, leave);
        int holds = 10_000;
        double best = Double.MAX_VALUE;
        for (int round = 0; round < 5; round++) { // the first warms up; the best of the others counts (a round may meet a compilation)
            long before = FileTestBase.allocatedBytes();
            for (int n = 0; n < holds; n++) {
                lock.lockShared();
                lock.unlockShared();
            }
            if (round > 0) {
                best = Math.min(best, (double) (FileTestBase.allocatedBytes() - before) / holds);
            }
        }
        leave.countDown();
        other.join();
        assertTrue(best < 1, best + " bytes allocated per shared hold beside another reader's");
    }

    /** Starts a thread that takes a shared hold of {@code lock} (another reader inside) and returns once it holds it; it lets go when {@code leave} opens. */
    static Thread holdShared(IoLock lock, CountDownLatch leave) throws InterruptedException {
        CountDownLatch held = new CountDownLatch(1);
        Thread other = Thread.ofPlatform().name("io-lock-other-reader").start(() -> {
            lock.lockShared();
            held.countDown();
            try {
                leave.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                lock.unlockShared();
            }
        });
        held.await();
        return other;
    }

    private static void busy(int spins) {
        for (int k = 0; k < spins; k++) {
            Thread.onSpinWait();
        }
    }

    private static void await(BooleanSupplier condition, String failure) {
        long deadline = System.nanoTime() + WAIT_NANOS;
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, failure);
            Thread.onSpinWait();
        }
    }
}
