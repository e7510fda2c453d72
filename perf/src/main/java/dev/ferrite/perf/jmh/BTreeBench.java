package dev.ferrite.perf.jmh;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.perf.bench.BTreeStore;
import dev.ferrite.perf.bench.KvKeys;

/**
 * The B-tree on {@value #KEYS} keys of {@code bench kv}'s kind (16-40 bytes in hashed order, 64-byte
 * values) in a RAM device, every block cached, at 1 and 2 threads: {@code get} of a random key into a
 * caller's buffer; {@code put} replacing a random key's value with one as long, in a transaction of its
 * own, committed but not forced (checkpoints and write-back run in the background); {@code scan}, a
 * full forward scan reading every value, reported per entry. Keys sit in native segments made once.
 */
@State(Scope.Benchmark)
public class BTreeBench extends JmhDefaults {
    static final int KEYS = 100_000;
    private static final int BLOCK = 4096;
    private static final int LOG_BLOCKS = 16_384;
    private static final int DATA_BLOCKS = 16_384;

    private Arena arena;
    private MemoryDevice device;
    private BTreeStore store;
    private BTree tree;
    private MemorySegment[] keys;

    @State(Scope.Thread)
    public static class PerThread {
        Arena arena;
        SplittableRandom random;
        MemorySegment out;
        MemorySegment value;

        @Setup(Level.Trial)
        public void setup() {
            arena = Arena.ofShared();
            random = new SplittableRandom(Thread.currentThread().threadId());
            out = arena.allocate(KvKeys.VALUE);
            byte[] v = new byte[KvKeys.VALUE];
            KvKeys.value(Thread.currentThread().threadId(), v);
            value = arena.allocate(KvKeys.VALUE).copyFrom(MemorySegment.ofArray(v));
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        device = MemoryDevice.create(BTreeStore.deviceBlocks(BLOCK, LOG_BLOCKS, DATA_BLOCKS), BLOCK);
        store = BTreeStore.format(device, LOG_BLOCKS, (long) (LOG_BLOCKS + DATA_BLOCKS) * BLOCK);
        tree = store.tree;
        keys = new MemorySegment[KEYS];
        byte[] k = new byte[KvKeys.KEY_MAX];
        byte[] v = new byte[KvKeys.VALUE];
        MemorySegment value = MemorySegment.ofArray(v);
        for (int i = 0; i < KEYS; i++) {
            int length = KvKeys.key(i, k);
            keys[i] = arena.allocate(length).copyFrom(MemorySegment.ofArray(k).asSlice(0, length));
            KvKeys.value(i, v);
            try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
                tree.put(txn, keys[i], value);
                txn.commit();
            }
        }
        store.journal.quiesce(); // nothing left to write back when measuring starts
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        store.close();
        device.close();
        arena.close();
    }

    @Benchmark
    @Threads(1)
    public int get1Thread(PerThread t) {
        return get(t);
    }

    @Benchmark
    @Threads(2)
    public int get2Threads(PerThread t) {
        return get(t);
    }

    @Benchmark
    @Threads(1)
    public long put1Thread(PerThread t) {
        return put(t);
    }

    @Benchmark
    @Threads(2)
    public long put2Threads(PerThread t) {
        return put(t);
    }

    @Benchmark
    @Threads(1)
    @OperationsPerInvocation(KEYS)
    public long scan1Thread(PerThread t) {
        return scan(t);
    }

    @Benchmark
    @Threads(2)
    @OperationsPerInvocation(KEYS)
    public long scan2Threads(PerThread t) {
        return scan(t);
    }

    private int get(PerThread t) {
        return tree.get(keys[t.random.nextInt(KEYS)], t.out);
    }

    private long put(PerThread t) {
        try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
            tree.put(txn, keys[t.random.nextInt(KEYS)], t.value);
            return txn.commit();
        }
    }

    private long scan(PerThread t) {
        Cursor c = tree.cursor(null, false);
        long sum = 0;
        while (c.next()) {
            c.value(t.out);
            sum += t.out.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        }
        return sum;
    }
}
