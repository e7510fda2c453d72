package dev.ferrite.perf.jmh;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.perf.bench.BTreeStore;

/**
 * A buffer-cache hit, {@link BufferCache#get} of a cached block: the first step of every node visit.
 * With {@code blocks} = 1 the same block each time; with more, the blocks in turn, so that each lookup
 * walks another hash chain to another buffer, as a descent through a large tree does. 1 and 2 threads.
 */
@State(Scope.Benchmark)
public class BufferCacheBench extends JmhDefaults {
    private static final int BLOCK = 4096;
    private static final int LOG_BLOCKS = 16_384;
    private static final int MAGIC = 0x484E_4342; // "BCNH" as little-endian bytes
    private static final long OWNER = 7;
    private static final int PER_TXN = 256;

    @Param({"1", "16384"})
    int blocks;

    private MemoryDevice device;
    private BTreeStore store;
    private BufferCache cache;
    private long[] numbers;

    @State(Scope.Thread)
    public static class PerThread {
        int next;
    }

    @Setup(Level.Trial)
    public void setup() {
        device = MemoryDevice.create(BTreeStore.deviceBlocks(BLOCK, LOG_BLOCKS, blocks + 64L), BLOCK);
        store = BTreeStore.format(device, LOG_BLOCKS, 2L * (LOG_BLOCKS + blocks) * BLOCK);
        cache = store.cache;
        numbers = new long[blocks];
        for (int i = 0; i < blocks; i += PER_TXN) {
            try (Txn txn = Txn.begin(cache, PER_TXN + store.allocator.itemsPerChange())) {
                for (int j = i; j < Math.min(blocks, i + PER_TXN); j++) {
                    numbers[j] = store.allocator.allocate(txn);
                    cache.create(txn, numbers[j], MAGIC, OWNER);
                }
                txn.commit();
            }
        }
        store.journal.quiesce();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        store.close();
        device.close();
    }

    @Benchmark
    @Threads(1)
    public Buffer hit1Thread(PerThread t) {
        return hit(t);
    }

    @Benchmark
    @Threads(2)
    public Buffer hit2Threads(PerThread t) {
        return hit(t);
    }

    private Buffer hit(PerThread t) {
        int i = t.next;
        t.next = i + 1 == blocks ? 0 : i + 1;
        return cache.get(numbers[i], MAGIC, OWNER, "benchmark block");
    }
}
