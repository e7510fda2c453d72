package dev.ferrite.dir;

import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Inode#lockExclusiveIf}, which a reserve's refill or spill takes: a change another thread made
 * meanwhile is seen under the plain lock, before the writers inside are kept out or waited for; a change
 * still needed keeps them out and waits for them, as {@link Inode#lockExclusive} does.
 */
class InodeLockTest {
    @Test
    void aChangeDoneMeanwhileWaitsForNoWriterAndHoldsNothing() {
        Inode i = new Inode(7, 1);
        assertTrue(i.tryEnter(i.writers(), 3)); // a writer inside, never leaving in this test
        assertFalse(i.lockExclusiveIf(() -> false), "asked under the lock, before the writer would be waited for");
        assertFalse(i.isHeldExclusively(), "the lock was let go");
        assertEquals(0, i.writers() & Inode.EXCLUSIVE, "writers were never kept out");
        assertTrue(i.tryEnter(i.writers(), 1), "another writer still gets in");
    }

    @Test
    void aChangeStillNeededKeepsWritersOutAndWaitsForThoseInside() throws Exception {
        Inode i = new Inode(7, 1);
        assertTrue(i.tryEnter(i.writers(), 3));
        AtomicInteger asked = new AtomicInteger();
        FutureTask<Boolean> exclusive = new FutureTask<>(() -> {
            if (!i.lockExclusiveIf(() -> asked.incrementAndGet() > 0)) {
                return false;
            }
            i.unlockExclusive();
            return true;
        });
        Thread t = Thread.ofPlatform().start(exclusive);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while ((i.writers() & Inode.EXCLUSIVE) == 0) {
            assertTrue(System.nanoTime() < deadline, "the change never kept the writers out");
            Thread.onSpinWait();
        }
        assertFalse(i.tryEnter(i.writers(), 1), "a writer got in while the change kept them out");
        assertFalse(exclusive.isDone(), "the change went on with a writer inside");
        i.leave(3);
        assertTrue(exclusive.get(20, TimeUnit.SECONDS));
        t.join();
        assertEquals(2, asked.get(), "asked once under the lock, again once the writers were out");
        assertEquals(0, i.writers() & (Inode.EXCLUSIVE | Inode.CLAIMS));
    }

    @Test
    void aChangeDoneWhileWaitingForTheWritersLetsGoOfEverything() {
        Inode i = new Inode(7, 1);
        AtomicInteger asked = new AtomicInteger();
        assertFalse(i.lockExclusiveIf(() -> asked.incrementAndGet() == 1));
        assertEquals(2, asked.get());
        assertFalse(i.isHeldExclusively());
        assertEquals(0, i.writers() & Inode.EXCLUSIVE);
    }
}
