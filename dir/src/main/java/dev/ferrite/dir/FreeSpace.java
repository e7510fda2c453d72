package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.journal.internal.Journal;

import static dev.ferrite.dir.AgHeaderFormat.FIRST_FREE;
import static dev.ferrite.dir.AgHeaderFormat.FREE_BLOCKS;
import static dev.ferrite.dir.AgHeaderFormat.PENDING_COUNT;
import static dev.ferrite.dir.AgHeaderFormat.u64;
import static dev.ferrite.dir.AllocationGroup.AGF;
import static dev.ferrite.dir.AllocationGroup.BUSY_RETRIES;
import static dev.ferrite.dir.AllocationGroup.LIST_MOST;
import static dev.ferrite.dir.AllocationGroup.NONE;
import static dev.ferrite.dir.AllocationGroup.OP_BLOCKS;
import static dev.ferrite.dir.AllocationGroup.RESERVE;
import static dev.ferrite.dir.AllocationGroup.addU64;
import static dev.ferrite.dir.AllocationGroup.lock;
import static dev.ferrite.dir.InodeRecords.RETRIES;

/**
 * A group's free space, the xfs_alloc role: the two free-space trees (free extents by start,
 * {@link #bno}, and by length, {@link #cnt}), extent allocation and freeing, and keeping both of the
 * group's free lists between their reserve and four times it.
 *
 * <h2>Locks</h2>
 * Every change here is made under the AGF buffer's lock, held by the transaction to commit; refilling the
 * free lists takes the AGI first, then the AGF ({@link AllocationGroup}'s order). Reads of the trees go
 * through {@link BTree#find} with the transaction holding the AGF.
 *
 * <h2>Busy blocks</h2>
 * A metadata block freed since the last checkpoint is {@link BufferCache#isBusy busy}, and so is a file's
 * data block freed by a transaction not yet durable ({@link BusyExtents}). Allocations take a range
 * of an extent with no busy block, looking at up to {@value #BUSY_CANDIDATES} extents; if all of those
 * are busy they answer {@link AllocOutcome#BUSY}, and the caller lets go of its locks and runs
 * {@link #awaitBusy} before trying again.
 */
final class FreeSpace {
    /** Free extents looked at for blocks that are not busy before giving up and forcing the log. */
    private static final int BUSY_CANDIDATES = 8;
    /** Free extents {@link #findUsableAnywhere} looks at before it gives up. */
    private static final int REFILL_CANDIDATES = 4096;
    /** Tree operations one free-list refill transaction runs at most. */
    private static final int REFILL_OPS = 2;
    /**
     * Changing operations one free-space change runs on each free-space tree at most (a free merging
     * with both neighbours: two deletes and an insert); each tree's {@link BTree#reservation()} covers one.
     */
    private static final int FREE_SPACE_OPS = 3;
    /**
     * What a free-space change may take beyond {@link #blockItems()} once both trees have grown a level
     * (a new root each: {@link BTree#reservation()} grows by 3 + 1 items a level, per operation). A batch
     * of {@link #releaseSingles} raises a tree at most once: a new root needs a full level of splits to
     * split again.
     */
    private static final int ROOT_SPLIT_ITEMS = 2 * FREE_SPACE_OPS * 4;
    /** What a claiming {@link #allocPair} claims: its two blocks and two free-space changes' worst growth. */
    private static final int PAIR_CLAIM = 2 + 2 * OP_BLOCKS;

    private final BufferCache cache;
    private final Counters counters;
    private final int agno;
    private final long start;
    private final int length;
    private final Buffer agf;
    private final Buffer agi;
    private final FreeList agfl;
    private final FreeList agil;
    private final Refcounts refcounts;
    /** The free extents by start block; set once when the group is formatted or opened. */
    BTree bno;
    /** The free extents by length, then start; set with {@link #bno}. */
    BTree cnt;
    /** Under the AGF: the first block the last {@link #allocBlocks} that came to DONE handed out. */
    private long allocated;
    /** Under the AGF: file-data blocks freed by transactions not yet durable. */
    private final BusyExtents busyData;
    /** Under the AGF: what the last {@link #releaseData} made busy. */
    private BusyExtents.Entry freed;
    /**
     * Under the AGF: what {@link #findUsableAnywhere} learned (a free list's refill, an allocation inside a
     * journal group). Inside a group of overwrites the extents passed are the group's own frees, busy to its
     * end, and the search for each allocation met every one of them again (a third of a 16 KiB batch's
     * samples): it starts past them instead.
     */
    private final Passed passedAnywhere = new Passed();
    /**
     * Under the AGF: what {@link #allocBlocks}' look at a few extents learned ({@link #findUsableNoting}),
     * apart from {@link #passedAnywhere}: the two look for runs of different lengths (a value's blocks, a
     * free list's one), and each would make the other start from the first extent again.
     */
    private final Passed passedAlloc = new Passed();
    /** Under the AGF: free extents {@link #findUsableAnywhere} has looked at (for tests: each look is a tree lookup). */
    long anywhereLooks;
    /** Under the AGF: lookups in the tree by length (for tests). */
    long lengthLooks;
    /** Under the AGF: a {@link #releaseData} is entering its blocks, busy once it is done ({@link #noteFree}). */
    private boolean freeingData;
    /** See {@link #mayAddChunk}: set by a chunk allocation that found no room, cleared by any free. */
    private volatile boolean chunkless;
    /**
     * Under the AGF: the trees' keys and values, in and out, reused by every lookup and change here (each
     * method has read what it found before the next one runs), so that an allocation or a free makes no
     * garbage: on a fresh heap each new page costs a fault.
     */
    private final MemorySegment key = scratch(4), newKey = scratch(4), value = scratch(4), floorKey = scratch(4),
            floorValue = scratch(4), ceilingKey = scratch(4), ceilingValue = scratch(4), sizeKey = scratch(8),
            newSizeKey = scratch(8);
    /** Under the AGF: what {@link #bnoAround} found. */
    private final long[] around = new long[2];
    /** Under the AGF: changes of the free-space trees so far (each {@link #insertExtent}, {@link #removeExtent}, {@link #moveExtent}; read by tests). */
    long treeChanges;
    /**
     * Under the AGF: the free extent the last {@link #freeExtent} left (packed) and the one after it in the
     * tree by start (-1: none), as they are while {@link #treeChanges} is {@code nextChanges}; -1 there:
     * not known. A free starting between the two (where that extent ends, as deletes in the order the
     * values were written free; or further on, as sorted frees of scattered values do) knows its
     * neighbours without looking them up.
     */
    private long lastFreed, nextFree, nextChanges = -1;
    /** Under the AGF: lookups of a free's neighbours in the tree by start (for tests). */
    long aroundLooks;
    /** Entries the AGF's pending-free list holds at most. */
    private final int pendingCapacity;
    /** Under the AGF: the blocks of the pending-free list's entries (summed at open, kept by each change). */
    private long pendingBlocks;
    /** The pending-free list's count, written under the AGF: read without it by {@link #pendingCount}. */
    private volatile int pendingSeen;
    /** Under the AGF: a {@link #drain} is freeing its entries, whose blocks the counters count free already. */
    private boolean draining;
    /** Under the AGF: pending-free drains that changed the trees, and the extents they freed (for tests). */
    long drains, drainedRanges;

    FreeSpace(AllocationGroup ag, BufferCache cache, Counters counters) {
        this.cache = cache;
        this.counters = counters;
        this.agno = ag.agno;
        this.start = ag.start;
        this.length = ag.length;
        this.agf = ag.agf;
        this.agi = ag.agi;
        this.agfl = ag.agfl;
        this.agil = ag.agil;
        this.refcounts = ag.refcounts;
        this.busyData = new BusyExtents(cache.journal()::durableSeq, cache.journal()::allSeq);
        this.pendingCapacity = AgHeaderFormat.pendingCapacity(cache.blockSize());
    }

