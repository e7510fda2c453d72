package dev.ferrite.perf.jmh;

import dev.ferrite.journal.internal.Ail;
import dev.ferrite.journal.internal.LogItem;
import dev.ferrite.journal.internal.Lsn;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;

/**
 * One completed checkpoint of {@code items} items handed to the AIL: published into the Disruptor ring
 * in one claim, inserted by the consumer thread in one pass, and waited for. The same items are
 * published again each time, so every insertion is also a relog move (unlink and append), the costlier
 * case. Divide by {@code items} for the per-item cost.
 */
@State(Scope.Benchmark)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class AilBench extends JmhDefaults {
    @Param({"1024", "65536"})
    public int items;

    private MemoryDevice device;
    private Arena arena;
    private Ail ail;
    private LogItem[] batch;
    private long lsn;
    private long seq;

    /** An item that is never written home here: the pusher is not asked to run. */
    static final class Item extends LogItem {
        private final MemorySegment image;

        Item(long home, MemorySegment image) {
            super(home, 1);
            this.image = image;
        }

        @Override
        protected MemorySegment image() {
            return image;
        }

        @Override
        protected boolean tryLock() {
            return false;
        }

        @Override
        protected void unlock() {
        }

        @Override
        protected void stamp(MemorySegment copy, long lsn) {
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        device = MemoryDevice.create(16, 4096);
        arena = Arena.ofShared();
        MemorySegment image = arena.allocate(4096, BlockDevice.BUFFER_ALIGNMENT);
        batch = new LogItem[items];
        for (int i = 0; i < items; i++) {
            batch[i] = new Item(i, image);
        }
        ail = new Ail(device, Integer.highestOneBit(items) * 2, 16, 64, 1 << 30, Lsn.of(1, 0), 1, (l, s) -> { }, () -> { }, t -> { });
        ail.start();
        lsn = Lsn.of(1, 0);
        seq = 1;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        ail.close();
        arena.close();
        device.close();
    }

    @Benchmark
    public long insertCheckpoint() {
        for (LogItem it : batch) {
            it.pin();
        }
        long before = ail.insertedItems.sum();
        long next = lsn + 8;
        ail.publish(batch, items, lsn, seq, next);
        lsn = next;
        seq++;
        while (ail.insertedItems.sum() - before < items) {
            Thread.onSpinWait();
        }
        return lsn;
    }
}
