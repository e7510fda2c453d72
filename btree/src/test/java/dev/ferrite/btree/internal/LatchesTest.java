package dev.ferrite.btree.internal;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.ToLongFunction;

import dev.ferrite.btree.LatchStats;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** The per-level contention counters: each kind counted where it happens, at the level of the node it met. */
@Timeout(value = 1, unit = TimeUnit.MINUTES)
class LatchesTest {
    private static final int LEAF = 0;

    private static Store store(MemoryDevice dev) {
        return Store.format(dev, 1024, 8L << 20);
    }

    private static Buffer root(Store s) {
        return s.tree.node(BTreeHeaderFormat.root(s.tree.header().data()));
    }

    /** Waits until {@code count} of the cache's latch stats reaches {@code n}. */
    private static void awaitCount(Store s, ToLongFunction<LatchStats> count, long n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (count.applyAsLong(s.cache.latchStats()) < n) {
            if (System.nanoTime() - deadline > 0) {
                fail("count still " + count.applyAsLong(s.cache.latchStats()) + ", not " + n);
            }
            Thread.sleep(1);
        }
    }

    @Test
    void aReaderThatFindsANodeLockedWaitsAndIsCountedAtThatNodesLevel() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = store(dev)) {
            for (long k = 0; k < 2000; k++) {
                s.tree.put(Keys.ofLong(k), Keys.ofLong(k));
            }
            assertEquals(2, s.tree.height());
            LatchStats before = s.cache.latchStats();
            Buffer root = root(s);
            assertTrue(root.lock());
            byte[][] got = new byte[1][];
            Thread reader = new Thread(() -> got[0] = s.tree.get(Keys.ofLong(7)));
            reader.start();
            awaitCount(s, l -> l.waits()[1], before.waits()[1] + 1);
            root.unlockUnchanged();
            reader.join();
            assertArrayEquals(Keys.ofLong(7), got[0]);
            LatchStats d = s.cache.latchStats().since(before);
            assertTrue(d.waits()[1] >= 1, "a wait at level 1, the root (the AIL may add its own)");
            assertEquals(0, d.waits()[LEAF]);
            assertEquals(0, d.waits()[d.headerIndex()]);

            Buffer header = s.tree.header();
            assertTrue(header.lock());
            reader = new Thread(() -> got[0] = s.tree.get(Keys.ofLong(1999)));
            reader.start();
            awaitCount(s, l -> l.waits()[l.headerIndex()], 1);
            header.unlockUnchanged();
            reader.join();
            assertArrayEquals(Keys.ofLong(1999), got[0]);
        }
    }

    /** A wait on a block that is neither a node nor a header counts as other, and again under its kind (magic). */
    @Test
    void aWaitOnAnotherBlockIsCountedUnderItsKind() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = store(dev)) {
            s.tree.put(Keys.ofLong(1), Keys.ofLong(1));
            Buffer bitmap = s.cache.cached(s.bitmapStart);
            assertNotNull(bitmap, "the allocator's first bitmap block is cached");
            LatchStats before = s.cache.latchStats();
            assertTrue(bitmap.lock());
            Thread reader = new Thread(bitmap::readVersion);
            reader.start();
            int other = before.waits().length - 1;
            awaitCount(s, l -> l.waits()[other], before.waits()[other] + 1);
            bitmap.unlockUnchanged();
            reader.join();
            LatchStats d = s.cache.latchStats().since(before);
            assertEquals(d.waits()[other], d.otherWaits().getOrDefault("FBMP", 0L), d.toString());
            assertEquals(java.util.Set.of("FBMP"), d.otherWaits().keySet(), d.toString());
            assertEquals("FBMP", LatchStats.kind(BitmapFormat.MAGIC));
            assertEquals("00000001", LatchStats.kind(1), "not printable: in hex");
        }
    }

    @Test
    void aLockInPlaceThatLosesToAnotherWriterIsCountedAtTheLeaf() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = store(dev)) {
            s.tree.put(Keys.ofLong(1), Keys.ofLong(1));
            Buffer leaf = root(s);
            long v = leaf.readVersion();
            s.tree.put(Keys.ofLong(2), Keys.ofLong(2)); // changes the leaf after v was read
            LatchStats before = s.cache.latchStats();
            try (Txn txn = Txn.begin(s.cache, 2)) {
                assertFalse(txn.tryUpgrade(leaf, v));
            }
            LatchStats d = s.cache.latchStats().since(before);
            assertEquals(1, d.lockFailures()[LEAF]);
            assertEquals(1, sum(d.lockFailures()));
            assertEquals(0, sum(d.restarts()));
        }
    }

    @Test
    void readersRacingAWriterInTheirLeafRestartAndAreCounted() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = store(dev)) {
            for (long k = 0; k < 50; k++) {
                s.tree.put(Keys.ofLong(k), Keys.ofLong(k));
            }
            assertEquals(1, s.tree.height());
            AtomicBoolean stop = new AtomicBoolean();
            Thread writer = new Thread(() -> {
                for (long i = 0; !stop.get(); i++) {
                    s.tree.put(Keys.ofLong(i % 50), Keys.ofLong(i));
                }
            });
            writer.start();
            try {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                for (long i = 0; s.cache.latchStats().restarts()[LEAF] == 0; i++) {
                    assertEquals(8, s.tree.get(Keys.ofLong(i % 50)).length);
                    if (System.nanoTime() - deadline > 0) {
                        fail("no restart counted in " + i + " reads racing a writer of their leaf");
                    }
                }
            } finally {
                stop.set(true);
                writer.join();
            }
            assertEquals(0, s.cache.latchStats().restarts()[1], "a tree of one leaf has no level 1");
        }
    }

    @Test
    void statsCompareByTheirCounts() {
        LatchStats a = new LatchStats(new long[] {1, 2, 3}, new long[] {0, 0, 0}, new long[] {4, 0, 1});
        LatchStats b = new LatchStats(new long[] {1, 2, 3}, new long[] {0, 0, 0}, new long[] {4, 0, 1});
        assertEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode());
        assertEquals(new LatchStats(new long[3], new long[3], new long[3]), b.since(a));
        assertFalse(a.equals(new LatchStats(new long[] {1, 2, 3}, new long[] {0, 0, 0}, new long[] {4, 0, 2})));
    }

    private static long sum(long[] a) {
        long n = 0;
        for (long x : a) {
            n += x;
        }
        return n;
    }
}