    private static MemorySegment scratch(int bytes) {
        return MemorySegment.ofArray(new byte[bytes]);
    }

    /** The free block count in the AGF, read without the lock. */
    long freeBlockCount() {
        return AllocationGroup.snapshot(agf, FREE_BLOCKS);
    }

    /**
     * Free blocks data and inode chunks leave in the trees: what the free lists lack of their most
     * ({@link FreeList#lack}), so that refilling them can always succeed, and the refcount tree's
     * reservation (a hint without the AGF and the AGI).
     */
    long heldBack() {
        return FreeList.lack(agfl.count()) + FreeList.lack(agil.count()) + refcounts.reserve();
    }

    /**
     * A hint: false once a chunk did not fit (too few free blocks, or no free extent of a chunk's
     * length), true again when blocks come back. Creates pass over a group with no free inode and no
     * chunk room rather than pay a failing attempt each; it may be stale either way.
     */
    boolean mayAddChunk() {
        return !chunkless;
    }

    /** With the AGF held: a chunk allocation found no room (see {@link #mayAddChunk}). */
    void noChunkRoom() {
        chunkless = true;
    }

    /** Items one free-space change (an extent taken or freed) may change in the two free-space trees. */
    int freeSpaceItems() {
        return FREE_SPACE_OPS * (bno.reservation() + cnt.reservation());
    }

    // ------------------------------------------------------------------ extents (AGF held)

    static long extent(int start, int length) {
        return (long) start << 32 | Integer.toUnsignedLong(length);
    }

    static int extentStart(long e) {
        return (int) (e >>> 32);
    }

    static int extentLength(long e) {
        return (int) e;
    }

    /** With the AGF held: true if a free extent has at least {@code len} blocks (busy or not). */
    boolean hasExtent(Txn txn, int len) {
        return extentAtLeast(txn, len) >= 0;
    }

    /** The smallest free extent of at least {@code len} blocks, or -1. */
    private long extentAtLeast(Txn txn, int len) {
        return cntFind(txn, len, 0, BTree.Match.CEILING);
    }

    /** The largest free extent, or -1. */
    private long largestExtent(Txn txn) {
        return cntFind(txn, -1, -1, BTree.Match.FLOOR);
    }

    private long cntFind(Txn txn, int len, int from, BTree.Match match) {
        lengthLooks++;
        AgTreeFormat.cntKey(sizeKey, len, from);
        if (cnt.find(txn, sizeKey, match, newSizeKey, NONE) < 0) {
            return -1;
        }
        return treeExtent(AgTreeFormat.cntStart(newSizeKey), AgTreeFormat.cntLength(newSizeKey));
    }

    /** An extent a free-space tree holds: inside the group past its headers, or the trees are corrupt. */
    private long treeExtent(int s, int len) {
        if (len <= 0 || s < FIRST_FREE || s > length - len) {
            throw new CorruptionException(agf.block(), AGF, "group " + agno + "'s free-space trees hold the extent ["
                    + Integer.toUnsignedString(s) + ", +" + Integer.toUnsignedString(len) + "), not inside [" + FIRST_FREE + ", " + length + ")");
        }
        return extent(s, len);
    }

    /** The free extent starting at or before ({@code floor}) or at or after {@code block}, or -1. */
    private long bnoFind(Txn txn, int block, BTree.Match match) {
        AgTreeFormat.key32(key, block);
        if (bno.find(txn, key, match, floorKey, floorValue) < 0) {
            return -1;
        }
        return treeExtent(AgTreeFormat.key32(floorKey), AgTreeFormat.length(floorValue));
    }

    /**
     * The free extents starting at or before and at or after {@code block} (-1 for none), in one descent of
     * the by-block tree: a free's two neighbours (in {@link #around}, valid until the next call).
     */
    private long[] bnoAround(Txn txn, int block) {
        aroundLooks++;
        AgTreeFormat.key32(key, block);
        long[] found = around;
        bno.findAround(txn, key, floorKey, floorValue, ceilingKey, ceilingValue, found);
        found[0] = found[0] < 0 ? -1 : treeExtent(AgTreeFormat.key32(floorKey), AgTreeFormat.length(floorValue));
        found[1] = found[1] < 0 ? -1 : treeExtent(AgTreeFormat.key32(ceilingKey), AgTreeFormat.length(ceilingValue));
        return found;
    }

    void insertExtent(Txn txn, int s, int len) {
        AgTreeFormat.key32(key, s);
        AgTreeFormat.lengthValue(value, len);
        AgTreeFormat.cntKey(sizeKey, len, s);
        treeChanges++;
        if (!bno.putIfAbsent(txn, key, value) || !cnt.putIfAbsent(txn, sizeKey, NONE)) {
            throw new CorruptionException(agf.block(), AGF, "free extent [" + s + ", +" + len + ") is already in the"
                    + " free-space trees of group " + agno);
        }
        noteFree(s, len);
    }

    private void removeExtent(Txn txn, int s, int len) {
        AgTreeFormat.key32(key, s);
        AgTreeFormat.cntKey(sizeKey, len, s);
        treeChanges++;
        if (!bno.delete(txn, key) || !cnt.delete(txn, sizeKey)) {
            throw new CorruptionException(agf.block(), AGF, "free extent [" + s + ", +" + len + ") of group " + agno
                    + " is missing from one of the free-space trees");
        }
    }

    /**
     * Makes free extent {@code [s, +len)} {@code [ns, +nl)}, the two overlapping or touching (a head or tail
     * taken, a neighbour joined) so that no other free extent lies between: each tree's entry changes in
     * place where that keeps its order ({@link BTree#replaceInPlace}: one change instead of a delete and an
     * insert), else it is deleted and inserted.
     */
    private void moveExtent(Txn txn, int s, int len, int ns, int nl) {
        AgTreeFormat.key32(key, s);
        AgTreeFormat.key32(newKey, ns);
        AgTreeFormat.lengthValue(value, nl);
        AgTreeFormat.cntKey(sizeKey, len, s);
        AgTreeFormat.cntKey(newSizeKey, nl, ns);
        treeChanges++;
        if (!bno.replaceInPlace(txn, key, newKey, value) && (!bno.delete(txn, key) || !bno.putIfAbsent(txn, newKey, value))
                || !cnt.replaceInPlace(txn, sizeKey, newSizeKey, NONE)
                && (!cnt.delete(txn, sizeKey) || !cnt.putIfAbsent(txn, newSizeKey, NONE))) {
            throw new CorruptionException(agf.block(), AGF, "free extent [" + s + ", +" + len + ") of group " + agno
                    + " is missing from one of the free-space trees, or [" + ns + ", +" + nl + ") is already in one");
        }
        noteFree(ns, nl);
    }

    void addFree(Txn txn, long delta) {
        addU64(txn, agf, FREE_BLOCKS, delta);
        counters.freeBlocks.add(delta);
    }

    /**
     * Takes the range {@code r} (packed like an extent) from the free extent {@code e}: from its head or
     * tail, the extent's entries change ({@link #moveExtent}); from its middle, the tail's go in too.
     */
    void takeRange(Txn txn, long e, long r) {
        int s = extentStart(e), l = extentLength(e), rs = extentStart(r), rl = extentLength(r);
        if (rs > s) { // the head stays free: its entry keeps its key
            moveExtent(txn, s, l, s, rs - s);
            if (rs + rl < s + l) { // a range from the middle
                insertExtent(txn, rs + rl, s + l - rs - rl);
            }
        } else if (rl < l) { // the tail stays free
            moveExtent(txn, s, l, rs + rl, l - rl);
        } else {
            removeExtent(txn, s, l);
        }
        addFree(txn, -rl);
    }

    /** Whether a freed metadata block is busy (file data's busy blocks are {@link #busyData}'s). */
    private boolean busy(int groupBlock) {
        return cache.isBusy(start + groupBlock);
    }

