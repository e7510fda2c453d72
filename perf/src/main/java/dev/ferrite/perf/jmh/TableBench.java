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

import dev.ferrite.dir.Durability;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.TableCursor;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.perf.bench.KvKeys;

/**
 * A table of the public API ({@code volume.tables()}) on {@value #KEYS} keys of {@code bench kv}'s kind
 * (16-40 bytes, hashed order, 64-byte values) in a RAM volume whose cache holds everything, one thread:
 * {@code get} of a random key into a caller's segment; {@code put} replacing a random key's value, a
 * transaction of its own at {@link Durability#NONE} (checkpoints and write-back run in the background);
 * {@code deleteAndPut} removing a random key and putting it back (two operations: a delete and an insert of
 * a key not in the table, which stays at {@value #KEYS} keys, so each iteration measures the same steady
 * state); {@code insertAndDeleteOldest} inserting a key never used before and deleting the oldest (a
 * sliding window over {@link KvKeys}' key sequence, the table again at {@value #KEYS} keys); {@code cursorStep} one
 * step of a forward cursor reading its value, a new cursor every full pass. Run with {@code -prof gc} for
 * the allocation per operation.
 */
@State(Scope.Benchmark)
public class TableBench extends JmhDefaults {
    static final int KEYS = 100_000;

    private Arena arena;
    private MemoryDevice device;
    private Volume volume;
    private Table table;
    private MemorySegment[] keys;
    private SplittableRandom random;
    private MemorySegment out;
    private MemorySegment value;
    private TableCursor cursor;
    private final byte[] fresh = new byte[KvKeys.KEY_MAX];
    private MemorySegment[] freshKey;
    private long oldest;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        device = MemoryDevice.create(65_536, 4096);
        VolumeOptions options = VolumeOptions.defaults().withLogBlocks(8192).withCacheBytes(128L << 20);
        Volume.format(device, options);
        volume = Volume.open(device, options);
        table = volume.tables().create("bench").withDurability(Durability.NONE);
        keys = new MemorySegment[KEYS];
        byte[] k = new byte[KvKeys.KEY_MAX];
        byte[] v = new byte[KvKeys.VALUE];
        for (int i = 0; i < KEYS; i++) {
            int length = KvKeys.key(i, k);
            keys[i] = arena.allocate(length).copyFrom(MemorySegment.ofArray(k).asSlice(0, length));
            KvKeys.value(i, v);
            table.put(keys[i], MemorySegment.ofArray(v));
        }
        volume.sync();
        random = new SplittableRandom(42);
        out = arena.allocate(KvKeys.VALUE);
        KvKeys.value(7, v);
        value = arena.allocate(KvKeys.VALUE).copyFrom(MemorySegment.ofArray(v));
        cursor = table.cursor();
        MemorySegment window = arena.allocate(KvKeys.KEY_MAX);
        freshKey = new MemorySegment[KvKeys.KEY_MAX + 1];
        for (int length = KvKeys.KEY_MIN; length <= KvKeys.KEY_MAX; length++) {
            freshKey[length] = window.asSlice(0, length);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        table.close();
        volume.close();
        device.close();
        arena.close();
    }

    @Benchmark
    public int get() {
        return table.get(keys[random.nextInt(KEYS)], out);
    }

    @Benchmark
    public void put() {
        table.put(keys[random.nextInt(KEYS)], value);
    }

    @Benchmark
    @OperationsPerInvocation(2)
    public boolean deleteAndPut() {
        MemorySegment key = keys[random.nextInt(KEYS)];
        boolean deleted = table.delete(key);
        table.put(key, value);
        return deleted;
    }

    @Benchmark
    @OperationsPerInvocation(2)
    public boolean insertAndDeleteOldest() {
        table.put(windowKey(oldest + KEYS), value);
        return table.delete(windowKey(oldest++));
    }

    /** Key {@code i} of the sliding window in a reused segment (a slice per length), allocating nothing. */
    private MemorySegment windowKey(long i) {
        int length = KvKeys.key(i, fresh);
        MemorySegment key = freshKey[length];
        MemorySegment.copy(fresh, 0, key, ValueLayout.JAVA_BYTE, 0, length);
        return key;
    }

    @Benchmark
    public long cursorStep() {
        if (!cursor.next()) {
            cursor.close();
            cursor = table.cursor();
            cursor.next();
        }
        return cursor.valueSegment().byteSize();
    }
}
