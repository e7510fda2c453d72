package dev.ferrite.dir;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * A group's busy file-data extents, XFS's busy extent list: blocks freed from a file by a transaction
 * whose checkpoint is not durable yet. Their free is back in the free-space trees at once, but an
 * allocator must not put another file's data in them: the data goes to the device before any log
 * write, so a crash could give the blocks back to their old file with the new file's bytes in them.
 * Allocators skip them ({@link FreeSpace}); one that finds nothing else waits on a force, as for busy
 * metadata blocks. Freed metadata blocks are the buffer cache's to track; these have no buffer.
 *
 * <p>Every method but the entries' own runs under the group's AGF lock, which every free and every
 * allocation of the group holds. An entry is pending from the free until its transaction has committed
 * and {@linkplain Entry#settle settled} it with the commit sequence (or, {@linkplain Entry#hold held},
 * until it is {@linkplain Entry#release released}); busy until that sequence is
 * durable, then dropped by the next call that meets it. The entries never overlap while busy (a busy
 * block is never handed out, so never freed again), and stay sorted by start, in chunks of at most
 * {@link #CHUNK}: with nothing durable for a long run of frees (no checkpoint written) a group holds tens
 * of thousands (32,000 in one of four groups after 100,000 16 KiB deletes of values that random puts had
 * scattered), and a free among them shifted every entry after it in the one sorted list this used to be
 * (5 µs a free at 100,000). XFS keeps its busy extents in a red-black tree; a tree here took three
 * descents of cache misses a free, as slow at that size.
 */
final class BusyExtents {
    /** Entries past which {@link #add} sweeps out the durable ones. */
    private static final int SWEEP_AT = 64;
    /** Entries a chunk holds at most: an insert or a removal shifts at most this many. */
    static final int CHUNK = 256;

    /** An extent of group blocks freed by one transaction. */
    static final class Entry {
        /** The sequence of an entry whose transaction has not yet committed. */
        private static final long PENDING = Long.MAX_VALUE;

        /** Its blocks; {@link #length} grows when a later free {@linkplain #addJoining joins} it (under the AGF). */
        final int start;
        int length;
        private volatile long seq = PENDING;
        private long held = PENDING;
        /** Made by {@link #addJoining}: never taken back or held, so a later free may join it. */
        private final boolean joinable;

        private final BusyExtents owner;

        private Entry(BusyExtents owner, int start, int length, boolean joinable) {
            this.owner = owner;
            this.start = start;
            this.length = length;
            this.joinable = joinable;
        }

        /** The freeing transaction committed with {@code seq}: the blocks are busy until it is durable. */
        void settle(long seq) {
            this.seq = seq;
            // one durable already may go unseen by a count that sweeps only when the durable sequence moves:
            // counted, after the store (a sweep that counted it saw the sequence). The usual settle, of a
            // commit not durable yet, writes nothing shared: the durable sequence moves past it later
            if (seq <= owner.durableSeq.getAsLong()) {
                owner.settles.incrementAndGet();
            }
        }

        /**
         * The freeing transaction committed with {@code seq}, but the blocks stay busy, durable or not,
         * until {@link #release}: a reader may still be handed their old stub (a multi-key commit's
         * record, {@code TableCommit#releaseFrees}). The freeing thread's alone until then.
         */
        void hold(long seq) {
            held = seq;
        }

        /** Ends a {@link #hold}: busy until its sequence is durable, as if settled with it. */
        void release() {
            settle(held);
        }

        int end() {
            return start + length;
        }
    }

    /** The newest durable commit sequence (the journal's). */
    private final LongSupplier durableSeq;
    /** The sequence a commit made now gets, outside a journal group (the journal's current context's). */
    private final LongSupplier currentSeq;
    /**
     * The entries by start: chunk {@code c} is {@code chunks[c][0, counts[c])}, none empty, their starts
     * {@code starts[c]} side by side (a search reads those, not an entry each: a cache miss a step, 10% of a
     * scattered delete's CPU), and {@code heads[c]} its first entry's start, for the search among chunks. A
     * position in them is packed as {@code c << 32 | i} ({@link #NONE}: none).
     */
    private Entry[][] chunks = new Entry[4][];
    private int[][] starts = new int[4][];
    private int[] counts = new int[4], heads = new int[4];
    private int chunkCount, size;
    private static final long NONE = -1;
    private int sweepAt = SWEEP_AT;
    /** Blocks of the entries kept: busy, or durable and not swept out yet. */
    private long kept;
    /**
     * Entries settled (or released) with a sequence durable already: a {@link #busyBlocks} with none since
     * the last sweep, nor a durable sequence moved, needs none.
     */
    private final AtomicLong settles = new AtomicLong();
    /** The durable sequence and {@link #settles} the last sweep went by. */
    private long sweptDurable = -1, sweptSettles = -1;
    /** Sweeps that dropped an entry: blocks busy before one may be usable after it. */
    private long sweeps;

    BusyExtents(LongSupplier durableSeq, LongSupplier currentSeq) {
        this.durableSeq = durableSeq;
        this.currentSeq = currentSeq;
    }

    /**
     * Group blocks {@code [start, start + length)} were just freed in a transaction still open: busy until it
     * is durable. A journal group's free, which it may take back ({@link #remove}) or {@linkplain Entry#hold
     * hold}: an entry of its own.
     */
    Entry add(int start, int length) {
        return add(start, length, false);
    }

    /**
     * {@link #add} for a free that is settled once its transaction commits, never taken back or held (a
     * single write's, a file's): if the entry ending at {@code start} is such a free's too, settled with
     * the sequence commits get now (so it is durable with the checkpoint this one's commit most likely
     * joins, and at the latest with this one's), that entry grows over these blocks and is pending again,
     * to be settled with this free's sequence; busy no longer than they would be apart, but for a commit
     * that a checkpoint's start separates from the last. Values deleted one at a time in the order they
     * were written free adjacent blocks, each in a transaction of its own: one entry for them all instead
     * of an entry each (an allocation and a list slot a delete, and thousands of entries to sweep and to
     * search).
     */
    Entry addJoining(int start, int length) {
        return add(start, length, true);
    }

    private Entry add(int start, int length, boolean joinable) {
        long durable = durableSeq.getAsLong();
        // also once the last entry is durable: the frees after a sync then find none of those
        if (size >= sweepAt || size > 0 && last().seq <= durable) {
            sweep(durable);
        }
        long b = lastStartingBefore(start);
        Entry before = at(b), after = at(b == NONE ? (size == 0 ? NONE : 0) : next(b));
        if (joinable && before != null && before.joinable && before.end() == start && before.seq > durable
                && before.seq == currentSeq.getAsLong() && (after == null || after.start >= start + length)) {
            before.seq = Entry.PENDING; // settled again by this free's commit, with its sequence
            before.length += length;
            kept += length;
            return before;
        }
        Entry e = new Entry(this, start, length, joinable);
        // a durable entry may still cover some of these blocks (allocated and freed again since)
        if (before != null && before.end() > start) {
            dropOverlapped(b, e, durable);
        }
        for (long a = firstEndingAfter(start); a != NONE && at(a).start < e.end(); a = firstEndingAfter(start)) {
            dropOverlapped(a, e, durable);
        }
        insert(e);
        kept += length;
        return e;
    }

    /** Drops the entry at {@code p}, which {@code e}'s free overlaps: a bug unless it is durable. */
    private void dropOverlapped(long p, Entry e, long durable) {
        Entry old = at(p);
        removeAt(p);
        kept -= old.length;
        if (old.seq > durable) {
            throw new IllegalStateException("blocks [" + e.start + ", +" + e.length + ") are freed again while ["
                    + old.start + ", +" + old.length + ") of them are still busy: allocators must skip busy blocks");
        }
    }

    /** Drops entry {@code e}: its free was undone (its blocks taken again) before it became durable. */
    void remove(Entry e) {
        long p = lastStartingBefore(e.start + 1);
        if (at(p) == e) {
            removeAt(p);
            kept -= e.length;
        }
    }

    /**
     * At least the busy blocks: those of the entries kept, some of which may be durable already (cheap:
     * a count kept as entries come and go). {@link #busyBlocks} is exact.
     */
    long keptBlocks() {
        return kept;
    }

    /** How many sweeps have dropped entries so far: see {@link #sweeps}'s field. */
    long sweeps() {
        return sweeps;
    }

    /** The busy blocks, once the durable entries are swept out. */
    long busyBlocks() {
        long durable = durableSeq.getAsLong();
        if (durable != sweptDurable || settles.get() != sweptSettles) {
            sweep(durable); // else none can have become durable since the last: a group's own frees stay busy
        }
        return kept;
    }

    /** The first busy block of {@code [from, to)}, or {@code to} if none is. */
    int firstBusy(int from, int to) {
        if (size == 0) {
            return to;
        }
        long durable = durableSeq.getAsLong();
        for (Entry e = at(firstEndingAfter(from)); e != null && e.start < to; ) {
            if (e.seq <= durable) {
                sweep(durable);
                e = at(firstEndingAfter(from));
                continue;
            }
            return Math.max(from, e.start);
        }
        return to;
    }

    /** The last busy block of {@code [from, to)}, or {@code from - 1} if none is. */
    int lastBusy(int from, int to) {
        if (size == 0) {
            return from - 1;
        }
        long durable = durableSeq.getAsLong();
        // entries are sorted by end as by start: the last one starting before to is the only one to look at
        for (Entry e = at(lastStartingBefore(to)); e != null && e.end() > from; ) {
            if (e.seq <= durable) {
                sweep(durable);
                e = at(lastStartingBefore(to));
                continue;
            }
            return Math.min(to - 1, e.end() - 1);
        }
        return from - 1;
    }

    /**
     * Drops every entry durable by {@code durable} at once: one pass for all of them, which a query
     * meeting the first one makes, so that the next queries meet none until the durable sequence moves.
     */
    private void sweep(long durable) {
        sweptSettles = settles.get(); // before the pass: an entry settled during it is seen by the next
        sweptDurable = durable;
        int before = size, live = 0;
        for (int c = 0; c < chunkCount; c++) {
            Entry[] a = chunks[c];
            int[] st = starts[c];
            int n = 0;
            for (int i = 0; i < counts[c]; i++) {
                if (a[i].seq > durable) {
                    st[n] = st[i];
                    a[n++] = a[i];
                } else {
                    kept -= a[i].length;
                }
            }
            Arrays.fill(a, n, counts[c], null);
            if (n > 0) {
                chunks[live] = a;
                starts[live] = st;
                counts[live] = n;
                heads[live++] = st[0];
            }
        }
        Arrays.fill(chunks, live, chunkCount, null);
        Arrays.fill(starts, live, chunkCount, null);
        chunkCount = live;
        size = 0;
        for (int c = 0; c < chunkCount; c++) {
            size += counts[c];
        }
        if (size < before) {
            sweeps++;
        }
        sweepAt = Math.max(SWEEP_AT, 2 * size);
    }

    /** Entries now, busy or not yet swept (for tests). */
    int size() {
        return size;
    }

    /** The entry at position {@code p}, or null for {@link #NONE}. */
    private Entry at(long p) {
        return p == NONE ? null : chunks[(int) (p >>> 32)][(int) p];
    }

    /** The position after {@code p}, or NONE. */
    private long next(long p) {
        int c = (int) (p >>> 32), i = (int) p + 1;
        return i < counts[c] ? p + 1 : c + 1 < chunkCount ? (long) (c + 1) << 32 : NONE;
    }

    private Entry last() {
        return chunks[chunkCount - 1][counts[chunkCount - 1] - 1];
    }

    /** The last chunk whose first entry starts at or before {@code block}, or -1. */
    private int chunkOf(int block) {
        int lo = 0, hi = chunkCount;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (heads[mid] <= block) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo - 1;
    }

    /** The position of the first entry ending after {@code block} (entries are sorted by start and by end alike), or NONE. */
    private long firstEndingAfter(int block) {
        if (size == 0) {
            return NONE;
        }
        // of the entries starting at or before block, only the last can end past it (none overlap); every
        // later one starts past block, so ends past it
        long p = lastStartingBefore(block + 1);
        return p == NONE ? 0 : at(p).end() > block ? p : next(p);
    }

    /** The position of the last entry starting before {@code block}, or NONE. */
    private long lastStartingBefore(int block) {
        int c = chunkOf(block - 1);
        if (c < 0) {
            return NONE;
        }
        int[] st = starts[c];
        int lo = 1, hi = counts[c]; // its first starts before block
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (st[mid] < block) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return (long) c << 32 | (lo - 1);
    }

    /** Puts {@code e} in order, after every entry starting before it; a full chunk splits in two first. */
    private void insert(Entry e) {
        if (chunkCount == 0) {
            addChunk(0, new Entry[CHUNK], new int[CHUNK]);
        }
        int c = Math.max(0, chunkOf(e.start));
        if (counts[c] == CHUNK) {
            Entry[] upper = new Entry[CHUNK];
            int[] upperStarts = new int[CHUNK];
            int half = CHUNK / 2;
            System.arraycopy(chunks[c], half, upper, 0, CHUNK - half);
            System.arraycopy(starts[c], half, upperStarts, 0, CHUNK - half);
            Arrays.fill(chunks[c], half, CHUNK, null);
            counts[c] = half;
            addChunk(c + 1, upper, upperStarts);
            counts[c + 1] = CHUNK - half;
            heads[c + 1] = upperStarts[0];
            if (e.start >= heads[c + 1]) {
                c++;
            }
        }
        Entry[] a = chunks[c];
        int[] st = starts[c];
        int n = counts[c], lo = 0, hi = n;
        while (lo < hi) { // after every entry starting at or before it
            int mid = (lo + hi) >>> 1;
            if (st[mid] <= e.start) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        System.arraycopy(a, lo, a, lo + 1, n - lo);
        System.arraycopy(st, lo, st, lo + 1, n - lo);
        a[lo] = e;
        st[lo] = e.start;
        counts[c] = n + 1;
        heads[c] = st[0];
        size++;
    }

    private void addChunk(int c, Entry[] chunk, int[] chunkStarts) {
        if (chunkCount == chunks.length) {
            chunks = Arrays.copyOf(chunks, 2 * chunkCount);
            starts = Arrays.copyOf(starts, 2 * chunkCount);
            counts = Arrays.copyOf(counts, 2 * chunkCount);
            heads = Arrays.copyOf(heads, 2 * chunkCount);
        }
        System.arraycopy(chunks, c, chunks, c + 1, chunkCount - c);
        System.arraycopy(starts, c, starts, c + 1, chunkCount - c);
        System.arraycopy(counts, c, counts, c + 1, chunkCount - c);
        System.arraycopy(heads, c, heads, c + 1, chunkCount - c);
        chunks[c] = chunk;
        starts[c] = chunkStarts;
        counts[c] = 0;
        chunkCount++;
    }

    private void removeAt(long p) {
        int c = (int) (p >>> 32), i = (int) p;
        Entry[] a = chunks[c];
        int[] st = starts[c];
        int n = counts[c] - 1;
        System.arraycopy(a, i + 1, a, i, n - i);
        System.arraycopy(st, i + 1, st, i, n - i);
        a[n] = null;
        counts[c] = n;
        size--;
        if (n > 0) {
            heads[c] = st[0];
            return;
        }
        System.arraycopy(chunks, c + 1, chunks, c, chunkCount - c - 1);
        System.arraycopy(starts, c + 1, starts, c, chunkCount - c - 1);
        System.arraycopy(counts, c + 1, counts, c, chunkCount - c - 1);
        System.arraycopy(heads, c + 1, heads, c, chunkCount - c - 1);
        chunks[--chunkCount] = null;
        starts[chunkCount] = null;
    }
}