    /**
     * Up to {@code want} blocks, at least {@code min}, at the start or the end of free extent {@code e}
     * that are not busy (packed like an extent), or -1.
     */
    private long usableEnd(long e, int min, int want) {
        int s = extentStart(e), l = extentLength(e), n = Math.min(want, l);
        int headEnd = busyData.firstBusy(s, s + n);
        int head = 0;
        while (s + head < headEnd && !busy(s + head)) {
            head++;
        }
        if (head >= min) {
            return extent(s, head);
        }
        int tailStart = busyData.lastBusy(s + l - n, s + l) + 1;
        int tail = 0;
        while (s + l - 1 - tail >= tailStart && !busy(s + l - 1 - tail)) {
            tail++;
        }
        return tail >= min ? extent(s + l - tail, tail) : -1;
    }

    /**
     * With the AGF held: where to take up to {@code want} (at least {@code min}) contiguous blocks that
     * are not busy, as {extent, range}; null if the free extents looked at hold none.
     */
    long[] findUsable(Txn txn, int min, int want) {
        return findUsable(txn, extentAtLeast(txn, want), min, want, -1);
    }

    /**
     * {@link #findUsable}, given the smallest free extent of at least {@code want} blocks ({@code e}, or
     * -1), in any free extent but {@code skip} (-1: none).
     */
    private long[] findUsable(Txn txn, long e, int min, int want, long skip) {
        for (int i = 0; i < BUSY_CANDIDATES && e >= 0; i++) {
            long r = e == skip ? -1 : usableEnd(e, min, want);
            if (r >= 0) {
                return new long[] {e, r};
            }
            e = cntFind(txn, extentLength(e), extentStart(e) + 1, BTree.Match.CEILING);
        }
        return usableInLargest(txn, min, want, skip);
    }

    /**
     * {@link #findUsable} for {@link #allocBlocks} of {@code len} blocks from free extent {@code e}: the
     * smallest of at least {@code len} blocks, or the first past those known to have no such run (when
     * {@link #passedAlloc} holds); noting the extents it passes as {@link #findUsableAnywhere} does, so that the next
     * allocation starts past them. Single overwrites of medium values, each a transaction, leave the free
     * space in holes of the values' length, the recent ones busy: after each sweep every allocation met
     * the same busy holes before it took the next usable one or fell back on the largest extent (6 lookups
     * in the tree by length an overwrite of a 16 KiB value, a third of its time).
     */
    private long[] findUsableNoting(Txn txn, long e, int len) {
        long sweeps = busyData.sweeps(); // before the look: a sweep during it may make an extent passed usable
        for (int i = 0; i < BUSY_CANDIDATES && e >= 0; i++) {
            long r = usableEnd(e, len, len);
            if (r >= 0) {
                if (i > 0) {
                    passedAlloc.upTo(len, e, sweeps);
                }
                return new long[] {e, r};
            }
            e = cntFind(txn, extentLength(e), extentStart(e) + 1, BTree.Match.CEILING);
        }
        if (e >= 0) {
            passedAlloc.upTo(len, e, sweeps); // the next one, not looked at: every one before it was
        }
        return usableInLargest(txn, len, len, -1);
    }

    /** {@link #findUsable}'s last resort: up to {@code want} blocks, at least {@code min}, of the largest free extent unless it is {@code skip}. */
    private long[] usableInLargest(Txn txn, int min, int want, long skip) {
        long largest = largestExtent(txn);
        if (largest == skip) {
            return null;
        }
        long r = largest < 0 || extentLength(largest) < min ? -1 : usableEnd(largest, min, want);
        if (r < 0 && largest >= 0 && extentLength(largest) >= min) {
            r = usableInside(largest, min, want);
        }
        return r < 0 ? null : new long[] {largest, r};
    }

    /**
     * Up to {@code want} blocks, at least {@code min}, that are not busy, looked for further than {@link
     * #findUsable} looks: the free extents from the smallest of {@code min} blocks up, up to {@value
     * #REFILL_CANDIDATES} of them. For a free list's refill, and an allocation inside a journal group,
     * which no wait helps: where free space lies in small extents, many of them busy (the group's frees,
     * busy to its end), findUsable looks at a few extents of the length wanted and at the largest, all busy,
     * while most of the group's free blocks are not; a group's free then failed for want of a refill.
     */
    private long[] findUsableAnywhere(Txn txn, int min, int want) {
        long sweeps = busyData.sweeps(); // before the look: a sweep during it may make an extent passed usable
        boolean skip = passedAnywhere.holds(min);
        long e = skip ? passedAnywhere.next(txn) : extentAtLeast(txn, min);
        for (int i = 0; i < REFILL_CANDIDATES && e >= 0; i++) {
            anywhereLooks++;
            long r = usableEnd(e, min, want);
            if (r >= 0) {
                passedAnywhere.upTo(min, e, sweeps); // those passed have no run of min at an end (those skipped none of min' <= min)
                return new long[] {e, r};
            }
            e = cntFind(txn, extentLength(e), extentStart(e) + 1, BTree.Match.CEILING);
        }
        passedAnywhere.forget();
        return skip ? findUsableAnywhere(txn, min, want) : null; // a usable extent may have come among those skipped
    }

    /**
     * Free extents a search found no run of blocks in that are not busy, at either end, and need not look
     * at again. Every free extent whose key (length, start) lies in [({@code min}, 0), ({@code toLength},
     * {@code toStart})) has fewer than {@code min} such blocks at either end, as it had when the busy list's
     * {@link BusyExtents#sweeps} was {@code sweeps}; {@code min} 0: nothing learned. Kept true by every entry
     * made ({@link #noteFree}: one that is usable shortens the range), and dropped once a sweep may have
     * made some usable; a search that finds nothing past them searches from the start. Under the AGF.
     */
    private final class Passed {
        int min, toLength, toStart;
        long sweeps;

        /** The extents before free extent {@code e} have no run of {@code min} at an end, as at {@code sweeps}. */
        void upTo(int min, long e, long sweeps) {
            this.min = min;
            this.toLength = extentLength(e);
            this.toStart = extentStart(e);
            this.sweeps = sweeps;
        }

        void forget() {
            min = 0;
        }

        /** Whether it knows of extents to pass in a look for {@code min} blocks. */
        boolean holds(int min) {
            return this.min > 0 && min >= this.min && sweeps == busyData.sweeps() && below(min, 0, toLength, toStart);
        }

        /** The first free extent past those known, or -1. */
        long next(Txn txn) {
            return cntFind(txn, toLength, toStart, BTree.Match.CEILING);
        }

        /** {@link #noteFree} of {@code [s, +len)}: a usable extent entered among those passed ends the range before it. */
        void entered(int s, int len) {
            if (min > 0 && !below(len, s, min, 0) && below(len, s, toLength, toStart) && usableEnd(extent(s, len), min, min) >= 0) {
                toLength = len;
                toStart = s;
            }
        }
    }

    /** Whether key (length {@code l1}, start {@code s1}) of the tree by size comes before ({@code l2}, {@code s2}). */
    private static boolean below(int l1, int s1, int l2, int s2) {
        return l1 < l2 || l1 == l2 && s1 < s2;
    }

    /**
     * Free extent {@code [s, +len)} was just entered in the trees (freed, joined to neighbours, or what an
     * allocation left of one): if it lies among those a search passes ({@link Passed}) and has {@code
     * min} blocks that are not busy at an end, the range passed ends before it. Not for a file-data free
     * ({@link #freeingData}): its blocks are busy, and a neighbour it joins has no such run at its other
     * end if it was passed, and is shorter than min or ordered past the range (its join longer still) if it
     * was not, so such frees shorten nothing.
     */
    private void noteFree(int s, int len) {
        if (!freeingData) {
            passedAnywhere.entered(s, len);
            passedAlloc.entered(s, len);
        }
    }

