package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Threads running gets, puts, putIfAbsents, deletes and forward and reverse cursor scans on one tree.
 * Each worker owns a partition of the key space (keys starting with its own byte), keeps an exact model
 * of it and checks every result against it, scans of its partition included. All workers also change a
 * shared hot range, where only invariants can be checked: a value always encodes the key it is stored
 * under and its own length (so a torn read, or a value of another key, is caught), and every scan returns
 * strictly ordered keys with self-consistent values. At the end the tree checks clean and holds exactly
 * the merged models plus hot keys whose values some worker wrote, and again after close and reopen.
 *
 * <p>A watchdog fails the test with every thread's stack if the workers do not finish in time.
 * {@code -Dferrite.seed=N} picks the seed (thread interleavings still vary from run to run).
 */
@ExtendWith(TestSeed.class)
class BTreeConcurrencyTest {
    static final long SEED = TestSeed.get(7);
    static final byte HOT = (byte) 0x80;
    static final int LOG_BLOCKS = 2048;
    /** Extra time the workers get to notice the deadline before the watchdog declares them stuck. */
    static final long GRACE_MILLIS = 60_000;

    /**
     * @param ownKeys    keys in each worker's partition
     * @param hotKeys    keys in the shared range
     * @param keyPad     bytes every key carries between its partition byte and its number: long pads
     *                   make long separators, so interior nodes fill and split after a few keys
     * @param maxValue   longest value (at least {@link #VALUE_HEADER})
     * @param prefill    share of each partition's keys put before the workers start
     * @param cacheBytes buffer cache budget
     * @param dataBlocks blocks the allocator hands out: few make it wrap around and reuse freed blocks soon
     */
    record Workload(String name, int threads, int ownKeys, int hotKeys, int keyPad, int maxValue, double prefill,
                    long millis, long cacheBytes, int dataBlocks) {
    }

    @Test
    void mixedOperationsOnFourThreads() {
        run(new Workload("mixed", 4, 3000, 300, 8, 200, 0.3, 1500, 8L << 20, 12_000));
    }

    /** A few dozen long keys: four per leaf, four separators per interior node, splits and merges up to the root. */
    @Test
    void splitsAndMergesNearTheRoot() {
        run(new Workload("root churn", 4, 12, 24, 900, 90, 0.5, 1500, 8L << 20, 300));
    }

    /** A tree of hundreds of nodes in a cache of 64 blocks: buffers evicted and read back under the readers. */
    @Test
    void smallCache() {
        run(new Workload("small cache", 3, 1000, 100, 40, 900, 0.6, 1200, BufferCache.MIN_FRAMES * 4096L, 4000));
    }

    @Test
    @Tag("stress")
    void stress() {
        long millis = Long.getLong("ferrite.stress.millis", 20_000);
        for (int threads : new int[] {2, 3, 8}) {
            run(new Workload("mixed x" + threads, threads, 20_000, 1000, 16, 400, 0.3, millis, 16L << 20, 60_000));
            run(new Workload("root churn x" + threads, threads, 16, 32, 900, 90, 0.5, millis, 8L << 20, 300));
            run(new Workload("small cache x" + threads, threads, 3000, 300, 40, 900, 0.5, millis, 96L * 4096, 8000));
        }
    }

