package dev.ferrite.btree.internal;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

import dev.ferrite.btree.LatchStats;

/**
 * Where B-tree operations of one cache met each other, counted by the level of the node they met at:
 * optimistic reads that had to restart, locks in place that lost to another writer, and reads or locks
 * that found a node locked and waited. Every count is taken on a path that is already slow (a failed
 * validation or CAS, a spin), striped so that counting never becomes contention of its own.
 */
final class Latches {
    private final LongAdder[] restarts = adders();
    private final LongAdder[] lockFailures = adders();
    private final LongAdder[] waits = adders();
    /** The last bucket of {@link #waits} again, by the magic of the block waited for. */
    private final Map<Integer, LongAdder> otherWaits = new ConcurrentHashMap<>();

    /** The bucket of every block that is neither a node nor a header. */
    private static final int OTHER = BTreeNodeFormat.MAX_LEVELS + 1;

    private static LongAdder[] adders() {
        LongAdder[] a = new LongAdder[BTreeNodeFormat.MAX_LEVELS + 2];
        for (int i = 0; i < a.length; i++) {
            a[i] = new LongAdder();
        }
        return a;
    }

    /** An optimistic read of {@code b} did not validate: the operation backs up and reads again. */
    void restarted(Buffer b) {
        restarts[bucket(b)].increment();
    }

    /** A lock in place of {@code b} failed: another writer changed it since it was read. */
    void lockFailed(Buffer b) {
        lockFailures[bucket(b)].increment();
    }

    /** A reader or writer found {@code b} locked (by a writer, or by its loader) and waited. */
    void waited(Buffer b) {
        int bucket = bucket(b);
        waits[bucket].increment();
        if (bucket == OTHER) {
            otherWaits.computeIfAbsent(b.magic(), m -> new LongAdder()).increment();
        }
    }

    LatchStats stats() {
        TreeMap<String, Long> other = new TreeMap<>();
        otherWaits.forEach((magic, n) -> other.merge(LatchStats.kind(magic), n.sum(), Long::sum));
        return new LatchStats(sums(restarts), sums(lockFailures), sums(waits), other);
    }

    private static long[] sums(LongAdder[] a) {
        long[] s = new long[a.length];
        for (int i = 0; i < a.length; i++) {
            s[i] = a[i].sum();
        }
        return s;
    }

    /**
     * A node's level (0 for leaves), read without validation: a node keeps its level while its block is
     * allocated, and a torn read only misfiles one count. Headers, then other blocks, have the two buckets after
     * the levels (see {@link LatchStats}).
     */
    private static int bucket(Buffer b) {
        if (b.magic() == BTreeHeaderFormat.MAGIC) {
            return BTreeNodeFormat.MAX_LEVELS;
        }
        int level = b.magic() == BTreeNodeFormat.MAGIC ? BTreeNodeFormat.level(b.data()) : -1;
        // an image still being loaded may hold anything yet
        return level >= 0 && level < BTreeNodeFormat.MAX_LEVELS ? level : OTHER;
    }
}