    /**
     * Up to {@code want} blocks, at least {@code min}, from inside free extent {@code e} that are not busy,
     * or -1: for when busy blocks lie at both its ends, as blocks just freed next to it do (a table's
     * tree giving back nodes one commit, and taking blocks the next). Waiting for them instead would
     * force the log at every such commit.
     */
    private long usableInside(long e, int min, int want) {
        int s = extentStart(e), end = s + extentLength(e);
        for (int at = s; at + min <= end; ) {
            int run = 0;
            while (at + run < end && run < want && !busy(at + run) && busyData.firstBusy(at + run, at + run + 1) > at + run) {
                run++;
            }
            if (run >= min) {
                return extent(at, run);
            }
            at += run + 1;
        }
        return -1;
    }

    /**
     * Forces the log so that blocks freed so far stop being busy; call holding no buffer lock. Their
     * items are unpinned by the AIL just after the force returns, so a caller meeting busy blocks again
     * ({@code attempt} > 0) also waits a little, up to a millisecond. Inside a journal group the force
     * reaches only the contexts before the group's, so it also asks for the group's own context to be
     * pushed once the group ends ({@link #waitingHelps}).
     */
    void awaitBusy(int attempt) {
        awaitBusy(attempt, true);
    }

    /**
     * {@link #awaitBusy}, draining the pending-free list first only if {@code drain}: not for a drain's own
     * refill, which found every free block busy (draining again from there would need that refill again,
     * and recursed until the stack overflowed under 100,000 scattered 16 KiB deletes); the force alone
     * makes the blocks freed so far usable. Inside a journal group the drain goes only as far as it can
     * without waiting: the blocks freed in the group's context stay busy to its end, so a drain that
     * needs a refill from them would fail (it threw NoSpaceException from a group commit's free).
     */
    private void awaitBusy(int attempt, boolean drain) {
        if (drain && pendingSeen > 0) {
            // space pending free first: its blocks busy until the drain is durable, which the force makes it
            drainPending(!cache.journal().holdsGroup());
        }
        Journal journal = cache.journal();
        journal.forceAll();
        if (journal.holdsGroup()) {
            journal.requestPush();
        }
        if (attempt > 0) {
            LockSupport.parkNanos(Math.min(1_000_000L, 10_000L << Math.min(attempt, 7)));
        }
    }

    /**
     * Whether waiting can still end the busy state of blocks met {@code waits} times: not inside a journal
     * group after a first wait. Blocks freed since the context the group pins began (by earlier groups
     * too: back-to-back groups of a {@code NONE} writer can keep one context current for as long as they
     * run) stay busy until the group ends, so its holder would wait for ever; it should try another
     * group's space instead.
     */
    boolean waitingHelps(int waits) {
        return waits == 0 || !cache.journal().holdsGroup();
    }

    /** Returns {@code [s, s + len)} (group blocks) to free space, merged with free neighbours. */
    void freeExtent(Txn txn, int s, int len) {
        if (s < FIRST_FREE || len < 1 || s > length - len) {
            throw new InvalidArgumentException("extent [" + s + ", +" + len + ") lies outside the free space of group "
                    + agno + " (blocks " + FIRST_FREE + " to " + length + ")");
        }
        long left, right;
        if (nextChanges == treeChanges && extentStart(lastFreed) + extentLength(lastFreed) <= s
                && (nextFree < 0 || s < extentStart(nextFree))) {
            // the trees unchanged since the last free, which left that extent and knew the one after it: no
            // free extent lies between them, so a free there (beside the last one, or past allocated blocks:
            // a drain's or a group's sorted frees of scattered values) has them as its neighbours
            left = lastFreed;
            right = nextFree;
        } else {
            long[] around = bnoAround(txn, s);
            left = around[0];
            right = around[1];
        }
        if (left >= 0 && extentStart(left) + extentLength(left) > s || right >= 0 && extentStart(right) < s + len) {
            long other = left >= 0 && extentStart(left) + extentLength(left) > s ? left : right;
            throw new CorruptionException(agf.block(), AGF, "group " + agno + " frees blocks [" + s + ", +" + len
                    + ") but [" + extentStart(other) + ", +" + extentLength(other) + ") of them is already free");
        }
        boolean joinsLeft = left >= 0 && extentStart(left) + extentLength(left) == s;
        boolean joinsRight = right >= 0 && extentStart(right) == s + len;
        if (joinsLeft) {
            int nl = extentLength(left) + len;
            if (joinsRight) {
                removeExtent(txn, extentStart(right), extentLength(right));
                nl += extentLength(right);
            }
            moveExtent(txn, extentStart(left), extentLength(left), extentStart(left), nl);
            lastFreed = extent(extentStart(left), nl);
        } else if (joinsRight) {
            moveExtent(txn, extentStart(right), extentLength(right), s, len + extentLength(right));
            lastFreed = extent(s, len + extentLength(right));
        } else {
            insertExtent(txn, s, len);
            lastFreed = extent(s, len);
        }
        // what follows it is right, unless it joined right (then unknown: the next free looks)
        nextFree = right;
        nextChanges = joinsRight ? -1 : treeChanges;
        if (draining) {
            addU64(txn, agf, FREE_BLOCKS, len); // the counters took them when they went on the pending-free list
        } else {
            addFree(txn, len);
        }
        if (chunkless) {
            chunkless = false;
        }
    }

    /** Items an {@link #allocBlocks} or {@link #releaseBlocks} transaction may change. */
    int blockItems() {
        return 1 + freeSpaceItems();
    }

    /**
     * Allocates {@code len} contiguous blocks of this group in {@code txn}, from the smallest free extent
     * that holds them, leaving {@link #heldBack} blocks free for the free lists and the refcount tree.
     *
     * @return DONE (the first block is {@link #allocatedBlock}); or NO_SPACE, NEEDS_REFILL or BUSY, with
     *         nothing changed and the AGF released
     */
    AllocOutcome allocBlocks(Txn txn, int len) {
        return allocBlocks(txn, len, false);
    }

    /**
     * {@link #allocBlocks}, looking past the few extents it looks at for blocks that are not busy
     * ({@link #findUsableAnywhere}) if {@code wide} or inside a journal group, where no wait frees the
     * group's busy blocks.
     */
    private AllocOutcome allocBlocks(Txn txn, int len, boolean wide) {
        lock(txn, agf);
        if (!agfl.holds(RESERVE)) {
            txn.release(agf);
            return AllocOutcome.NEEDS_REFILL;
        }
        AllocOutcome room = roomFor(len);
        // past the extents a look found busy, where it knows of them: the few findUsable looks at first are those
        long[] at = room == AllocOutcome.DONE && passedAlloc.holds(len) ? findUsableNoting(txn, passedAlloc.next(txn), len) : null;
        long e = at != null || room == AllocOutcome.NO_SPACE ? -1 : extentAtLeast(txn, len);
        if (at == null && e < 0) {
            // no free extent holds them, but a drain of the pending frees may make one
            AllocOutcome r = room != AllocOutcome.NO_SPACE && pendingBlocks > 0 ? AllocOutcome.BUSY : AllocOutcome.NO_SPACE;
            txn.release(agf);
            return r;
        }
        boolean anywhere = room == AllocOutcome.DONE && (wide || cache.journal().holdsGroup());
        if (at == null && room == AllocOutcome.DONE) {
            at = findUsableNoting(txn, e, len); // from that extent on: searched once
        }
        if (at == null && anywhere) {
            at = findUsableAnywhere(txn, len, len);
        }
        if (at == null) {
            txn.release(agf);
            return AllocOutcome.BUSY;
        }
        takeCharged(txn, at[0], at[1]);
        allocated = start + extentStart(at[1]);
        return AllocOutcome.DONE;
    }

    /**
     * {@link #takeRange} for an allocation whose claim covers the free-space trees' growth (a direct write's,
     * fallocate's or namespace allocation's {@link AllocationGroup#OP_BLOCKS} beside its blocks, a write-back's
     * pages' share): the nodes it takes off the free list lower the spare count, and nothing is drawn from
     * the set-aside pool.
     */
    void takeCharged(Txn txn, long e, long r) {
        agfl.charged = true;
        try {
            takeRange(txn, e, r);
        } finally {
            agfl.charged = false;
        }
    }

