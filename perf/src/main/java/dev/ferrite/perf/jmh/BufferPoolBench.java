package dev.ferrite.perf.jmh;

import dev.ferrite.io.BufferPool;

import java.lang.foreign.MemorySegment;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

/** One acquire and release of a 4 KiB buffer, alone and with a second thread doing the same on the same pool. */
@State(Scope.Benchmark)
public class BufferPoolBench extends JmhDefaults {
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

    private MemorySegment cycle() {
        MemorySegment b = pool.acquire();
        pool.release(b);
        return b;
    }
}
