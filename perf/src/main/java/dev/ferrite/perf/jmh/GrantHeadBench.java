package dev.ferrite.perf.jmh;

import dev.ferrite.journal.internal.LogSpace;
import dev.ferrite.journal.internal.Ticket;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;


/**
 * Reserve and release of one ticket on a log far larger than what is outstanding: the uncontended fast
 * path (one CAS per grant head each way, no lock, no allocation — {@code -prof gc} shows B/op), alone
 * and with a second thread doing the same on the same heads.
 */
@State(Scope.Benchmark)
public class GrantHeadBench extends JmhDefaults {
    private static final long LOG_BYTES = 1L << 30;
    private static final long UNIT = 16 * 1024;

    LogSpace space;

    @State(Scope.Thread)
    public static class PerThread {
        final Ticket ticket = new Ticket(UNIT, 1);
    }

    @Setup
    public void setup() {
        space = new LogSpace(LOG_BYTES, 1L << 32, () -> {
            throw new AssertionError("the benchmark log never fills");
        });
    }

    @Benchmark
    @Threads(1)
    public long reserveRelease1Thread(PerThread t) {
        return cycle(t.ticket);
    }

    @Benchmark
    @Threads(2)
    public long reserveRelease2Threads(PerThread t) {
        return cycle(t.ticket);
    }

    private long cycle(Ticket t) {
        t.count = 1;
        t.current = UNIT;
        space.reserve(t);
        space.ungrant(t);
        return space.writeHead.get();
    }
}