    /**
     * {@link #allocBlocks} for an allocation no promise of blocks covers (a directory's or a table's tree,
     * an inode chunk, a symlink's block, a table value's extent): it claims them first ({@link Counters#claim}),
     * and {@link AllocationGroup#OP_BLOCKS} more for the free-space trees' growth (a split at every level of
     * both), so it never takes blocks dirty pages or allocations in flight were promised, and gives the claim
     * back once its free count moved. NO_SPACE, with nothing changed, if the blocks not promised fall short.
     */
    AllocOutcome allocClaiming(Txn txn, int len) {
        if (!counters.claim(len + OP_BLOCKS)) {
            return AllocOutcome.NO_SPACE;
        }
        try {
            return allocBlocks(txn, len);
        } finally {
            counters.release(len + OP_BLOCKS);
        }
    }

    /**
     * {@link #allocClaiming} of up to {@code want} blocks in one transaction, as extents of {@code min}
     * blocks or a multiple of it, not busy: from the smallest free extent that holds the rest wanted if
     * one does, else from the small ones (the free space a batch of overwrites leaves is the holes of the
     * values it replaced), looking at the few extents {@link #findUsable} looks at each time (among the
     * small ones, from the last one taken from on), never searching further (inside a journal group that
     * search finds the group's own frees, busy to its end). Each extent goes to {@code into} (first device
     * block, length), up to {@code into.length / 2} of them, while the free list holds its reserve and {@code txn} has room for one more free-space
     * change (of the {@code items} it reserved: {@link #runsItems}). For a batch's run of medium values.
     *
     * @return how many extents it took; 0: nothing changed and the AGF released
     */
    int allocRuns(Txn txn, int min, int want, int items, long[] into) {
        int most = into.length / 2;
        int claim = want + Math.min(most, want / min) * OP_BLOCKS; // each take's tree growth, as one allocClaiming's
        if (!counters.claim(claim)) {
            return 0;
        }
        try {
            lock(txn, agf);
            int change = blockItems() + ROOT_SPLIT_ITEMS;
            // no extent grows meanwhile: the largest bounds those the rest wanted could fit in whole, and a
            // look among the small ones goes on past the last one taken from (those before it taken, or
            // busy), where each look started from the smallest and met the busy ones again
            long largest = largestExtent(txn);
            int largestLength = largest < 0 ? 0 : extentLength(largest), fromLength = min, fromStart = 0;
            int n = 0;
            for (int taken = 0; n < most && want - taken >= min && agfl.holds(RESERVE)
                    && (n == 0 || txn.held() + change <= items) && roomFor(min) == AllocOutcome.DONE; n++) {
                long fits = want - taken <= largestLength ? extentAtLeast(txn, want - taken) : -1;
                long[] at = findUsable(txn, fits >= 0 ? fits : cntFind(txn, fromLength, fromStart, BTree.Match.CEILING),
                        min, want - taken, -1);
                if (at == null) {
                    break;
                }
                if (fits < 0) {
                    fromLength = extentLength(at[0]);
                    fromStart = extentStart(at[0]);
                }
                int s = extentStart(at[1]), l = extentLength(at[1]), whole = l / min * min;
                if (s + l == extentStart(at[0]) + extentLength(at[0])) {
                    s += l - whole; // its end kept at the extent's end: the rest stays one free extent
                }
                takeCharged(txn, at[0], extent(s, whole));
                into[2 * n] = start + s;
                into[2 * n + 1] = whole;
                taken += whole;
            }
            if (n == 0) {
                txn.release(agf);
            }
            return n;
        } finally {
            counters.release(claim);
        }
    }

    /**
     * {@link #allocBlocks} of two blocks that need not lie together (a new tree's header and root, where
     * free space lies in single blocks): two at the end of one free extent if it holds them, else one at
     * the end of each of two free extents, both found before either is taken, so that it takes both or
     * nothing: two free-space changes, which the free list's reserve covers ({@link AllocationGroup#RESERVE}).
     * With {@code claiming}, claims them first as {@link #allocClaiming} does.
     *
     * @return DONE, the blocks in {@code into[0]} and {@code into[1]}; or NO_SPACE, NEEDS_REFILL or BUSY,
     *         with nothing changed and the AGF released
     */
    AllocOutcome allocPair(Txn txn, boolean claiming, long[] into) {
        if (claiming && !counters.claim(PAIR_CLAIM)) {
            return AllocOutcome.NO_SPACE;
        }
        try {
            lock(txn, agf);
            if (!agfl.holds(RESERVE)) {
                txn.release(agf);
                return AllocOutcome.NEEDS_REFILL;
            }
            AllocOutcome room = roomFor(2);
            if (room == AllocOutcome.NO_SPACE) {
                txn.release(agf);
                return AllocOutcome.NO_SPACE;
            }
            long[] first = room == AllocOutcome.DONE ? findUsable(txn, 1, 2) : null;
            boolean apart = first != null && extentLength(first[1]) == 1;
            long[] second = apart ? findUsable(txn, extentAtLeast(txn, 1), 1, 1, first[0]) : null;
            if (first == null || apart && second == null) {
                txn.release(agf);
                return AllocOutcome.BUSY;
            }
            takeCharged(txn, first[0], first[1]);
            into[0] = start + extentStart(first[1]);
            into[1] = into[0] + 1;
            if (apart) {
                takeCharged(txn, second[0], second[1]);
                into[1] = start + extentStart(second[1]);
            }
            return AllocOutcome.DONE;
        } finally {
            if (claiming) {
                counters.release(PAIR_CLAIM);
            }
        }
    }

    /**
     * Half of a pair taken from two groups ({@link DirContents}, where no group holds two blocks past those
     * it holds back): with the AGF locked, one block that is not busy, found but not taken yet ({extent,
     * range}, for {@link #takeHalf}); null, the AGF released, if the group has none to give.
     */
    long[] findHalf(Txn txn) {
        lock(txn, agf);
        long[] at = agfl.holds(RESERVE) && roomFor(1) == AllocOutcome.DONE ? findUsable(txn, 1, 1) : null;
        if (at == null) {
            txn.release(agf);
        }
        return at;
    }

    /** Takes the block {@link #findHalf} found in {@code txn}, as {@link #allocPair} takes its blocks; returns it. */
    long takeHalf(Txn txn, long[] at) {
        takeCharged(txn, at[0], at[1]);
        return start + extentStart(at[1]);
    }

    /** Claims what a claiming {@link #allocPair} claims, for a pair taken from two groups: false, nothing claimed, if the spare blocks fall short. */
    boolean claimPair() {
        return counters.claim(PAIR_CLAIM);
    }

    /** Gives back {@link #claimPair}'s claim. */
    void releasePair() {
        counters.release(PAIR_CLAIM);
    }

    /** Items an {@link #allocPair} transaction may change: two free-space changes, the trees a level higher after the first. */
    int pairItems() {
        return blockItems() + freeSpaceItems() + ROOT_SPLIT_ITEMS;
    }

