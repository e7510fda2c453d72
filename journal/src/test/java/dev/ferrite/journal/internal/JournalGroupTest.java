package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Journal#pin}: every commit made while a group holds the context lands in it, whoever commits and
 * whoever forces meanwhile, so the group is one checkpoint; its holder's own forces and throttles do not
 * wait for it.
 */
class JournalGroupTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 256);

    private static long commit(Journal j, TestItem it, int counter) {
        it.lock.lock();
        try {
            Transaction tx = j.begin(Reservation.items(1));
            it.add(tx, counter, 1);
            return tx.commit();
        } finally {
            it.lock.unlock();
        }
    }

    @Test
    void aForceMeanwhileWaitsForTheGroupAndItsCommitsShareOneCheckpoint() throws Exception {
        try (Arena arena = Arena.ofShared(); MemoryDevice dev = MemoryDevice.create(2048, BS)) {
            Journal.format(dev, G);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(100, BS, arena), b = new TestItem(101, BS, arena), c = new TestItem(102, BS, arena);
                long first, last;
                AtomicLong forced = new AtomicLong(-1);
                Thread forcer;
                try (Journal.Pin pin = j.pin()) {
                    first = commit(j, a, 0);
                    assertEquals(pin.seq(), first);
                    forcer = new Thread(() -> {
                        long s = commit(j, c, 0); // another thread's commit joins the pinned context
                        j.force(s);
                        forced.set(s);
                    });
                    forcer.start();
                    while (forcer.getState() != Thread.State.WAITING && forcer.getState() != Thread.State.TIMED_WAITING) {
                        Thread.onSpinWait(); // until the force waits for the push, which waits for the pin
                    }
                    assertEquals(-1, forced.get(), "a force returned while the group held its context");
                    last = commit(j, b, 0);
                    assertTrue(pin.contextBytes() > pin.bytes() && pin.bytes() > 0, "the group's own bytes, and the context's with the other thread's");
                }
                forcer.join(10_000);
                assertEquals(first, last, "the group's commits landed in different contexts");
                assertEquals(first, forced.get(), "the other thread's commit during the group is in the group's context");
                assertTrue(j.durableSeq() >= first);
            }
        }
    }

    /**
     * {@link Journal#pin(long, int)} pins a context holding at most that many items: a fuller one is pushed
     * first and the next pinned, so the group's blocks and those logged before it never fill a cache. Pinned
     * as {@link Journal#pin()} is, the group held the context of the three items committed before it.
     */
    @Test
    void aGroupStartsOnAContextHoldingAtMostItsItems() {
        try (Arena arena = Arena.ofShared(); MemoryDevice dev = MemoryDevice.create(2048, BS)) {
            Journal.format(dev, G);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(100, BS, arena), b = new TestItem(101, BS, arena), c = new TestItem(102, BS, arena);
                long before = commit(j, a, 0);
                commit(j, b, 0);
                commit(j, c, 0);
                assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
                    try (Journal.Pin pin = j.pin(0, 2)) {
                        assertTrue(pin.seq() > before, "the group pinned the context of the three items before it");
                        assertEquals(0, pin.contextItems());
                        assertEquals(pin.seq(), commit(j, a, 1));
                        assertEquals(1, pin.contextItems());
                    }
                    try (Journal.Pin pin = j.pin(0, 2)) {
                        assertEquals(1, pin.contextItems(), "a context of one item is pinned as it is");
                    }
                });
            }
        }
    }

    @Test
    void theHolderForcesWhatCameBeforeAndNeverWaitsForItself() {
        try (Arena arena = Arena.ofShared(); MemoryDevice dev = MemoryDevice.create(2048, BS)) {
            Journal.format(dev, G);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(100, BS, arena), b = new TestItem(101, BS, arena);
                long before = commit(j, a, 0);
                j.force(before);
                long next = commit(j, a, 1); // in the context the group will pin
                assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
                    try (Journal.Pin pin = j.pin()) {
                        long inside = commit(j, b, 0);
                        assertEquals(next, inside);
                        assertEquals(pin.seq(), inside);
                        long durable = j.forceAll();
                        assertEquals(pin.seq() - 1, durable, "forceAll inside a group forces what came before its context");
                        assertTrue(j.durableSeq() >= before);
                        j.throttle(inside); // never waits on its own context
                        assertThrows(IllegalStateException.class, () -> j.force(inside));
                        assertThrows(IllegalStateException.class, j::pin, "a second group on one thread");
                    }
                    j.forceAll();
                });
                assertTrue(j.durableSeq() >= next);
            }
        }
    }
}