    /**
     * The race of a reader that follows a pointer to a node just freed by a merge, played step by step:
     * the reader finds the block no longer cached and reads its old home image, which verifies. That
     * copy must not stop the block from being allocated again.
     */
    @Test
    void aReaderFollowingAStalePointerDoesNotBlockReuseOfTheFreedBlock() {
        try (MemoryDevice dev = MemoryDevice.create(1 + 256 + 1 + 48, 4096); Store s = Store.format(dev, 256, 1 << 20)) {
            TreeMap<byte[], byte[]> model = Contents.empty();
            for (int n = 0; n < 120; n++) {
                byte[] k = key((byte) 1, 8, n);
                model.put(k, value(k, n, 200));
                s.tree.put(k, model.get(k));
            }
            s.journal.quiesce(); // every node is home, so a freed one still reads back as a valid node
            Set<Long> before = s.nodes().keySet();
            long freed = -1;
            for (int n = 0; n < 120 && freed < 0; n++) {
                byte[] k = key((byte) 1, 8, n);
                s.tree.delete(k);
                model.remove(k);
                Set<Long> now = s.nodes().keySet();
                for (long b : before) {
                    if (!now.contains(b)) {
                        freed = b;
                    }
                }
            }
            assertTrue(freed > 0, "no deletion merged two leaves");
            // the reader with the stale pointer
            Buffer stale = s.cache.get(freed, BTreeNodeFormat.MAGIC, Store.TREE_ID, BTree.NODE);
            assertTrue(stale.readVersion() >= 0);
            s.journal.forceAll(); // the frees are durable; once the AIL has their checkpoint the block is free to reuse
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (s.cache.isBusy(freed)) { // the log I/O thread hands the checkpoint to the AIL after the force returns
                assertTrue(System.nanoTime() < deadline, "block " + freed + " still busy 10 s after the force");
                LockSupport.parkNanos(100_000);
            }
            for (int n = 1000; !s.nodes().containsKey(freed); n++) {
                assertTrue(n < 1400, "block " + freed + " was never allocated again");
                byte[] k = key((byte) 1, 8, n);
                model.put(k, value(k, n, 200));
                s.tree.put(k, model.get(k));
                byte[] gone = model.pollFirstEntry().getKey();
                s.tree.delete(gone);
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            Contents.assertEqual(model, s.contents(), "after reusing block " + freed);
        }
    }

    // ------------------------------------------------------------------ keys and values

    static byte partition(int worker) {
        return (byte) (0x10 + worker);
    }

    /** Partition byte, pad, the number big-endian, then 0..4 bytes more so lengths vary. */
    static byte[] key(byte partition, int pad, int n) {
        byte[] k = new byte[1 + pad + 4 + n % 5];
        k[0] = partition;
        Arrays.fill(k, 1, 1 + pad, (byte) 'k');
        for (int i = 0; i < 4; i++) {
            k[1 + pad + i] = (byte) (n >>> (24 - 8 * i));
        }
        Arrays.fill(k, 1 + pad + 4, k.length, (byte) n);
        return k;
    }

    static final int VALUE_HEADER = 18;

    /** {@code [stamp u64][hash of key u64][length u16][filler derived from stamp and hash]}. */
    static byte[] value(byte[] key, long stamp, int length) {
        byte[] v = new byte[length];
        long h = Contents.hash(key);
        putLong(v, 0, stamp);
        putLong(v, 8, h);
        v[16] = (byte) (length >>> 8);
        v[17] = (byte) length;
        for (int i = VALUE_HEADER; i < length; i++) {
            v[i] = filler(stamp, h, i);
        }
        return v;
    }

    /** The stamp of a value, checked to belong to {@code key} and to be whole; null if it is not. */
    static String valueProblem(byte[] key, byte[] v) {
        if (v.length < VALUE_HEADER) {
            return "value of " + v.length + " bytes is shorter than its header";
        }
        long stamp = getLong(v, 0);
        long h = Contents.hash(key);
        if (getLong(v, 8) != h) {
            return "value (stamp " + Long.toHexString(stamp) + ") belongs to another key";
        }
        int len = (v[16] & 0xFF) << 8 | v[17] & 0xFF;
        if (len != v.length) {
            return "value (stamp " + Long.toHexString(stamp) + ") of " + v.length + " bytes says " + len;
        }
        for (int i = VALUE_HEADER; i < len; i++) {
            if (v[i] != filler(stamp, h, i)) {
                return "value (stamp " + Long.toHexString(stamp) + ") is mixed from several writes at byte " + i;
            }
        }
        return null;
    }

    private static byte filler(long stamp, long h, int i) {
        long x = (stamp ^ h) + i * 0x9E37_79B9_7F4A_7C15L;
        return (byte) (x ^ x >>> 29);
    }

    private static void putLong(byte[] b, int at, long v) {
        for (int i = 0; i < 8; i++) {
            b[at + i] = (byte) (v >>> (56 - 8 * i));
        }
    }

    static long getLong(byte[] b, int at) {
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = v << 8 | b[at + i] & 0xFF;
        }
        return v;
    }

