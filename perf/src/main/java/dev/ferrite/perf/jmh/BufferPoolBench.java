package dev.ferrite.perf.jmh;

import dev.ferrite.io.internal.BufferPool;

import java.lang.foreign.MemorySegment;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

/**
 * One acquire and release of a 4 KiB buffer, alone and with a second thread doing the same on the same
 * pool; and bursts of eight held at once, more than a thread's cache keeps, so that releases spill to
 * the pool's shared queue and acquires refill from it. Scores are per buffer.
 */
@State(Scope.Benchmark)
public class BufferPoolBench extends JmhDefaults {
    private static final int BURST = 16;

    private BufferPool pool;

    @Setup(Level.Trial)
    public void setup() {
        pool = new BufferPool(4096, 64);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
    }

    @Benchmark
    @Threads(1)
    public MemorySegment acquireRelease1Thread() {
        return cycle();
    }

    @Benchmark
    @Threads(2)
    public MemorySegment acquireRelease2Threads() {
        return cycle();
    }

    @Benchmark
    @Threads(1)
    @OperationsPerInvocation(BURST)
    public void burst1Thread(Held held) {
        burst(held.buffers);
    }

    @Benchmark
    @Threads(2)
    @OperationsPerInvocation(BURST)
    public void burst2Threads(Held held) {
        burst(held.buffers);
    }

    /** Each thread's room for a burst, so that the burst itself allocates nothing. */
    @State(Scope.Thread)
    public static class Held {
        final MemorySegment[] buffers = new MemorySegment[BURST];
    }

    private void burst(MemorySegment[] held) {
        for (int i = 0; i < BURST; i++) {
            held[i] = pool.acquire();
        }
        for (int i = 0; i < BURST; i++) {
            pool.release(held[i]);
        }
    }

    private MemorySegment cycle() {
        MemorySegment b = pool.acquire();
        pool.release(b);
        return b;
    }
}
