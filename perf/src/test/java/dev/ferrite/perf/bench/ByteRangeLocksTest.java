package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

class ByteRangeLocksTest {
    private final ByteRangeLocks locks = new ByteRangeLocks();
    private final Object a = new Object(), b = new Object();

    @Test
    void unlockNeedsTheExactRangeItsOwnerLocked() throws InterruptedException {
        locks.lock(a, 7, 100, 10);
        assertEquals(NtStatus.RANGE_NOT_LOCKED, locks.unlock(a, 7, 100, 5));
        assertEquals(NtStatus.RANGE_NOT_LOCKED, locks.unlock(b, 7, 100, 10));
        assertEquals(NtStatus.RANGE_NOT_LOCKED, locks.unlock(a, 8, 100, 10));
        assertEquals(NtStatus.OK, locks.unlock(a, 7, 100, 10));
        assertEquals(NtStatus.RANGE_NOT_LOCKED, locks.unlock(a, 7, 100, 10));
        assertEquals(0, locks.size(), "an inode without locks leaves the table");
    }

    @Test
    void anOverlappingLockWaitsForTheOtherOwnerAndDisjointOnesDoNot() throws InterruptedException {
        locks.lock(a, 7, 100, 10);
        locks.lock(b, 7, 110, 10); // adjacent, not overlapping
        locks.lock(b, 7, 105, 0); // zero length conflicts with nothing
        locks.lock(a, 7, 100, 10); // the owner's own range again
        CountDownLatch started = new CountDownLatch(1);
        AtomicBoolean granted = new AtomicBoolean();
        Thread t = new Thread(() -> {
            started.countDown();
            try {
                locks.lock(b, 7, 95, 10);
                granted.set(true);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        t.start();
        assertTrue(started.await(10, TimeUnit.SECONDS));
        t.join(200); // a grant would come at once: it must not come while a holds the range
        assertFalse(granted.get());
        locks.closed(a, 7); // closing drops every lock of the owner on the inode, and wakes the waiter
        t.join(TimeUnit.SECONDS.toMillis(10));
        assertTrue(granted.get());
        assertEquals(NtStatus.OK, locks.unlock(b, 7, 95, 10));
    }
}