    // ------------------------------------------------------------------ the run

    private void run(Workload w) {
        String where = "workload " + w.name() + ", seed " + SEED;
        // block 0, the log, one or two bitmap blocks, the data blocks
        try (MemoryDevice dev = MemoryDevice.create(1 + LOG_BLOCKS + 2 + w.dataBlocks(), 4096)) {
            Store s = Store.format(dev, LOG_BLOCKS, w.cacheBytes());
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Worker[] workers = new Worker[w.threads()];
            Thread[] threads = new Thread[w.threads()];
            for (int t = 0; t < w.threads(); t++) {
                workers[t] = new Worker(s.tree, w, t, stop, where);
                workers[t].prefill();
            }
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(w.millis());
            for (int t = 0; t < w.threads(); t++) {
                workers[t].deadline = deadline;
                threads[t] = new Thread(workers[t], "btree-conc-" + t);
                threads[t].setDaemon(true); // a stuck worker must not keep the test JVM alive
                threads[t].setUncaughtExceptionHandler((th, e) -> {
                    failure.compareAndSet(null, e);
                    stop.set(true);
                });
            }
            for (Thread th : threads) {
                th.start();
            }
            long limit = deadline + TimeUnit.MILLISECONDS.toNanos(GRACE_MILLIS);
            for (Thread th : threads) {
                try {
                    th.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(limit - System.nanoTime())));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(where + ": interrupted", e);
                }
            }
            for (Thread th : threads) {
                if (th.isAlive()) {
                    String dump = threadDump();
                    stop.set(true);
                    // the store stays open: stuck threads may still be inside it
                    throw new AssertionError(where + ": workers still running " + GRACE_MILLIS + " ms after the deadline;"
                            + " journal: " + s.journal.diagnostics() + "\n" + dump);
                }
            }
            if (failure.get() != null) {
                s.journal.close();
                throw new AssertionError(where + ": a worker failed: " + failure.get(), failure.get());
            }
            long ops = 0;
            for (Worker wk : workers) {
                ops += wk.ops;
            }
            assertTrue(ops > 0, where + ": no operation ran");

