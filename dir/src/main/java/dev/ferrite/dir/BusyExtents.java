package dev.ferrite.dir;

import java.util.ArrayList;
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
 * block is never handed out, so never freed again), and stay sorted by start.
 */
final class BusyExtents {
    /** Entries past which {@link #add} sweeps out the durable ones. */
    private static final int SWEEP_AT = 64;

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
    private final ArrayList<Entry> entries = new ArrayList<>();
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
        int n = entries.size();
        // also once the last entry is durable: the frees after a sync then append again ({@link #firstEndingAfter})
        if (n >= sweepAt || n > 0 && entries.get(n - 1).seq <= durable) {
            sweep(durable, 0);
        }
        int k = firstEndingAfter(start);
        if (joinable && k > 0) {
            Entry before = entries.get(k - 1);
            if (before.joinable && before.end() == start && before.seq > durable && before.seq == currentSeq.getAsLong()
                    && (k == entries.size() || entries.get(k).start >= start + length)) {
                before.seq = Entry.PENDING; // settled again by this free's commit, with its sequence
                before.length += length;
                kept += length;
                return before;
            }
        }
        Entry e = new Entry(this, start, length, joinable);
        // a durable entry may still cover some of these blocks (allocated and freed again since)
        while (k < entries.size() && entries.get(k).start < e.end()) {
            Entry old = entries.remove(k);
            kept -= old.length;
            if (old.seq > durable) {
                throw new IllegalStateException("blocks [" + start + ", +" + length + ") are freed again while ["
                        + old.start + ", +" + old.length + ") of them are still busy: allocators must skip busy blocks");
            }
        }
        entries.add(k, e);
        kept += length;
        return e;
    }

    /** Drops entry {@code e}: its free was undone (its blocks taken again) before it became durable. */
    void remove(Entry e) {
        if (entries.remove(e)) {
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
            sweep(durable, 0); // else none can have become durable since the last: a group's own frees stay busy
        }
        return kept;
    }

    /** The first busy block of {@code [from, to)}, or {@code to} if none is. */
    int firstBusy(int from, int to) {
        if (entries.isEmpty()) {
            return to;
        }
        long durable = durableSeq.getAsLong();
        for (int k = firstEndingAfter(from); k < entries.size(); ) {
            Entry e = entries.get(k);
            if (e.start >= to) {
                break;
            }
            if (e.seq <= durable) {
                k = sweep(durable, k);
                continue;
            }
            return Math.max(from, e.start);
        }
        return to;
    }

    /** The last busy block of {@code [from, to)}, or {@code from - 1} if none is. */
    int lastBusy(int from, int to) {
        if (entries.isEmpty()) {
            return from - 1;
        }
        long durable = durableSeq.getAsLong();
        // entries after the first one ending at or past to start at or past it
        for (int k = Math.min(firstEndingAfter(to - 1), entries.size() - 1); k >= 0; k--) {
            Entry e = entries.get(k);
            if (e.start >= to) {
                continue;
            }
            if (e.end() <= from) {
                break;
            }
            if (e.seq <= durable) {
                k = sweep(durable, k + 1); // the loop steps back to the last entry kept before it
                continue;
            }
            return Math.min(to - 1, e.end() - 1);
        }
        return from - 1;
    }

    /**
     * Drops every entry durable by {@code durable} at once, and returns where index {@code k} went: one
     * pass for all of them, where dropping each as a lookup met it shifted the rest of the list every time
     * (a run of allocations after a synced run of n frees paid n shifts of up to n entries).
     */
    private int sweep(long durable, int k) {
        sweptSettles = settles.get(); // before the pass: an entry settled during it is seen by the next
        sweptDurable = durable;
        int n = 0, at = k;
        for (int i = 0; i < entries.size(); i++) {
            Entry e = entries.get(i);
            if (e.seq > durable) {
                entries.set(n++, e);
            } else {
                kept -= e.length;
                if (i < k) {
                    at--;
                }
            }
        }
        if (n < entries.size()) {
            entries.subList(n, entries.size()).clear();
            sweeps++;
        }
        sweepAt = Math.max(SWEEP_AT, 2 * n);
        return at;
    }

    /** Entries now, busy or not yet swept (for tests). */
    int size() {
        return entries.size();
    }

    /**
     * Index of the first entry ending after {@code block} (entries are sorted by start and by end alike).
     * Past the last entry's end at once: frees in block order (values deleted in the order they were
     * written) append, where the search met some 14 entries scattered on the heap with 16,000 busy.
     */
    private int firstEndingAfter(int block) {
        int lo = 0, hi = entries.size();
        if (hi == 0 || entries.get(hi - 1).end() <= block) {
            return hi;
        }
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (entries.get(mid).end() <= block) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }
}
