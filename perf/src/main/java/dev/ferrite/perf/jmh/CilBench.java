package dev.ferrite.perf.jmh;

import dev.ferrite.journal.internal.Cil;
import dev.ferrite.journal.internal.DirtyMap;
import dev.ferrite.journal.internal.LogItem;
import dev.ferrite.journal.internal.ShadowPool;
import dev.ferrite.journal.internal.Ticket;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

import dev.ferrite.io.BlockDevice;

/**
 * A small transaction's commit into the CIL: 8 bytes changed in one item, relogged in the current
 * context (the steady state of a hot item between checkpoints): stripe entry, space accounting, the copy
 * into the shadow, stripe exit. Alone and with a second thread committing its own item.
 */
@State(Scope.Benchmark)
public class CilBench extends JmhDefaults {
    private Cil cil;
    private ShadowPool shadows;

    @State(Scope.Thread)
    public static class PerThread {
        Arena arena;
        AilBench.Item item;
        LogItem[] items;
        Ticket ticket;
        MemorySegment image;

        @Setup(Level.Trial)
        public void setup() {
            arena = Arena.ofShared();
            image = arena.allocate(4096, BlockDevice.BUFFER_ALIGNMENT);
            item = new AilBench.Item(Thread.currentThread().threadId(), image);
            items = new LogItem[] {item};
            ticket = new Ticket(Long.MAX_VALUE / 4, 1);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        shadows = new ShadowPool(4096, 1L << 20);
        cil = new Cil(1, 4096, Long.MAX_VALUE, shadows, () -> { }, Cil.DRAIN_TIMEOUT_NANOS);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        shadows.close();
    }

    @Benchmark
    @Threads(1)
    public long commit1Thread(PerThread t) {
        return commit(t);
    }

    @Benchmark
    @Threads(2)
    public long commit2Threads(PerThread t) {
        return commit(t);
    }

    private long commit(PerThread t) {
        t.image.set(java.lang.foreign.ValueLayout.JAVA_LONG, 64, t.image.get(java.lang.foreign.ValueLayout.JAVA_LONG, 64) + 1);
        t.item.txDirty = DirtyMap.low(64, 8, cil.chunkShift());
        t.ticket.current = Long.MAX_VALUE / 4;
        return cil.commit(t.items, 1, t.ticket, -1);
    }
}
