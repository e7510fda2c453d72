package dev.ferrite.btree;

import java.util.Arrays;
import java.util.Collections;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * Where B-tree operations on one buffer cache met each other since open, per level: entry 0 counts
 * leaves, entry 1 their parents and so on up; the entry after the last level counts tree headers (whose
 * root pointer every descent reads first), the last one every other block: group headers, inode chunks,
 * allocator blocks, and images still being read in.
 *
 * @param restarts     optimistic reads that failed to validate and backed up to an unchanged ancestor
 * @param lockFailures locks in place that lost to another writer (the operation read again)
 * @param waits        reads or locks that found the node locked by a writer or its loader, and waited
 * @param otherWaits   the last entry of {@code waits} by the kind of block waited for: its magic as
 *                     four characters (an inode block's "FINO", a group header's "FAGI"), or in hex
 *                     where they are not printable; no zero counts
 */
public record LatchStats(long[] restarts, long[] lockFailures, long[] waits, SortedMap<String, Long> otherWaits) {
    public LatchStats {
        if (restarts.length < 2 || lockFailures.length != restarts.length || waits.length != restarts.length) {
            throw new IllegalArgumentException("three arrays of the same length, at least 2");
        }
        restarts = restarts.clone();
        lockFailures = lockFailures.clone();
        waits = waits.clone();
        TreeMap<String, Long> other = new TreeMap<>();
        otherWaits.forEach((kind, n) -> {
            if (n != 0) {
                other.put(kind, n);
            }
        });
        otherWaits = Collections.unmodifiableSortedMap(other);
    }

    /** With no breakdown of the other blocks' waits. */
    public LatchStats(long[] restarts, long[] lockFailures, long[] waits) {
        this(restarts, lockFailures, waits, Collections.emptySortedMap());
    }

    /** The name of magic {@code magic} as {@link #otherWaits} keys it: its bytes as stored, low first. */
    public static String kind(int magic) {
        char[] c = new char[4];
        for (int i = 0; i < 4; i++) {
            c[i] = (char) (magic >>> 8 * i & 0xff);
            if (c[i] < 0x21 || c[i] > 0x7e) {
                return String.format("%08x", magic);
            }
        }
        return new String(c);
    }

    /** Index of the headers' entry; the levels are the entries before it. */
    public int headerIndex() {
        return restarts.length - 2;
    }

    /** What happened between {@code earlier} and this. */
    public LatchStats since(LatchStats earlier) {
        TreeMap<String, Long> other = new TreeMap<>(otherWaits);
        earlier.otherWaits.forEach((kind, n) -> other.merge(kind, -n, Long::sum));
        return new LatchStats(minus(restarts, earlier.restarts), minus(lockFailures, earlier.lockFailures),
                minus(waits, earlier.waits), other);
    }

    private static long[] minus(long[] a, long[] b) {
        long[] d = new long[a.length];
        Arrays.setAll(d, i -> a[i] - b[i]);
        return d;
    }

    /** Equal counts, entry by entry (a record compares arrays by identity otherwise). */
    @Override
    public boolean equals(Object o) {
        return o instanceof LatchStats l && Arrays.equals(restarts, l.restarts) && Arrays.equals(lockFailures, l.lockFailures)
                && Arrays.equals(waits, l.waits) && otherWaits.equals(l.otherWaits);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * (31 * Arrays.hashCode(restarts) + Arrays.hashCode(lockFailures)) + Arrays.hashCode(waits)) + otherWaits.hashCode();
    }

    @Override
    public String toString() {
        return "LatchStats[restarts=" + Arrays.toString(restarts) + ", lockFailures=" + Arrays.toString(lockFailures)
                + ", waits=" + Arrays.toString(waits) + ", otherWaits=" + otherWaits + "]";
    }

    @Override
    public long[] restarts() {
        return restarts.clone();
    }

    @Override
    public long[] lockFailures() {
        return lockFailures.clone();
    }

    @Override
    public long[] waits() {
        return waits.clone();
    }
}