    /**
     * Like {@link #allocBlocks}, but first tries the {@code len} blocks from device block {@code near} (the
     * block after a file's last extent, so that the file grows in place): taken if a free extent starts
     * there, holds them and none of them is busy. If not, and {@code apart}, the blocks at the middle of
     * the largest free extent, if it holds them twice over and none is busy: a growing file whose
     * neighbour took the blocks after it moves to a region of its own, halfway between whoever grows into
     * the head of that extent and whatever follows it, instead of alternating with its neighbour (two
     * files appended at once would otherwise end in an extent per preallocation each). Else the smallest
     * free extent that holds them.
     */
    AllocOutcome allocBlocksNear(Txn txn, long near, int len, boolean apart) {
        lock(txn, agf);
        if (agfl.holds(RESERVE) && near > start && near < start + length && roomFor(len) == AllocOutcome.DONE) {
            long e = bnoFind(txn, (int) (near - start), BTree.Match.CEILING);
            if (e >= 0 && extentStart(e) == near - start && extentLength(e) >= len && usableEnd(e, len, len) == extent(extentStart(e), len)) {
                takeCharged(txn, e, extent(extentStart(e), len));
                allocated = near;
                return AllocOutcome.DONE;
            }
            long largest = apart ? largestExtent(txn) : -1;
            if (largest >= 0 && extentLength(largest) >= 2L * len) {
                int mid = extentStart(largest) + (extentLength(largest) - len) / 2;
                if (!anyBusy(mid, len)) {
                    takeCharged(txn, largest, extent(mid, len));
                    allocated = start + mid;
                    return AllocOutcome.DONE;
                }
            }
        }
        return allocBlocks(txn, len);
    }

    /**
     * With the AGF held, whether the group's free blocks leave {@link #heldBack} after {@code len} more are
     * taken: NO_SPACE if they do not, BUSY if those that are not busy do not, else DONE. The free lists
     * refill only from blocks not busy, and inside a journal group the blocks the group freed stay busy to
     * its end: an allocation that counted them as free took the last blocks that were not, and the group's
     * next free, finding its free list short, could not refill it, nor could the undo of the group that
     * failed there (a 16 KiB table's batch of 1,000 overwrites shut the volume down with 43% of it free).
     * On BUSY an allocator inside a group goes to another group, one outside waits for a force.
     */
    AllocOutcome roomFor(long len) {
        long free = u64(agf.data(), FREE_BLOCKS), need = len + heldBack();
        if (free < need) { // blocks pending free are free once drained, which awaitBusy does before it forces
            return free + pendingBlocks >= need ? AllocOutcome.BUSY : AllocOutcome.NO_SPACE;
        }
        return free - busyData.keptBlocks() >= need || free - busyData.busyBlocks() >= need ? AllocOutcome.DONE : AllocOutcome.BUSY;
    }

    /** Whether any of group blocks {@code [s, s + len)} is busy. */
    private boolean anyBusy(int s, int len) {
        if (busyData.firstBusy(s, s + len) < s + len) {
            return true;
        }
        for (int b = s; b < s + len; b++) {
            if (busy(b)) {
                return true;
            }
        }
        return false;
    }

    /**
     * The first device block of what {@link #allocBlocks} handed out in {@code txn}, which still holds the
     * AGF (nobody else can allocate here meanwhile); read it before the transaction's next allocation here.
     */
    long allocatedBlock(Txn txn) {
        if (!txn.holds(agf)) {
            throw new IllegalStateException("the AGF of group " + agno + " is not held");
        }
        return allocated;
    }

    /**
     * Frees {@code [block, block + len)} (device blocks of this group) in {@code txn}.
     *
     * @return DONE; or NEEDS_REFILL, with nothing changed and the AGF released
     */
    AllocOutcome releaseBlocks(Txn txn, long block, int len) {
        if (!lockForRelease(txn)) {
            return AllocOutcome.NEEDS_REFILL;
        }
        freeExtent(txn, (int) (block - start), len);
        counters.repay(len);
        return AllocOutcome.DONE;
    }

    /**
     * Takes the AGF in {@code txn} for a {@link #releaseBlocks} or {@link #releaseData} to come, which then
     * cannot answer NEEDS_REFILL while {@code txn} holds it (nothing else takes from the free list
     * meanwhile). False, with the AGF released, if the free list needs a refill first.
     */
    boolean lockForRelease(Txn txn) {
        lock(txn, agf);
        if (!agfl.holds(RESERVE)) {
            txn.release(agf);
            return false;
        }
        return true;
    }

    /**
     * {@link #lockForRelease} only if no other transaction holds the AGF now: for a caller holding a table
     * leaf's lock, which a holder of the AGF (an allocation about to insert its key) may be waiting for.
     */
    boolean tryLockForRelease(Txn txn) {
        if (!txn.tryLock(agf)) {
            return false;
        }
        if (!agfl.holds(RESERVE)) {
            txn.release(agf);
            return false;
        }
        return true;
    }

    /**
     * Frees single blocks of this group in {@code txn}, in ascending order ({@code blocks[0..n)} is sorted
     * here), neighbours as one extent: each extent only while the free list holds its reserve and
     * {@code txn} has room for one more free-space change, with its trees a level higher, and one more
     * item (of the {@code items} it reserved). Returns how many of the blocks it freed, a
     * prefix of the sorted array; 0 (NEEDS_REFILL): nothing changed and the AGF released.
     */
    int releaseSingles(Txn txn, long[] blocks, int n, int items) {
        lock(txn, agf);
        // read before any change: a tree's height is read from its header, which a root split here locks
        int change = blockItems() + ROOT_SPLIT_ITEMS;
        Arrays.sort(blocks, 0, n);
        int freed = 0;
        while (freed < n && agfl.holds(RESERVE) && txn.held() + change < items) {
            int len = 1;
            while (freed + len < n && blocks[freed + len] == blocks[freed] + len) {
                len++;
            }
            freeExtent(txn, (int) (blocks[freed] - start), len);
            counters.repay(len);
            freed += len;
        }
        if (freed == 0) {
            txn.release(agf);
        }
        return freed;
    }

    /**
     * Items a {@link #releaseDataRuns} transaction reserves: one free-space change with its trees a level
     * higher, the AGF, and room for the frees after the first, which go on while one more could not pass
     * the reservation and mostly change the nodes the first one locked. Kept near a group's largest
     * transaction ({@code Tables#GROUP_TXN_ITEMS}): such frees run inside a group.
     */
    int runsItems() {
        return 1 + blockItems() + ROOT_SPLIT_ITEMS + RUNS_ROOM;
    }

    /** See {@link #runsItems}. */
    private static final int RUNS_ROOM = 24;

    /**
     * {@link #releaseData} of several extents in one transaction: {@code [blocks[i], blocks[i] + lens[i])}
     * for {@code i} from {@code from} (device blocks of this group, ascending, none overlapping), each only
     * while the free list holds its reserve and {@code txn} has room for one more free-space change with
     * its trees a level higher (of the {@code items} it reserved: {@link #runsItems}), up to {@code to}.
     * Extents that lie side by side (values written in order and deleted together) are freed as one range,
     * one change of the trees for the run where each took one (a moved entry, or an insert), as a drain
     * frees its adjacent entries ({@link #drain}); each extent keeps a busy entry of its own, in
     * {@code busy[i]}, so that a group's undo can take one back ({@link #retakeData} takes any part of a
     * free extent) and a held one is released alone. Settle or hold each once {@code txn} has committed.
     * Returns how many it freed; 0 (NEEDS_REFILL): nothing changed and the AGF released.
     */
    int releaseDataRuns(Txn txn, long[] blocks, int[] lens, int from, int to, int items, BusyExtents.Entry[] busy) {
        lock(txn, agf);
        int change = blockItems() + ROOT_SPLIT_ITEMS;
        int i = from;
        freeingData = true;
        try {
            while (i < to && agfl.holds(RESERVE) && txn.held() + change <= items) {
                int s = (int) (blocks[i] - start), end = s + lens[i], next = i + 1;
                while (next < to && blocks[next] - start == end) {
                    end += lens[next++];
                }
                freeExtent(txn, s, end - s); // one overlapping another is not joined: its own free finds it free, corrupt
                counters.repay(end - s);
                for (; i < next; i++) {
                    busy[i] = busyData.add((int) (blocks[i] - start), lens[i]);
                }
            }
        } finally {
            freeingData = false;
        }
        if (i == from) {
            txn.release(agf);
        }
        return i - from;
    }

