package dev.ferrite.btree.internal;

import dev.ferrite.btree.CacheStats;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A tree many times the size of a cache of {@link BufferCache#MIN_FRAMES} frames and a few more, written
 * in transactions of several changes while a reader scans it: every result must still be right, the
 * checker clean, and nothing may stall (a watchdog fails the test with the cache's and the journal's
 * state). The cache must have evicted, and must have waited for the journal to write dirty buffers
 * home: back-pressure, not growth or failure.
 */
@ExtendWith(TestSeed.class)
class BTreeCachePressureTest {
    private static final long SEED = TestSeed.get(0x5EED_CAC4EL);
    private static final int BLOCK_SIZE = 4096;
    private static final int LOG_BLOCKS = 1024;
    private static final long CACHE_BYTES = (BufferCache.MIN_FRAMES + 16L) * BLOCK_SIZE;
    private static final int MAX_TXN_OPS = 8;

    @Test
    void smallCacheLargeTransactions() {
        run(SEED, 6_000, Duration.ofSeconds(90));
    }

    @Tag("stress")
    @Test
    void smallCacheLargeTransactionsLong() {
        run(SEED, 60_000, Duration.ofMinutes(15));
    }

    private void run(long seed, int keys, Duration limit) {
        ProbeDevice device = new ProbeDevice(32768, BLOCK_SIZE);
        Store[] store = {Store.format(device, LOG_BLOCKS, CACHE_BYTES)};
        String where = "cache pressure run with -Dferrite.seed=" + seed;
        try {
            NavigableMap<byte[], byte[]> model = new TreeMap<>(Keys::compare);
            assertTimeoutPreemptively(limit, () -> workload(store[0], model, seed, keys),
                    () -> where + " stalled: " + store[0].cache.stats() + "; journal: " + store[0].journal.diagnostics());
            CacheStats stats = store[0].cache.stats();
            System.out.println(where + ": " + model.size() + " keys left, " + stats + ", " + store[0].journal.stats());
            assertTrue(stats.leafEvictions() > 0, where + ": no leaf was evicted: " + stats);
            assertTrue(stats.dirtyWaits() > 0, where + ": no miss waited for write-back: " + stats);
            assertTrue(stats.writeBacks() > 0, where + ": nothing was written back: " + stats);
            assertTrue(stats.misses() > 10L * stats.frames(), where + ": the tree fitted the cache: " + stats);
            store[0].close();
            store[0] = Store.open(device, LOG_BLOCKS, CACHE_BYTES);
            compare(store[0].tree, model, where + ", after reopening");
        } finally {
            store[0].close();
            device.close();
        }
    }

    /** Grows the tree, churns it, then deletes most of it, in transactions of ascending keys, with a reader running. */
    private void workload(Store s, NavigableMap<byte[], byte[]> model, long seed, int keys) throws InterruptedException {
        BTree tree = s.tree;
        Random rnd = new Random(seed);
        AtomicReference<Throwable> readerFailure = new AtomicReference<>();
        int version = 0;
        for (int phase = 0; phase < 3; phase++) {
            long readerSeed = seed + phase;
            Thread reader = Thread.ofPlatform().name("pressure-reader").start(() -> read(tree, readerSeed, readerFailure));
            try {
                int putPercent = phase == 0 ? 90 : phase == 1 ? 50 : 10;
                int target = phase == 2 ? keys / 4 : keys;
                for (int txns = 0; phase == 1 ? txns < keys / MAX_TXN_OPS : phase == 0 ? model.size() < target
                        : model.size() > target; txns++) {
                    TreeMap<byte[], Boolean> batch = new TreeMap<>(Keys::compare);
                    for (int n = 2 + rnd.nextInt(MAX_TXN_OPS - 1); batch.size() < n; ) {
                        boolean put = rnd.nextInt(100) < putPercent;
                        byte[] k = put || model.isEmpty() ? key(rnd) : existing(model, rnd);
                        batch.put(k, put);
                    }
                    version++;
                    try (Txn txn = Txn.begin(s.cache, batch.size() * (tree.reservation() + 4))) {
                        for (Map.Entry<byte[], Boolean> e : batch.entrySet()) {
                            byte[] k = e.getKey();
                            if (e.getValue()) {
                                byte[] v = value(k, version, rnd);
                                boolean fresh = tree.put(txn, MemorySegment.ofArray(k), MemorySegment.ofArray(v));
                                assertEquals(model.put(k, v) == null, fresh, "put said new");
                            } else {
                                boolean found = tree.delete(txn, MemorySegment.ofArray(k));
                                assertEquals(model.remove(k) != null, found, "delete found");
                            }
                        }
                        txn.commit();
                    }
                    if (readerFailure.get() != null) {
                        throw new AssertionError("the reader failed", readerFailure.get());
                    }
                }
            } finally {
                reader.interrupt();
                reader.join();
            }
            if (readerFailure.get() != null) {
                throw new AssertionError("the reader failed", readerFailure.get());
            }
            // the checker reads nodes without validating them: a reader's misses would evict them under it
            TreeCheck c = tree.check();
            assertTrue(c.ok(), c.toString());
            assertEquals(model.size(), c.keys(), "keys after phase " + phase);
        }
        assertFalse(s.journal.isShutdown());
        compare(tree, model, "after the workload");
    }

    /** Gets and short scans from random places, checking each value belongs to its key and keys ascend. */
    private static void read(BTree tree, long seed, AtomicReference<Throwable> failure) {
        Random rnd = new Random(seed);
        try {
            while (!Thread.currentThread().isInterrupted()) {
                byte[] k = key(rnd);
                byte[] v = tree.get(k);
                if (v != null) {
                    checkValue(k, v);
                }
                Cursor c = tree.cursor(key(rnd), rnd.nextBoolean());
                byte[] prev = null;
                for (int i = 0; i < 32 && c.next(); i++) {
                    byte[] ck = c.key();
                    checkValue(ck, c.value());
                    if (prev != null && Keys.compare(prev, ck) == 0) {
                        throw new AssertionError("a cursor returned " + Arrays.toString(ck) + " twice");
                    }
                    prev = ck;
                }
            }
        } catch (Throwable t) {
            if (!(t.getCause() instanceof InterruptedException)) { // stopped while waiting for a clean buffer
                failure.set(t);
            }
        }
    }

    private static void compare(BTree tree, NavigableMap<byte[], byte[]> model, String where) {
        TreeCheck c = tree.check();
        assertTrue(c.ok(), where + ": " + c);
        assertEquals(model.size(), c.keys(), where);
        Cursor cur = tree.cursor(null, false);
        for (Map.Entry<byte[], byte[]> e : model.entrySet()) {
            assertTrue(cur.next(), where + ": the scan ended early");
            assertArrayEquals(e.getKey(), cur.key(), where);
            assertArrayEquals(e.getValue(), cur.value(), where);
            assertArrayEquals(e.getValue(), tree.get(e.getKey()), where);
        }
        assertFalse(cur.next(), where + ": the scan found more keys");
    }

    /** An 8-byte number below 2^20 and up to 24 more bytes: about 200 keys per leaf at most. */
    private static byte[] key(Random rnd) {
        byte[] k = Arrays.copyOf(Keys.ofLong(rnd.nextInt(1 << 20)), 8 + rnd.nextInt(25));
        for (int i = 8; i < k.length; i++) {
            k[i] = (byte) rnd.nextInt(4);
        }
        return k;
    }

    private static byte[] existing(NavigableMap<byte[], byte[]> model, Random rnd) {
        byte[] k = model.ceilingKey(key(rnd));
        return k != null ? k : model.firstKey();
    }

    /** 40 to 400 bytes: the key's hash, a version, then bytes that follow from both. */
    private static byte[] value(byte[] key, int version, Random rnd) {
        byte[] v = new byte[40 + rnd.nextInt(361)];
        int h = Arrays.hashCode(key);
        for (int i = 0; i < v.length; i++) {
            v[i] = (byte) (i < 4 ? h >>> (8 * i) : i == 4 ? version : h + version * 31 + i);
        }
        return v;
    }

    private static void checkValue(byte[] key, byte[] v) {
        int h = Arrays.hashCode(key);
        int version = v.length > 4 ? v[4] : 0;
        for (int i = 0; i < v.length; i++) {
            byte expected = (byte) (i < 4 ? h >>> (8 * i) : i == 4 ? version : h + version * 31 + i);
            if (v[i] != expected) {
                throw new AssertionError("value of " + v.length + " bytes read for key " + Arrays.toString(key)
                        + " is not that key's: byte " + i);
            }
        }
    }
}
