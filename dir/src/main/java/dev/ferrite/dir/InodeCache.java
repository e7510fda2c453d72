package dev.ferrite.dir;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * Inode number to in-memory {@link Inode}, with no global lock: lookups walk a hash chain without any
 * lock or allocation (as the kernel's RCU inode lookups do) and take a reference with a CAS; only
 * inserting and unlinking take the lock of one of {@value #STRIPES} stripes. Unlinked inodes keep their
 * chain link, so a walker standing on one still reaches the rest of its chain.
 *
 * <p>Unreferenced inodes stay cached until the cache holds more than its capacity; then releasing one
 * sweeps a clock hand over the buckets, killing ({@link Inode#tryKill}) and unlinking unreferenced
 * inodes until it is back under, or until it has looked at {@value #SWEEP_VISITS} buckets and inodes:
 * when most cached inodes are referenced (a FUSE mount holds one per inode the kernel caches), a sweep
 * that went round the whole table on every release would make each release cost the table's size. A lookup racing with the sweep either takes its reference first (the
 * kill fails) or finds the inode dead and makes a fresh one.
 */
final class InodeCache {
    private static final int STRIPES = 64;
    /** Buckets and inodes one release's sweep looks at, at most: the next release goes on from there. */
    static final int SWEEP_VISITS = 256;

    private final AtomicReferenceArray<Inode> buckets;
    private final int mask;
    private final int shift;
    private final Object[] stripes = new Object[STRIPES];
    private final int capacity;
    private final AtomicInteger size = new AtomicInteger();
    private final AtomicInteger hand = new AtomicInteger();
    /** Lookups that found no live inode and made one (under a stripe lock), and inodes the sweep reclaimed. */
    private final LongAdder misses = new LongAdder();
    private final LongAdder evictions = new LongAdder();
    /** Buckets and inodes the sweeps looked at. */
    private final LongAdder sweepVisits = new LongAdder();

    InodeCache(int capacity) {
        this.capacity = capacity;
        int n = Integer.highestOneBit(Math.max(16, capacity) * 2 - 1);
        this.buckets = new AtomicReferenceArray<>(n);
        this.mask = n - 1;
        this.shift = 64 - Integer.numberOfTrailingZeros(n);
        for (int i = 0; i < STRIPES; i++) {
            stripes[i] = new Object();
        }
    }

    /** Fibonacci hashing: the product's top bits (its middle bits cluster for inode numbers). */
    private int bucket(long ino) {
        return (int) ((ino * 0x9E37_79B9_7F4A_7C15L) >>> shift);
    }

    /** The inode of {@code ino} with a reference taken: release it with {@link #release}. */
    Inode acquire(long ino) {
        int bucket = bucket(ino);
        Inode found = find(bucket, ino);
        if (found != null) {
            return found;
        }
        synchronized (stripes[bucket & (STRIPES - 1)]) {
            found = find(bucket, ino);
            if (found != null) {
                return found;
            }
            misses.increment();
            Inode fresh = new Inode(ino, 1);
            fresh.chainNext = buckets.get(bucket);
            buckets.set(bucket, fresh);
            size.incrementAndGet();
            return fresh;
        }
    }

    /** A live inode of {@code ino} in the chain, referenced, or null. Lock-free. */
    private Inode find(int bucket, long ino) {
        for (Inode i = buckets.get(bucket); i != null; i = i.chainNext) {
            if (i.ino == ino && i.tryRef()) {
                return i;
            }
        }
        return null;
    }

    /** Drops a reference from {@link #acquire}; may reclaim unreferenced inodes if the cache is over capacity. */
    void release(Inode inode) {
        if (inode.unref() == 0 && size.get() > capacity) {
            sweep();
        }
    }

    private void sweep() {
        int target = capacity - capacity / 8;
        int visits = 0;
        for (int n = 0; n <= mask && visits < SWEEP_VISITS && size.get() > target; n++) {
            int bucket = hand.getAndIncrement() & mask;
            visits++;
            for (Inode i = buckets.get(bucket); i != null && visits < SWEEP_VISITS; i = i.chainNext) {
                visits++;
                if (i.tryKill()) {
                    unlink(bucket, i);
                    evictions.increment();
                }
            }
        }
        sweepVisits.add(visits);
    }

    /** Buckets and inodes the sweeps have looked at so far. */
    long sweepVisits() {
        return sweepVisits.sum();
    }

    private void unlink(int bucket, Inode dead) {
        synchronized (stripes[bucket & (STRIPES - 1)]) {
            Inode prev = null;
            for (Inode x = buckets.get(bucket); x != null; prev = x, x = x.chainNext) {
                if (x == dead) {
                    if (prev == null) {
                        buckets.set(bucket, x.chainNext);
                    } else {
                        prev.chainNext = x.chainNext;
                    }
                    size.decrementAndGet();
                    return;
                }
            }
        }
    }

    /** Runs {@code action} on every cached inode someone holds a reference to, with one taken for the call. */
    void forEachReferenced(java.util.function.Consumer<Inode> action) {
        for (int bucket = 0; bucket <= mask; bucket++) {
            for (Inode i = buckets.get(bucket); i != null; i = i.chainNext) {
                if (i.refs() > 0 && i.tryRef()) {
                    try {
                        action.accept(i);
                    } finally {
                        release(i);
                    }
                }
            }
        }
    }

    /** The counters since the cache was made. */
    InodeCacheStats stats() {
        return new InodeCacheStats(capacity, size.get(), misses.sum(), evictions.sum());
    }

    /** Inodes cached now, referenced or not. */
    int size() {
        return size.get();
    }

    /** The cached live inode of {@code ino} without taking a reference, or null (for tests and checkers). */
    Inode peek(long ino) {
        for (Inode i = buckets.get(bucket(ino)); i != null; i = i.chainNext) {
            if (i.ino == ino && i.refs() != Inode.DEAD) {
                return i;
            }
        }
        return null;
    }
}
