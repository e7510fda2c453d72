package dev.ferrite.perf.bench;

import java.util.Locale;

import dev.ferrite.btree.CacheStats;
import dev.ferrite.dir.Volume;
import dev.ferrite.journal.JournalStats;

/**
 * Where Ferrite's threads waited and what they paid over one phase, from the journal's and the buffer
 * cache's counters: the harness's stand-in for the kernel's lockstat. Printed after each Ferrite phase of
 * {@code kv} and {@code meta}, per operation where that reads better.
 */
public final class Contention {
    /** The counters at one moment. */
    public record Snapshot(JournalStats journal, CacheStats cache) {
        /** {@code volume}'s counters now. */
        public static Snapshot of(Volume volume) {
            return new Snapshot(volume.journalStats(), volume.cacheStats());
        }
    }

    private Contention() {
    }

    /** What happened between {@code a} and {@code b}, over {@code ops} operations, on one line. */
    public static String between(Snapshot a, Snapshot b, long ops) {
        JournalStats j0 = a.journal(), j1 = b.journal();
        CacheStats c0 = a.cache(), c1 = b.cache();
        long n = Math.max(1, ops);
        long checkpoints = j1.checkpoints() - j0.checkpoints();
        long grantWaits = j1.reserveWaits() - j0.reserveWaits() + j1.writeWaits() - j0.writeWaits();
        long grantNanos = j1.reserveWaitNanos() - j0.reserveWaitNanos() + j1.writeWaitNanos() - j0.writeWaitNanos();
        return String.format(Locale.ROOT,
                "log %,.0f B/op in %,d checkpoints (%,.1f items each), %,d forces; grant-head waits %,d (%,.1f ms), "
                        + "CIL throttles %,d (%,.1f ms); AIL pusher wake-ups %,d, written home %,d (%,d early); "
                        + "cache misses %.3f/op, evictions %,d, write-backs %,d, dirty waits %,d",
                (j1.checkpointBytes() - j0.checkpointBytes()) / (double) n, checkpoints,
                checkpoints == 0 ? 0.0 : (j1.checkpointItems() - j0.checkpointItems()) / (double) checkpoints,
                j1.forces() - j0.forces(), grantWaits, grantNanos / 1e6, j1.commitThrottles() - j0.commitThrottles(),
                (j1.commitThrottleNanos() - j0.commitThrottleNanos()) / 1e6, j1.ailPusherWakeups() - j0.ailPusherWakeups(),
                j1.ailWrittenBack() - j0.ailWrittenBack(), j1.ailWrittenEarly() - j0.ailWrittenEarly(),
                (c1.misses() - c0.misses()) / (double) n,
                c1.leafEvictions() - c0.leafEvictions() + c1.interiorEvictions() - c0.interiorEvictions(),
                c1.writeBacks() - c0.writeBacks(), c1.dirtyWaits() - c0.dirtyWaits());
    }
}