    /**
     * {@link #releaseBlocks} for a file's data blocks, which stay busy until {@code txn} is durable: once
     * it has committed, {@linkplain BusyExtents.Entry#settle settle} {@link #freedData} with its sequence.
     */
    AllocOutcome releaseData(Txn txn, long block, int len) {
        freeingData = true;
        AllocOutcome r;
        try {
            r = releaseBlocks(txn, block, len);
        } finally {
            freeingData = false;
        }
        if (r == AllocOutcome.DONE) {
            freed = busyData.addJoining((int) (block - start), len); // settled by each caller, never taken back
        }
        return r;
    }

    /**
     * A replacing put's two changes of this group in one transaction: {@code len} contiguous blocks
     * allocated as {@link #allocClaiming} does, then {@code [block, block + oldLen)}, the value the new one
     * replaces, freed as {@link #releaseData} does, busy until {@code txn} is durable. The free list must
     * hold its reserve and an allocation's use of it ({@link AllocationGroup#OP_BLOCKS}) before either, so
     * that the free never finds it short once the allocation is made.
     *
     * @return DONE (the new blocks at {@link #allocatedBlock}, the freed ones at {@link #freedData}); or
     *         NO_SPACE, NEEDS_REFILL or BUSY with nothing changed and the AGF released
     */
    AllocOutcome replaceData(Txn txn, int len, long block, int oldLen) {
        if (!counters.claim(len + OP_BLOCKS)) {
            return AllocOutcome.NO_SPACE;
        }
        try {
            lock(txn, agf);
            if (!agfl.holds(RESERVE + OP_BLOCKS)) {
                txn.release(agf);
                return AllocOutcome.NEEDS_REFILL;
            }
            AllocOutcome r = allocBlocks(txn, len, true); // its alternative is a journal group's three transactions
            if (r == AllocOutcome.DONE && releaseData(txn, block, oldLen) != AllocOutcome.DONE) {
                throw new IllegalStateException("group " + agno + "'s free list fell below its reserve in one allocation");
            }
            return r;
        } finally {
            counters.release(len + OP_BLOCKS);
        }
    }

    /**
     * Takes back {@code [block, block + len)} (device blocks of this group) in {@code txn}, undoing a
     * {@link #releaseData} of them whose transaction {@code busy} came from (its sequence not durable
     * yet, so its blocks are still busy and free): they leave free space and stop being busy.
     *
     * @return DONE; or NEEDS_REFILL, with nothing changed and the AGF released
     */
    AllocOutcome retakeData(Txn txn, long block, int len, BusyExtents.Entry busy) {
        lock(txn, agf);
        if (!agfl.holds(RESERVE)) {
            txn.release(agf);
            return AllocOutcome.NEEDS_REFILL;
        }
        int s = (int) (block - start);
        long e = bnoFind(txn, s, BTree.Match.FLOOR);
        if (e < 0 || extentStart(e) + extentLength(e) < s + len) {
            throw new CorruptionException(agf.block(), AGF, "group " + agno + " takes back blocks [" + s + ", +" + len
                    + ") freed in this transaction group, but they are not all free");
        }
        takeRange(txn, e, extent(s, len));
        busyData.remove(busy);
        return AllocOutcome.DONE;
    }

    /** The busy data list's entries, busy or not swept yet (for tests: with no allocation or free under way). */
    int busyDataEntries() {
        return busyData.size();
    }

    /** The busy data blocks (for tests: with no allocation or free under way). */
    long busyDataBlocks() {
        return busyData.busyBlocks();
    }

    /** What the last {@link #releaseData} in {@code txn}, which still holds the AGF, made busy. */
    BusyExtents.Entry freedData(Txn txn) {
        if (!txn.holds(agf)) {
            throw new IllegalStateException("the AGF of group " + agno + " is not held");
        }
        return freed;
    }

    // ------------------------------------------------------------------ free lists

    private static boolean outOfRange(FreeList l) {
        return l.count() > LIST_MOST || !l.holds(RESERVE);
    }

    /**
     * True if a free list wants spilling, or refilling while there is free space to refill it from (a
     * snapshot; {@link #refillFreeList} decides under the locks).
     */
    boolean needsRefill() {
        return agfl.count() > LIST_MOST || agil.count() > LIST_MOST
                || (!agfl.seemsToHold(RESERVE) || !agil.seemsToHold(RESERVE)) && freeBlockCount() > 0;
    }

    private FreeList listToRefill() {
        return outOfRange(agfl) ? agfl : outOfRange(agil) ? agil : null;
    }

    /**
     * Brings both free lists back to between {@link #RESERVE} and {@link AllocationGroup#LIST_MOST}, as far as the group's
     * free space allows, in transactions of its own of at most {@value #REFILL_OPS} tree operations each.
     * Entries that are busy do not count towards the reserve; when the free space left is all busy it
     * forces the log and goes on (inside a journal group, once: {@link #waitingHelps}).
     */
    void refillFreeList() {
        refillFreeList(true);
    }

    /** {@link #refillFreeList}; {@code drain}: whether a wait for busy blocks may drain the pending-free list ({@link #awaitBusy(int, boolean)}). */
    private void refillFreeList(boolean drain) {
        for (int round = 0, busy = 0; round < 256 + BUSY_RETRIES && busy < BUSY_RETRIES; round++) {
            int items = 2 + REFILL_OPS * freeSpaceItems();
            AllocOutcome stuck = AllocOutcome.DONE;
            int ops = 0;
            try (Txn txn = Txn.begin(cache, items)) {
                lock(txn, agi);
                lock(txn, agf);
                for (FreeList l; ops < REFILL_OPS && (l = listToRefill()) != null; ops++) {
                    if (l.count() >= LIST_MOST) { // past its most, or at it with too few entries not busy
                        freeExtent(txn, l.popForSpill(txn), 1);
                        if (l == agfl) {
                            refcounts.listSpilled(txn);
                        }
                    } else if (!agfl.holds(OP_BLOCKS)) {
                        stuck = AllocOutcome.NO_SPACE;
                    } else {
                        stuck = refill(txn, l, 2 * RESERVE);
                    }
                    if (stuck != AllocOutcome.DONE) {
                        break;
                    }
                }
                if (ops > 0) {
                    txn.commit();
                }
            }
            if (stuck == AllocOutcome.BUSY && waitingHelps(busy)) {
                awaitBusy(busy++, drain);
            } else if (ops == 0 || stuck != AllocOutcome.DONE || listToRefill() == null) {
                return; // done, or the group is out of free space: the lists keep what they have
            }
        }
    }

    /**
     * One free-space operation moving free blocks that are not busy onto {@code list}, towards
     * {@code target} of them: DONE, or NO_SPACE or BUSY with nothing changed.
     */
    private AllocOutcome refill(Txn txn, FreeList list, int target) {
        int want = Math.min(target - list.usable(), LIST_MOST - list.count()); // never past its most: see FreeList.lack
        if (want < 1 || largestExtent(txn) < 0) {
            return AllocOutcome.NO_SPACE;
        }
        long[] at = findUsable(txn, 1, want);
        if (at == null) {
            at = findUsableAnywhere(txn, 1, want);
        }
        if (at == null) {
            return AllocOutcome.BUSY;
        }
        takeRange(txn, at[0], at[1]);
        int s = extentStart(at[1]);
        for (int b = s + extentLength(at[1]) - 1; b >= s; b--) {
            list.push(txn, b);
        }
        if (list == agfl) {
            refcounts.listRefilled(txn, extentLength(at[1]));
        }
        return AllocOutcome.DONE;
    }

    // ------------------------------------------------------------------ pending frees