            TreeMap<byte[], byte[]> contents = verifyEnd(s, workers, where);
            System.out.println(where + ": " + ops + " operations on " + w.threads() + " threads, "
                    + s.tree.check() + ", " + s.cache.stats());
            s.close();
            try (Store r = Store.open(dev, LOG_BLOCKS, w.cacheBytes())) {
                TreeCheck c = r.tree.check();
                assertTrue(c.ok(), where + ", after reopening: " + c);
                Contents.assertEqual(contents, r.contents(), where + ", after reopening");
            }
        }
    }

    /** The end state: the checker, every private model exactly, hot keys with values written to them. */
    private static TreeMap<byte[], byte[]> verifyEnd(Store s, Worker[] workers, String where) {
        TreeCheck c = s.tree.check();
        assertTrue(c.ok(), where + ": " + c);
        TreeMap<byte[], byte[]> contents = s.contents();
        assertEquals(contents.size(), c.keys(), where + ": the cursor and the checker count different keys");
        TreeMap<byte[], byte[]> expected = Contents.empty();
        Set<Long> hotStamps = new HashSet<>();
        for (Worker wk : workers) {
            expected.putAll(wk.model);
            hotStamps.addAll(wk.hotStamps);
        }
        TreeMap<byte[], byte[]> own = Contents.empty();
        for (Map.Entry<byte[], byte[]> e : contents.entrySet()) {
            byte[] k = e.getKey();
            if (k[0] == HOT) {
                String problem = valueProblem(k, e.getValue());
                assertTrue(problem == null, () -> where + ": hot key " + Contents.hex(k) + ": " + problem);
                assertTrue(hotStamps.contains(getLong(e.getValue(), 0)),
                        () -> where + ": hot key " + Contents.hex(k) + " holds a value no worker wrote");
            } else {
                own.put(k, e.getValue());
            }
        }
        Contents.assertEqual(expected, own, where + ": partitions against the merged models");
        return contents;
    }

    static String threadDump() {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            sb.append('"').append(e.getKey().getName()).append("\" ").append(e.getKey().getState()).append('\n');
            for (StackTraceElement f : e.getValue()) {
                sb.append("    at ").append(f).append('\n');
            }
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------ workers

    private static final class Worker implements Runnable {
        final BTree tree;
        final Workload w;
        final int id;
        final byte part;
        final AtomicBoolean stop;
        long deadline;
        final String where;
        final Random rnd;
        final TreeMap<byte[], byte[]> model = Contents.empty();
        final List<Long> hotStamps = new ArrayList<>();
        long seq;
        long ops;
        String op = "";

        Worker(BTree tree, Workload w, int id, AtomicBoolean stop, String where) {
            this.tree = tree;
            this.w = w;
            this.id = id;
            this.part = partition(id);
            this.stop = stop;
            this.where = where;
            this.rnd = new Random(SEED * 1_000_003 + id);
        }

        /** Puts a share of the partition, and of the hot range, before the clock starts. */
        void prefill() {
            for (int n = 0; n < w.ownKeys(); n++) {
                if (rnd.nextDouble() < w.prefill()) {
                    byte[] k = key(part, w.keyPad(), n);
                    byte[] v = newValue(k, null);
                    put(k, v, false);
                    model.put(k, v);
                }
            }
            for (int n = id; n < w.hotKeys(); n += w.threads()) {
                if (rnd.nextDouble() < w.prefill()) {
                    byte[] k = key(HOT, w.keyPad(), n);
                    put(k, newHotValue(k), false);
                }
            }
        }

        @Override
        public void run() {
            try {
                while (!stop.get() && ((ops & 15) != 0 || System.nanoTime() < deadline)) {
                    step();
                    ops++;
                }
            } catch (Throwable e) {
                throw new AssertionError(where + ", worker " + id + ", operation " + ops + " (" + op + "): " + e, e);
            }
        }

        private void step() {
            int dice = rnd.nextInt(100);
            if (dice < 22) {
                byte[] k = ownKey();
                op = "get " + Contents.hex(k);
                check(k, model.get(k), tree.get(k));
            } else if (dice < 30) {
                byte[] k = hotKey();
                op = "get hot " + Contents.hex(k);
                byte[] v = tree.get(k);
                if (v != null && valueProblem(k, v) != null) {
                    fail(valueProblem(k, v));
                }
            } else if (dice < 52) {
                boolean ifAbsent = dice >= 47;
                byte[] k = ownKey();
                byte[] v = newValue(k, model.get(k));
                op = (ifAbsent ? "putIfAbsent " : "put ") + Contents.hex(k);
                boolean added = put(k, v, ifAbsent);
                expect(!model.containsKey(k), added, op + " says new");
                if (added || !ifAbsent) {
                    model.put(k, v);
                }
            } else if (dice < 64) {
                byte[] k = ownKey();
                op = "delete " + Contents.hex(k);
                expect(model.remove(k) != null, tree.delete(k) >= 0, "delete says found");
            } else if (dice < 69) {
                byte[] k = hotKey();
                op = "put hot " + Contents.hex(k);
                put(k, newHotValue(k), rnd.nextInt(4) == 0);
            } else if (dice < 73) {
                byte[] k = hotKey();
                op = "delete hot " + Contents.hex(k);
                tree.delete(k);
            } else if (dice < 86) {
                ownScan(rnd.nextBoolean());
            } else {
                globalScan(rnd.nextBoolean());
            }
        }

        private byte[] ownKey() {
            return key(part, w.keyPad(), rnd.nextInt(w.ownKeys()));
        }

        private byte[] hotKey() {
            return key(HOT, w.keyPad(), rnd.nextInt(w.hotKeys()));
        }

        /** A fresh value; often as long as the old one, so that replacing it takes the in-place path. */
        private byte[] newValue(byte[] k, byte[] old) {
            int len = old != null && rnd.nextInt(3) == 0 ? old.length
                    : VALUE_HEADER + rnd.nextInt(w.maxValue() - VALUE_HEADER + 1);
            return value(k, (long) (id + 1) << 40 | ++seq, len);
        }

        private byte[] newHotValue(byte[] k) {
            byte[] v = newValue(k, null);
            hotStamps.add(getLong(v, 0));
            return v;
        }

        private boolean put(byte[] k, byte[] v, boolean ifAbsent) {
            try (Txn txn = Txn.begin(tree.cache(), tree.reservation())) {
                MemorySegment ks = MemorySegment.ofArray(k), vs = MemorySegment.ofArray(v);
                boolean r = ifAbsent ? tree.putIfAbsent(txn, ks, vs) : tree.put(txn, ks, vs);
                txn.commit();
                return r;
            }
        }

        /** A scan from a random key of this worker's partition to its end (or start): exactly the model's. */
        private void ownScan(boolean reverse) {
            byte[] from = ownKey();
            int limit = 1 + rnd.nextInt(60);
            op = (reverse ? "reverse" : "forward") + " scan of the partition from " + Contents.hex(from);
            Map<byte[], byte[]> view = reverse ? model.headMap(from, true).descendingMap() : model.tailMap(from, true);
            var expected = view.entrySet().iterator();
            Cursor c = tree.cursor(from, reverse);
            for (int n = 0; n < limit; n++) {
                boolean more = c.next() && c.key()[0] == part;
                if (!more) {
                    if (expected.hasNext()) {
                        fail("the scan ends before " + Contents.hex(expected.next().getKey()));
                    }
                    return;
                }
                byte[] k = c.key();
                if (!expected.hasNext()) {
                    fail("the scan returns " + Contents.hex(k) + " after the last key");
                }
                Map.Entry<byte[], byte[]> e = expected.next();
                if (!Arrays.equals(e.getKey(), k)) {
                    fail("the scan returns " + Contents.hex(k) + " where " + Contents.hex(e.getKey()) + " is");
                }
                check(k, e.getValue(), c.value());
            }
        }

        /** A scan across partitions and the hot range: strictly ordered, values whole, this partition's as modelled. */
        private void globalScan(boolean reverse) {
            byte[] from = rnd.nextInt(4) == 0 ? null
                    : key(rnd.nextBoolean() ? HOT : partition(rnd.nextInt(w.threads())), w.keyPad(), rnd.nextInt(100));
            int limit = 1 + rnd.nextInt(200);
            op = (reverse ? "reverse" : "forward") + " scan from " + (from == null ? "the end" : Contents.hex(from));
            Cursor c = tree.cursor(from, reverse);
            byte[] prev = from;
            boolean inclusive = true;
            for (int n = 0; n < limit && c.next(); n++) {
                byte[] k = c.key();
                if (prev != null) {
                    int cmp = Keys.compare(k, prev);
                    if (reverse ? cmp > 0 || cmp == 0 && !inclusive : cmp < 0 || cmp == 0 && !inclusive) {
                        fail("the scan returns " + Contents.hex(k) + " after " + Contents.hex(prev));
                    }
                }
                prev = k;
                inclusive = false;
                byte[] v = c.value();
                if (k[0] == part) {
                    check(k, model.get(k), v);
                } else if (valueProblem(k, v) != null) {
                    fail("key " + Contents.hex(k) + ": " + valueProblem(k, v));
                }
            }
        }

        private void check(byte[] k, byte[] expected, byte[] actual) {
            if (!Arrays.equals(expected, actual)) {
                fail("key " + Contents.hex(k) + " reads " + (actual == null ? "absent" : describe(k, actual)) + ", the model has "
                        + (expected == null ? "it absent" : describe(k, expected)));
            }
        }

        private static String describe(byte[] k, byte[] v) {
            String p = valueProblem(k, v);
            return v.length + " bytes, stamp " + (v.length >= 8 ? Long.toHexString(getLong(v, 0)) : "?")
                    + (p == null ? "" : " (" + p + ")");
        }

        private void expect(boolean expected, boolean actual, String what) {
            if (expected != actual) {
                fail(what + " " + actual + ", the model says " + expected);
            }
        }

        private static void fail(String problem) {
            throw new AssertionError(problem);
        }
    }
}
