package dev.ferrite.perf.jmh;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.internal.LogGeometry;
import dev.ferrite.journal.internal.ReplayItem;
import dev.ferrite.journal.internal.Replayer;
import dev.ferrite.journal.internal.Reservation;
import dev.ferrite.journal.internal.Transaction;
import dev.ferrite.journal.testkit.TestItem;

/**
 * A whole small transaction through the public API on a RAM device: begin (reservation), lock, change 8
 * bytes, log, commit, unlock. Checkpoints run in the background as the CIL fills; nothing is forced,
 * except in {@link #forcedCommit}, which forces each commit as a SYNC commit or an fsync does (on an idle
 * log the committing thread formats, writes and flushes its checkpoint itself).
 */
@State(Scope.Benchmark)
public class JournalCommitBench extends JmhDefaults {
    private MemoryDevice device;
    private Journal journal;

    @State(Scope.Thread)
    public static class PerThread {
        Arena arena;
        TestItem item;

        @Setup(Level.Trial)
        public void setup() {
            arena = Arena.ofShared();
            item = new TestItem(1 + (Thread.currentThread().threadId() & 1023), 4096, arena);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        device = MemoryDevice.create(1 << 16, 4096);
        LogGeometry g = new LogGeometry(4096, 1 << 15);
        Journal.format(device, g);
        journal = Journal.open(device, g, JournalOptions.defaults(), new Replayer() {
            @Override
            public boolean replay(ReplayItem item) {
                throw new IllegalStateException("fresh log");
            }

            @Override
            public void finish() {
            }
        });
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        journal.close();
        device.close();
    }

    @Benchmark
    @Threads(1)
    public long commit1Thread(PerThread t) {
        return commit(t.item);
    }

    @Benchmark
    @Threads(2)
    public long commit2Threads(PerThread t) {
        return commit(t.item);
    }

    @Benchmark
    @Threads(1)
    public long forcedCommit(PerThread t) {
        long seq = commit(t.item);
        journal.force(seq);
        return seq;
    }

    private long commit(TestItem item) {
        Transaction tx = journal.begin(Reservation.items(1));
        item.lock.lock();
        try {
            item.image().set(ValueLayout.JAVA_LONG, 64, item.image().get(ValueLayout.JAVA_LONG, 64) + 1);
            tx.log(item, 64, 8);
            return tx.commit();
        } finally {
            item.lock.unlock();
        }
    }
}