    /**
     * At open: the pending-free list's count within its capacity and each entry inside the group past its
     * headers (a drain frees them); sums their blocks. Returns them: a mount after a crash counts them free.
     */
    long openPending() {
        MemorySegment h = agf.data();
        int n = AgHeaderFormat.u32(h, PENDING_COUNT);
        if (n < 0 || n > pendingCapacity) {
            throw new CorruptionException(agf.block(), AGF, "pending-free list of " + n + " entries; it holds at most " + pendingCapacity);
        }
        long blocks = 0;
        for (int i = 0; i < n; i++) {
            int s = AgHeaderFormat.u32(h, AgHeaderFormat.pendingStartOffset(i)), len = AgHeaderFormat.u32(h, AgHeaderFormat.pendingLengthOffset(i));
            if (len <= 0 || s < FIRST_FREE || s > length - len) {
                throw new CorruptionException(agf.block(), AGF, "pending-free entry " + i + " of group " + agno + " is ["
                        + Integer.toUnsignedString(s) + ", +" + Integer.toUnsignedString(len) + "), not inside [" + FIRST_FREE + ", " + length + ")");
            }
            blocks += len;
        }
        pendingBlocks = blocks;
        pendingSeen = n;
        return blocks;
    }

    /** The pending-free list's entries, read without the AGF (a hint). */
    int pendingCount() {
        return pendingSeen;
    }

    /** Whether the pending-free list is half full or more (a hint): the deleting thread drains it then. */
    boolean pendingHalfFull() {
        return pendingSeen >= pendingCapacity / 2;
    }

    /** The blocks of the pending-free list's entries (for the checker, with nothing changing the group). */
    long pendingBlocks() {
        return pendingBlocks;
    }

    /** The pending-free list's entry {@code i} as an extent of group blocks (for the checker: the AGF unchanged meanwhile). */
    long pendingEntry(int i) {
        MemorySegment h = agf.data();
        return extent(AgHeaderFormat.u32(h, AgHeaderFormat.pendingStartOffset(i)), AgHeaderFormat.u32(h, AgHeaderFormat.pendingLengthOffset(i)));
    }

    /**
     * With the AGF held by {@code txn} ({@link #lockForRelease}): instead of freeing {@code [block, block +
     * len)} (device blocks of this group, whose owner {@code txn} removes), appends it to the pending-free
     * list. The trees keep the blocks allocated, so nothing can take them and none is busy; the
     * owner's removal and the entry are recovered together. The counters count them free at once (so
     * that claims, and statfs, see them): an allocation that finds the group's free space short of them
     * answers BUSY ({@link #roomFor}), and its {@link #awaitBusy} drains the list. False, nothing changed,
     * if the list is full (the caller frees them itself).
     */
    boolean deferData(Txn txn, long block, int len) {
        if (!txn.holds(agf)) {
            throw new IllegalStateException("the AGF of group " + agno + " is not held");
        }
        int s = (int) (block - start);
        if (s < FIRST_FREE || len < 1 || s > length - len) {
            throw new InvalidArgumentException("extent [" + s + ", +" + len + ") lies outside the free space of group "
                    + agno + " (blocks " + FIRST_FREE + " to " + length + ")");
        }
        MemorySegment h = agf.data();
        int n = AgHeaderFormat.u32(h, PENDING_COUNT);
        if (n >= pendingCapacity) {
            return false;
        }
        AgHeaderFormat.setU32(h, AgHeaderFormat.pendingStartOffset(n), s);
        AgHeaderFormat.setU32(h, AgHeaderFormat.pendingLengthOffset(n), len);
        txn.log(agf, AgHeaderFormat.pendingStartOffset(n), AgHeaderFormat.PENDING_ENTRY);
        AllocationGroup.setU32(txn, agf, PENDING_COUNT, n + 1);
        pendingBlocks += len;
        pendingSeen = n + 1;
        counters.freeBlocks.add(len);
        return true;
    }

    /**
     * Frees the pending-free list's entries, in transactions of {@link #runsItems} items each, every one
     * busy until its drain is durable. With {@code wait}, waits for log space and refills the free list as
     * needed, until the list is empty (for sync, unmount, mount and an allocation short of space, holding
     * no buffer lock); without, gives up at the first transaction that would wait or need a refill (a
     * writer inside a table, which must not wait for log space: the list fills up meanwhile, and a full
     * list makes deletes free their blocks themselves).
     */
    void drainPending(boolean wait) {
        for (int fails = 0; pendingSeen > 0; ) {
            if (needsRefill()) {
                if (!wait) {
                    return;
                }
                refillFreeList(false);
            }
            int items = runsItems();
            Txn begun = wait ? Txn.begin(cache, items) : Txn.tryBegin(cache, items);
            if (begun == null) {
                return;
            }
            BusyExtents.Entry[] busy = new BusyExtents.Entry[pendingCapacity];
            int ranges;
            long seq = -1;
            try (Txn txn = begun) {
                ranges = drain(txn, items, busy);
                if (ranges > 0) {
                    seq = txn.commit();
                }
            }
            if (ranges == 0) {
                return; // another thread drained it
            }
            if (ranges < 0) { // the free list short of its reserve
                if (!wait) {
                    return;
                }
                if (fails++ == RETRIES) {
                    throw new NoSpaceException("allocation group " + agno + " cannot refill the free list of its free-space trees");
                }
                refillFreeList(false);
                continue;
            }
            fails = 0;
            for (int i = 0; i < ranges; i++) {
                busy[i].settle(seq);
            }
        }
    }

    /**
     * One drain transaction: takes the AGF, sorts the pending-free entries by block and frees them as
     * ranges of adjacent entries merged (values deleted in the order they were written lie side by side:
     * one tree change for many), from the lowest, while the free list holds its reserve and {@code txn} has
     * room for one more free-space change of the {@code items} it reserved; then rewrites the list as the
     * entries it did not free, so that the transaction clears exactly the entries it freed (a crash before
     * its commit leaves the list and the trees as they were, after it neither frees them twice nor leaks
     * them). An entry overlapping another, or free already, is a CorruptionException (nothing committed).
     * Each range's busy entry goes to {@code busy}, to settle once {@code txn} has committed.
     *
     * @return the ranges freed; 0 with the list empty, -1 with the free list short: nothing changed and the AGF released
     */
    int drain(Txn txn, int items, BusyExtents.Entry[] busy) {
        lock(txn, agf);
        MemorySegment h = agf.data();
        int n = AgHeaderFormat.u32(h, PENDING_COUNT);
        if (n == 0 || !agfl.holds(RESERVE)) {
            txn.release(agf);
            return n == 0 ? 0 : -1;
        }
        long[] entries = new long[n];
        for (int i = 0; i < n; i++) {
            entries[i] = pendingEntry(i);
        }
        Arrays.sort(entries); // by start: group blocks are below 2^31
        int change = blockItems() + ROOT_SPLIT_ITEMS;
        int used = 0, ranges = 0;
        long blocks = 0;
        freeingData = true;
        draining = true;
        try {
            while (used < n && agfl.holds(RESERVE) && (ranges == 0 || txn.held() + change <= items)) {
                int s = extentStart(entries[used]), end = s + extentLength(entries[used]), next = used + 1;
                while (next < n && extentStart(entries[next]) == end) {
                    end += extentLength(entries[next++]);
                }
                freeExtent(txn, s, end - s); // an entry overlapping one freed already finds its blocks free: corrupt
                counters.repay(end - s);
                busy[ranges++] = busyData.add(s, end - s);
                blocks += end - s;
                used = next;
            }
        } finally {
            freeingData = false;
            draining = false;
        }
        for (int i = used; i < n; i++) {
            AgHeaderFormat.setU32(h, AgHeaderFormat.pendingStartOffset(i - used), extentStart(entries[i]));
            AgHeaderFormat.setU32(h, AgHeaderFormat.pendingLengthOffset(i - used), extentLength(entries[i]));
        }
        if (used < n) {
            txn.log(agf, AgHeaderFormat.pendingStartOffset(0), (n - used) * AgHeaderFormat.PENDING_ENTRY);
        }
        AllocationGroup.setU32(txn, agf, PENDING_COUNT, n - used);
        pendingBlocks -= blocks;
        pendingSeen = n - used;
        drains++;
        drainedRanges += ranges;
        return ranges;
    }
}
