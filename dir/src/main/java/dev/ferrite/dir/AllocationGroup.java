package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.btree.BTree;
import dev.ferrite.btree.Buffer;
import dev.ferrite.btree.BufferCache;
import dev.ferrite.btree.Cursor;
import dev.ferrite.btree.TreeCheck;
import dev.ferrite.btree.TreeWalk;
import dev.ferrite.btree.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;

import static dev.ferrite.dir.AgHeaderFormat.AGF_BLOCK;
import static dev.ferrite.dir.AgHeaderFormat.AGF_LIST_COUNT;
import static dev.ferrite.dir.AgHeaderFormat.AGF_MAGIC;
import static dev.ferrite.dir.AgHeaderFormat.AGI_BLOCK;
import static dev.ferrite.dir.AgHeaderFormat.AGI_LIST_COUNT;
import static dev.ferrite.dir.AgHeaderFormat.AGI_MAGIC;
import static dev.ferrite.dir.AgHeaderFormat.AG_LENGTH;
import static dev.ferrite.dir.AgHeaderFormat.AG_NUMBER;
import static dev.ferrite.dir.AgHeaderFormat.BNO_TREE;
import static dev.ferrite.dir.AgHeaderFormat.CNT_TREE;
import static dev.ferrite.dir.AgHeaderFormat.FINO_TREE;
import static dev.ferrite.dir.AgHeaderFormat.FIRST_FREE;
import static dev.ferrite.dir.AgHeaderFormat.FREE_BLOCKS;
import static dev.ferrite.dir.AgHeaderFormat.FREE_INODES;
import static dev.ferrite.dir.AgHeaderFormat.INODES;
import static dev.ferrite.dir.AgHeaderFormat.INO_TREE;
import static dev.ferrite.dir.AgHeaderFormat.ORPHAN_TREE;
import static dev.ferrite.dir.AgHeaderFormat.u32;
import static dev.ferrite.dir.AgHeaderFormat.u64;
import static dev.ferrite.dir.Geometry.CHUNK_BLOCKS;
import static dev.ferrite.dir.Geometry.CHUNK_INODES;

/**
 * One allocation group: a slice of the device with its own free-space trees (by start and by length),
 * inode trees (every chunk, and the chunks with a free inode) and headers, so that allocations in
 * different groups share no lock and no block.
 *
 * <h2>Locks</h2>
 * The AGI buffer's lock serializes the group's inode allocation and freeing, the AGF buffer's its
 * free-space changes; a transaction takes them through {@link Txn#lock} (AGI before AGF when it needs
 * both) and holds them to commit, like XFS's AGI/AGF buffer locks. Only holders of the AGF change the
 * free-space trees and only holders of the AGI the inode trees, so several operations on one tree may
 * share a transaction, and their reads go through {@link BTree#find} with that transaction. Both header
 * buffers are resident: the free lists in them are popped with tree nodes locked.
 *
 * <h2>Free lists</h2>
 * Every operation that changes trees first checks that the free list the trees draw nodes from holds
 * {@link #RESERVE} entries (twice the most one operation can take); if not it gives up its locks and
 * the caller runs {@link #fix()}, which refills the lists from the free-space trees (and spills excess
 * back) in transactions of its own. Allocations for inodes and, later, data keep
 * {@link #HELD_BACK} blocks in the trees, so refilling the lists can always succeed.
 *
 * <h2>Busy blocks</h2>
 * A block freed since the last checkpoint is {@link BufferCache#isBusy busy}: allocated again, its new
 * contents and its free could land in one checkpoint in either order. Like XFS's busy extents, nothing
 * hands such a block out: free lists skip busy entries, and free-space allocations take a range of an
 * extent with no busy block, looking at a few extents; if all of those are busy, the caller lets go of
 * its locks and forces the log ({@link #awaitBusy}), which ends their busy state, and tries again.
 */
final class AllocationGroup {
    /** Levels the group's trees are assumed never to reach: a 2^28-block group needs 4 with 4 KiB nodes. */
    static final int MAX_HEIGHT = 5;
    /** Most free-list entries one operation takes: a split at every level and a new root, in two trees. */
    static final int OP_BLOCKS = 2 * (MAX_HEIGHT + 1);
    /** Entries a free list holds before an operation may start. */
    static final int RESERVE = 2 * OP_BLOCKS;
    /** Free blocks allocations leave in the trees for refilling the free lists. */
    static final int HELD_BACK = 4 * RESERVE;
    /**
     * Results of an allocation other than a block or inode number; {@link #RETRY_BUSY}: the free space
     * that fits was all freed since the last checkpoint (run {@link #awaitBusy} first).
     */
    static final long NO_SPACE = 0, RETRY_FIX = -1, RETRY_CHUNK = -2, RETRY_BUSY = -3;
    /** Free extents looked at for blocks that are not busy before giving up and forcing the log. */
    private static final int BUSY_CANDIDATES = 8;

    private static final int FIX_OPS = 2;
    /** Free-list refills an operation that met a short list tries before giving up. */
    private static final int FIX_ATTEMPTS = 4;
    /**
     * Changing operations one free-space change runs on each free-space tree at most (a free merging
     * with both neighbours: two deletes and an insert); each tree's {@link BTree#reservation()} covers one.
     */
    private static final int FREE_SPACE_OPS = 3;
    private static final String AGF = "allocation group free-space header";
    private static final String AGI = "allocation group inode header";
    private static final String INODE_BLOCK = "inode block";
    private static final MemorySegment NONE = MemorySegment.ofArray(new byte[0]);

    final int agno;
    final long start;
    final int length;
    private final BufferCache cache;
    private final Geometry geometry;
    private final Counters counters;
    private final int recordSize;
    final Buffer agf;
    final Buffer agi;
    final FreeList agfl;
    final FreeList agil;
    BTree bno;
    BTree cnt;
    BTree ino;
    BTree fino;
    /** Unlinked inodes still open or still being freed; null until the first (created under the AGI). */
    volatile BTree orphans;
    /**
     * Under the AGI: the free-inode tree's first record, chunk {@code firstFreeChunk} with free mask
     * {@code firstFreeMask}, as this group last read or wrote it; -1 if not known. Inode allocation takes
     * from it without searching either inode tree; every change of the free-inode tree keeps it exact.
     */
    private int firstFreeChunk = -1;
    private long firstFreeMask;
    /** Chunks whose last inode in use was freed, for {@link #reclaimEmptyChunks} to look at. */
    private final Queue<Integer> emptyChunks = new ConcurrentLinkedQueue<>();
    /** See {@link #mayAddChunk}: set by a chunk allocation that found no room, cleared by any free. */
    private volatile boolean chunkless;

    private AllocationGroup(BufferCache cache, Geometry geometry, Counters counters, int agno, Buffer agf, Buffer agi) {
        this.cache = cache;
        this.geometry = geometry;
        this.counters = counters;
        this.agno = agno;
        this.start = geometry.agStart(agno);
        this.length = geometry.agLength(agno);
        this.recordSize = geometry.inodeSize();
        this.agf = agf;
        this.agi = agi;
        this.agfl = new FreeList(cache, agf, AGF_LIST_COUNT, start);
        this.agil = new FreeList(cache, agi, AGI_LIST_COUNT, start);
        cache.makeResident(agf);
        cache.makeResident(agi);
    }

    /** Items a {@link #format} transaction changes. */
    static final int FORMAT_ITEMS = 2 + 4 * BTree.CREATE_ITEMS;

    /**
     * Writes group {@code agno}'s headers and empty trees in {@code txn} (reserving {@link #FORMAT_ITEMS})
     * and returns the group: everything past the headers, the trees' first blocks and the free lists'
     * initial entries is one free extent.
     */
    static AllocationGroup format(Txn txn, Geometry g, int agno, Counters counters) {
        BufferCache cache = txn.cache();
        long start = g.agStart(agno);
        Buffer agf = cache.create(txn, start + AGF_BLOCK, AGF_MAGIC, agno);
        Buffer agi = cache.create(txn, start + AGI_BLOCK, AGI_MAGIC, agno);
        AllocationGroup ag = new AllocationGroup(cache, g, counters, agno, agf, agi);
        ag.setU32(txn, agf, AG_NUMBER, agno);
        ag.setU32(txn, agf, AG_LENGTH, ag.length);
        ag.setU32(txn, agi, AG_NUMBER, agno);
        // each list starts with its two trees' header and root blocks on top (popped by create), then its reserve
        int next = seed(txn, ag.agfl, FIRST_FREE, 4 + 2 * RESERVE);
        next = seed(txn, ag.agil, next, 4 + 2 * RESERVE);
        ag.bno = BTree.create(txn, ag.agfl, AgTreeFormat.treeId(agno, AgTreeFormat.BNO));
        ag.cnt = BTree.create(txn, ag.agfl, AgTreeFormat.treeId(agno, AgTreeFormat.CNT));
        ag.ino = BTree.create(txn, ag.agil, AgTreeFormat.treeId(agno, AgTreeFormat.INO));
        ag.fino = BTree.create(txn, ag.agil, AgTreeFormat.treeId(agno, AgTreeFormat.FINO));
        ag.setU32(txn, agf, BNO_TREE, ag.relative(ag.bno.headerBlock()));
        ag.setU32(txn, agf, CNT_TREE, ag.relative(ag.cnt.headerBlock()));
        ag.setU32(txn, agi, INO_TREE, ag.relative(ag.ino.headerBlock()));
        ag.setU32(txn, agi, FINO_TREE, ag.relative(ag.fino.headerBlock()));
        ag.insertExtent(txn, next, ag.length - next);
        ag.addU64(txn, agf, FREE_BLOCKS, ag.length - next);
        counters.freeBlocks.add(ag.length - next);
        return ag;
    }

    /** Pushes blocks [from, from + n) so that they pop in ascending order; returns from + n. */
    private static int seed(Txn txn, FreeList list, int from, int n) {
        for (int b = from + n - 1; b >= from; b--) {
            list.push(txn, b);
        }
        return from + n;
    }

    /**
     * Reads group {@code agno}'s headers (kept resident from now on) and opens its trees.
     *
     * @throws CorruptionException if a header is unreadable or does not describe this group
     */
    static AllocationGroup open(BufferCache cache, Geometry g, int agno, Counters counters) {
        long start = g.agStart(agno);
        Buffer agf = cache.get(start + AGF_BLOCK, AGF_MAGIC, agno, AGF);
        Buffer agi = cache.get(start + AGI_BLOCK, AGI_MAGIC, agno, AGI);
        AllocationGroup ag = new AllocationGroup(cache, g, counters, agno, agf, agi);
        MemorySegment f = agf.data(), i = agi.data();
        if (u32(f, AG_NUMBER) != agno || u32(f, AG_LENGTH) != ag.length) {
            throw new CorruptionException(agf.block(), AGF, "describes group " + u32(f, AG_NUMBER) + " of "
                    + u32(f, AG_LENGTH) + " blocks, expected group " + agno + " of " + ag.length);
        }
        if (u32(i, AG_NUMBER) != agno) {
            throw new CorruptionException(agi.block(), AGI, "describes group " + u32(i, AG_NUMBER) + ", expected " + agno);
        }
        ag.checkList(ag.agfl, agf, AGF);
        ag.checkList(ag.agil, agi, AGI);
        ag.bno = ag.openTree(agf, BNO_TREE, ag.agfl, AgTreeFormat.BNO, AGF);
        ag.cnt = ag.openTree(agf, CNT_TREE, ag.agfl, AgTreeFormat.CNT, AGF);
        ag.ino = ag.openTree(agi, INO_TREE, ag.agil, AgTreeFormat.INO, AGI);
        ag.fino = ag.openTree(agi, FINO_TREE, ag.agil, AgTreeFormat.FINO, AGI);
        if (u32(i, ORPHAN_TREE) != 0) {
            ag.orphans = ag.openTree(agi, ORPHAN_TREE, ag.agil, AgTreeFormat.ORPHAN, AGI);
        }
        return ag;
    }

    /** A free list's count in range, and its entries distinct blocks of the group past the headers: they become tree nodes. */
    private void checkList(FreeList list, Buffer header, String what) {
        int n = list.count();
        if (n < 0 || n > list.capacity()) {
            throw new CorruptionException(header.block(), what, "free list of " + n + " entries; it holds at most "
                    + list.capacity());
        }
        java.util.BitSet seen = new java.util.BitSet();
        for (int i = 0; i < n; i++) {
            int e = list.entry(i);
            boolean inGroup = e >= FIRST_FREE && e < length;
            if (!inGroup || seen.get(e)) {
                throw new CorruptionException(header.block(), what, "free list entry " + i + " names group block "
                        + Integer.toUnsignedString(e) + (inGroup ? " twice" : ", outside [" + FIRST_FREE + ", " + length + ")"));
            }
            seen.set(e);
        }
    }

    private BTree openTree(Buffer header, int field, FreeList list, int kind, String what) {
        int rel = u32(header.data(), field);
        if (rel < FIRST_FREE || rel >= length) {
            throw new CorruptionException(header.block(), what, "tree header at group block " + rel
                    + " lies outside the group's " + length + " blocks");
        }
        return BTree.open(cache, list, start + rel, AgTreeFormat.treeId(agno, kind));
    }

    // ------------------------------------------------------------------ header fields

    private int relative(long block) {
        return (int) (block - start);
    }

    private void setU32(Txn txn, Buffer b, int offset, int v) {
        AgHeaderFormat.setU32(b.data(), offset, v);
        txn.log(b, offset, 4);
    }

    private void addU64(Txn txn, Buffer b, int offset, long delta) {
        AgHeaderFormat.setU64(b.data(), offset, u64(b.data(), offset) + delta);
        txn.log(b, offset, 8);
    }

    /** A header field read without the lock (validated against the buffer's version). */
    private static long snapshot(Buffer b, int offset) {
        for (;;) {
            long v = b.readVersion();
            long x = u64(b.data(), offset);
            if (b.validate(v)) {
                return x;
            }
        }
    }

    long freeBlocks() {
        return snapshot(agf, FREE_BLOCKS);
    }

    long freeInodes() {
        return snapshot(agi, FREE_INODES);
    }

    /**
     * A hint: false once a chunk did not fit (too few free blocks, or no free extent of a chunk's
     * length), true again when blocks come back. Creates pass over a group with no free inode and no
     * chunk room rather than pay a failing attempt each; it may be stale either way.
     */
    boolean mayAddChunk() {
        return !chunkless;
    }

    long inodes() {
        return snapshot(agi, INODES);
    }

    private static void lock(Txn txn, Buffer header) {
        if (!txn.lock(header)) {
            throw new IllegalStateException("resident group header " + header + " became obsolete");
        }
    }

    // ------------------------------------------------------------------ free space (AGF held)

    private static long extent(int start, int length) {
        return (long) start << 32 | Integer.toUnsignedLong(length);
    }

    private static int extentStart(long e) {
        return (int) (e >>> 32);
    }

    private static int extentLength(long e) {
        return (int) e;
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
        MemorySegment k = MemorySegment.ofArray(new byte[8]);
        MemorySegment out = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.cntKey(k, len, from);
        if (cnt.find(txn, k, match, out, NONE) < 0) {
            return -1;
        }
        return treeExtent(AgTreeFormat.cntStart(out), AgTreeFormat.cntLength(out));
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
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment out = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[4]);
        AgTreeFormat.key32(k, block);
        if (bno.find(txn, k, match, out, v) < 0) {
            return -1;
        }
        return treeExtent(AgTreeFormat.key32(out), AgTreeFormat.length(v));
    }

    private void insertExtent(Txn txn, int s, int len) {
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[4]);
        MemorySegment ck = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.key32(k, s);
        AgTreeFormat.lengthValue(v, len);
        AgTreeFormat.cntKey(ck, len, s);
        if (!bno.putIfAbsent(txn, k, v) || !cnt.putIfAbsent(txn, ck, NONE)) {
            throw new CorruptionException(agf.block(), AGF, "free extent [" + s + ", +" + len + ") is already in the"
                    + " free-space trees of group " + agno);
        }
    }

    private void removeExtent(Txn txn, int s, int len) {
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment ck = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.key32(k, s);
        AgTreeFormat.cntKey(ck, len, s);
        if (!bno.delete(txn, k) || !cnt.delete(txn, ck)) {
            throw new CorruptionException(agf.block(), AGF, "free extent [" + s + ", +" + len + ") of group " + agno
                    + " is missing from one of the free-space trees");
        }
    }

    private void addFree(Txn txn, long delta) {
        addU64(txn, agf, FREE_BLOCKS, delta);
        counters.freeBlocks.add(delta);
    }

    /**
     * Takes the range {@code r} (packed like an extent) from the start or the end of the free extent
     * {@code e}: a delete and at most one insert in each tree.
     */
    private void takeRange(Txn txn, long e, long r) {
        int s = extentStart(e), l = extentLength(e), rs = extentStart(r), rl = extentLength(r);
        removeExtent(txn, s, l);
        if (rs > s) {
            insertExtent(txn, s, rs - s);
        } else if (rl < l) {
            insertExtent(txn, s + rl, l - rl);
        }
        addFree(txn, -rl);
    }

    private boolean busy(int groupBlock) {
        return cache.isBusy(start + groupBlock);
    }

    /**
     * Up to {@code want} blocks, at least {@code min}, at the start or the end of free extent {@code e}
     * that are not busy (packed like an extent), or -1.
     */
    private long usableEnd(long e, int min, int want) {
        int s = extentStart(e), l = extentLength(e), n = Math.min(want, l);
        int head = 0;
        while (head < n && !busy(s + head)) {
            head++;
        }
        if (head >= min) {
            return extent(s, head);
        }
        int tail = 0;
        while (tail < n && !busy(s + l - 1 - tail)) {
            tail++;
        }
        return tail >= min ? extent(s + l - tail, tail) : -1;
    }

    /**
     * With the AGF held: where to take up to {@code want} (at least {@code min}) contiguous blocks that
     * are not busy, as {extent, range}; null if the free extents looked at hold none.
     */
    private long[] findUsable(Txn txn, int min, int want) {
        long e = extentAtLeast(txn, want);
        for (int i = 0; i < BUSY_CANDIDATES && e >= 0; i++) {
            long r = usableEnd(e, min, want);
            if (r >= 0) {
                return new long[] {e, r};
            }
            e = cntFind(txn, extentLength(e), extentStart(e) + 1, BTree.Match.CEILING);
        }
        long largest = largestExtent(txn);
        long r = largest < 0 || extentLength(largest) < min ? -1 : usableEnd(largest, min, want);
        return r < 0 ? null : new long[] {largest, r};
    }

    /** Times an operation may meet {@link #RETRY_BUSY} in a row before it gives up with ENOSPC. */
    static final int BUSY_RETRIES = 1000;

    /**
     * Forces the log so that blocks freed so far stop being busy; call holding no buffer lock. Their
     * items are unpinned by the AIL just after the force returns, so a caller meeting busy blocks again
     * ({@code attempt} > 0) also waits a little, up to a millisecond.
     */
    void awaitBusy(int attempt) {
        cache.journal().forceAll();
        if (attempt > 0) {
            LockSupport.parkNanos(Math.min(1_000_000L, 10_000L << Math.min(attempt, 7)));
        }
    }

    /** Returns {@code [s, s + len)} (group blocks) to free space, merged with free neighbours. */
    void freeExtent(Txn txn, int s, int len) {
        if (s < FIRST_FREE || len < 1 || s > length - len) {
            throw new InvalidArgumentException("extent [" + s + ", +" + len + ") lies outside the free space of group "
                    + agno + " (blocks " + FIRST_FREE + " to " + length + ")");
        }
        int ns = s, nl = len;
        long left = bnoFind(txn, s, BTree.Match.FLOOR);
        long right = bnoFind(txn, s, BTree.Match.CEILING);
        if (left >= 0 && extentStart(left) + extentLength(left) > s || right >= 0 && extentStart(right) < s + len) {
            long other = left >= 0 && extentStart(left) + extentLength(left) > s ? left : right;
            throw new CorruptionException(agf.block(), AGF, "group " + agno + " frees blocks [" + s + ", +" + len
                    + ") but [" + extentStart(other) + ", +" + extentLength(other) + ") of them is already free");
        }
        if (left >= 0 && extentStart(left) + extentLength(left) == s) {
            removeExtent(txn, extentStart(left), extentLength(left));
            ns = extentStart(left);
            nl += extentLength(left);
        }
        if (right >= 0 && extentStart(right) == s + len) {
            removeExtent(txn, extentStart(right), extentLength(right));
            nl += extentLength(right);
        }
        insertExtent(txn, ns, nl);
        addFree(txn, len);
        if (chunkless) {
            chunkless = false;
        }
    }

    /** Items an {@link #allocBlocks} or {@link #freeBlocks} transaction may change. */
    int blockItems() {
        return 1 + freeSpaceItems();
    }

    /**
     * Allocates {@code len} contiguous blocks of this group in {@code txn}, from the smallest free extent
     * that holds them, leaving {@link #HELD_BACK} blocks free for the free lists.
     *
     * @return the first block (device block number); or {@link #NO_SPACE}, {@link #RETRY_FIX} or
     *         {@link #RETRY_BUSY}, with nothing changed and the AGF released
     */
    long allocBlocks(Txn txn, int len) {
        lock(txn, agf);
        if (!agfl.holds(RESERVE)) {
            txn.release(agf);
            return RETRY_FIX;
        }
        if (u64(agf.data(), FREE_BLOCKS) < (long) len + HELD_BACK || extentAtLeast(txn, len) < 0) {
            txn.release(agf);
            return NO_SPACE;
        }
        long[] at = findUsable(txn, len, len);
        if (at == null) {
            txn.release(agf);
            return RETRY_BUSY;
        }
        takeRange(txn, at[0], at[1]);
        return start + extentStart(at[1]);
    }

    /**
     * Frees {@code [block, block + len)} (device blocks of this group) in {@code txn}.
     *
     * @return false for {@link #RETRY_FIX}: nothing changed, the AGF released
     */
    boolean freeBlocks(Txn txn, long block, int len) {
        lock(txn, agf);
        if (!agfl.holds(RESERVE)) {
            txn.release(agf);
            return false;
        }
        freeExtent(txn, (int) (block - start), len);
        return true;
    }

    // ------------------------------------------------------------------ free lists

    private static boolean outOfRange(FreeList l) {
        return l.count() > 4 * RESERVE || !l.holds(RESERVE);
    }

    /**
     * True if a free list wants spilling, or refilling while there is free space to refill it from (a
     * snapshot; {@link #fix} decides under the locks).
     */
    boolean needsFix() {
        return agfl.count() > 4 * RESERVE || agil.count() > 4 * RESERVE
                || (!agfl.seemsToHold(RESERVE) || !agil.seemsToHold(RESERVE)) && freeBlocks() > 0;
    }

    private FreeList listToFix() {
        return outOfRange(agfl) ? agfl : outOfRange(agil) ? agil : null;
    }

    /**
     * Brings both free lists back to between {@link #RESERVE} and four times that, as far as the group's
     * free space allows, in transactions of its own of at most {@value #FIX_OPS} tree operations each.
     * Entries that are busy do not count towards the reserve; when the free space left is all busy it
     * forces the log and goes on.
     */
    void fix() {
        for (int round = 0, busy = 0; round < 256 + BUSY_RETRIES && busy < BUSY_RETRIES; round++) {
            int items = 2 + FIX_OPS * freeSpaceItems();
            long stuck = 1;
            int ops = 0;
            try (Txn txn = Txn.begin(cache, items)) {
                lock(txn, agi);
                lock(txn, agf);
                for (FreeList l; ops < FIX_OPS && (l = listToFix()) != null; ops++) {
                    if (l.count() > 4 * RESERVE) {
                        freeExtent(txn, l.popForSpill(txn), 1);
                    } else if (!agfl.holds(OP_BLOCKS)) {
                        stuck = NO_SPACE;
                    } else {
                        stuck = refill(txn, l, 2 * RESERVE);
                    }
                    if (stuck <= 0) {
                        break;
                    }
                }
                if (ops > 0) {
                    txn.commit();
                }
            }
            if (stuck == RETRY_BUSY) {
                awaitBusy(busy++);
            } else if (ops == 0 || stuck == NO_SPACE || listToFix() == null) {
                return; // done, or the group is out of free space: the lists keep what they have
            }
        }
    }

    /**
     * One free-space operation moving free blocks that are not busy onto {@code list}, towards
     * {@code target} of them: 1, or {@link #NO_SPACE} or {@link #RETRY_BUSY} with nothing changed.
     */
    private long refill(Txn txn, FreeList list, int target) {
        int want = Math.min(target - list.usable(), list.capacity() - list.count());
        if (want < 1 || largestExtent(txn) < 0) {
            return NO_SPACE;
        }
        long[] at = findUsable(txn, 1, want);
        if (at == null) {
            return RETRY_BUSY;
        }
        takeRange(txn, at[0], at[1]);
        int s = extentStart(at[1]);
        for (int b = s + extentLength(at[1]) - 1; b >= s; b--) {
            list.push(txn, b);
        }
        return 1;
    }

    // ------------------------------------------------------------------ inodes

    /** Items one free-space change (an extent taken or freed) may change in the two free-space trees. */
    private int freeSpaceItems() {
        return FREE_SPACE_OPS * (bno.reservation() + cnt.reservation());
    }

    /**
     * Items an {@link #allocInode} transaction may change: the AGI, one operation on each inode tree and
     * the inode's block; with a new chunk also the AGF, a free-space change and the chunk's blocks. Call
     * before locking anything (it reads the trees' heights).
     */
    int allocInodeItems(boolean mayAddChunk) {
        int items = 2 + ino.reservation() + fino.reservation();
        return mayAddChunk ? items + 1 + CHUNK_BLOCKS + freeSpaceItems() : items;
    }

    /** Items a {@link #freeInode} transaction may change. */
    int freeInodeItems() {
        return 2 + ino.reservation() + fino.reservation();
    }

    /**
     * Allocates an inode of this group in {@code txn} and initializes its record.
     *
     * @param frames {@value Geometry#CHUNK_BLOCKS} cache frames reserved for a new chunk's blocks (entries
     *               used are set to -1), or null if the transaction did not reserve for a chunk
     * @return the inode number; or {@link #NO_SPACE} (no free inode and no room for a chunk),
     *         {@link #RETRY_FIX} (run {@link #fix()} first), {@link #RETRY_BUSY} (run {@link #awaitBusy}
     *         first) or {@link #RETRY_CHUNK} (a chunk is needed: retry with frames and the larger
     *         reservation), each with nothing changed and the headers released
     */
    long allocInode(Txn txn, int[] frames, int mode, int uid, int gid, int nlink, long nowNanos) {
        lock(txn, agi);
        if (!agil.holds(OP_BLOCKS)) {
            txn.release(agi);
            return RETRY_FIX;
        }
        if (u64(agi.data(), FREE_INODES) == 0) {
            if (frames == null) {
                txn.release(agi);
                return RETRY_CHUNK;
            }
            long made = makeChunk(txn, frames);
            if (made <= 0) {
                return made;
            }
        }
        if (!loadFirstFree(txn)) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + " counts " + u64(agi.data(), FREE_INODES)
                    + " free inodes but its free-inode tree is empty");
        }
        int first = firstFreeChunk;
        long mask = firstFreeMask;
        int slot = Long.numberOfTrailingZeros(mask);
        long left = mask & ~(1L << slot);
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.key32(k, first);
        AgTreeFormat.maskValue(v, left);
        if (left == 0) {
            fino.delete(txn, k);
            firstFreeChunk = -1;
        } else {
            fino.put(txn, k, v);
            firstFreeMask = left;
        }
        ino.put(txn, k, v);
        addU64(txn, agi, FREE_INODES, -1);
        counters.freeInodes.decrement();
        int agIno = first + slot;
        Buffer b = lockInodeBlock(txn, agIno);
        int rec = InodeFormat.recordOffset(cache.blockSize(), Geometry.inodeSlot(agIno));
        if (InodeFormat.mode(b.data(), rec) != 0) {
            throw new CorruptionException(b.block(), INODE_BLOCK, "inode " + geometry.inodeNumber(agno, agIno)
                    + " is free in the inode tree but its record has mode 0" + Integer.toOctalString(InodeFormat.mode(b.data(), rec)));
        }
        txn.log(b, rec, InodeFormat.init(b.data(), rec, recordSize, mode, uid, gid, nlink, nowNanos));
        return geometry.inodeNumber(agno, agIno);
    }

    /**
     * With the AGI held (its free list in range): adds a chunk of free inodes.
     *
     * @return 1; or {@link #NO_SPACE}, {@link #RETRY_FIX} or {@link #RETRY_BUSY} with nothing changed and
     *         the headers released
     */
    private long makeChunk(Txn txn, int[] frames) {
        lock(txn, agf);
        long[] at = null;
        long fail = !agfl.holds(RESERVE) ? RETRY_FIX
                : u64(agf.data(), FREE_BLOCKS) < CHUNK_BLOCKS + HELD_BACK || extentAtLeast(txn, CHUNK_BLOCKS) < 0 ? NO_SPACE
                : (at = findUsable(txn, CHUNK_BLOCKS, CHUNK_BLOCKS)) == null ? RETRY_BUSY : 1;
        if (fail <= 0) {
            chunkless |= fail == NO_SPACE;
            txn.release(agf);
            txn.release(agi);
            return fail;
        }
        addChunk(txn, frames, at);
        return 1;
    }

    /**
     * Makes sure the group has a free inode, adding a chunk in a transaction of its own if it has none:
     * what a create that allocates more than its inode (a long symlink's block) runs first, so that
     * nothing can fail in its own transaction after its first change.
     *
     * @param frames {@value Geometry#CHUNK_BLOCKS} reserved cache frames, as for {@link #allocInode}
     * @return 1 if the group has a free inode now; else {@link #NO_SPACE}, {@link #RETRY_FIX} or
     *         {@link #RETRY_BUSY}, with nothing changed
     */
    long ensureFreeInode(int[] frames) {
        try (Txn txn = Txn.begin(cache, allocInodeItems(true))) {
            lock(txn, agi);
            if (u64(agi.data(), FREE_INODES) > 0) {
                return 1;
            }
            if (!agil.holds(OP_BLOCKS)) {
                return RETRY_FIX;
            }
            long made = makeChunk(txn, frames);
            if (made > 0) {
                txn.commit();
            }
            return made;
        }
    }

    /**
     * With the AGI held: makes {@link #firstFreeChunk} known, reading the free-inode tree's first record
     * (checked against the inode tree) if it is not; false if that tree is empty.
     */
    private boolean loadFirstFree(Txn txn) {
        if (firstFreeChunk >= 0) {
            return true;
        }
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[8]);
        if (fino.find(txn, MemorySegment.ofArray(new byte[4]), BTree.Match.CEILING, k, v) < 0) {
            return false;
        }
        int first = AgTreeFormat.key32(k);
        if (first < 0 || first % Geometry.INODES_PER_BLOCK != 0 || (first >>> 3) < FIRST_FREE || (first >>> 3) > length - CHUNK_BLOCKS) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s free-inode tree holds a chunk at inode "
                    + Integer.toUnsignedString(first) + ", which is no chunk of the group");
        }
        checkChunk(txn, first, AgTreeFormat.mask(v));
        firstFreeMask = AgTreeFormat.mask(v);
        firstFreeChunk = AgTreeFormat.key32(k);
        return true;
    }

    /** The inode tree must hold the free-inode tree's record for the chunk at {@code first}, with the same mask. */
    private void checkChunk(Txn txn, int first, long mask) {
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.key32(k, first);
        if (ino.find(txn, k, BTree.Match.EXACT, MemorySegment.ofArray(new byte[4]), v) < 0 || AgTreeFormat.mask(v) != mask) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s inode trees disagree about the chunk at "
                    + first + ": free mask " + Long.toHexString(mask) + " in the free-inode tree");
        }
    }

    /** With AGI and AGF held and the free lists in range: a new chunk of free inodes at {@code at} ({@link #findUsable}). */
    private void addChunk(Txn txn, int[] frames, long[] at) {
        int s = extentStart(at[1]);
        takeRange(txn, at[0], at[1]);
        for (int i = 0; i < CHUNK_BLOCKS; i++) {
            cache.createEmpty(txn, start + s + i, InodeFormat.MAGIC, agno, frames[i]); // records log themselves
            frames[i] = -1;
        }
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.key32(k, s << 3);
        AgTreeFormat.maskValue(v, -1L);
        if (!ino.putIfAbsent(txn, k, v) || !fino.putIfAbsent(txn, k, v)) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + " allocated blocks [" + s + ", +"
                    + CHUNK_BLOCKS + ") for inodes but its inode trees already hold a chunk there");
        }
        if (firstFreeChunk < 0 || s << 3 < firstFreeChunk) {
            firstFreeChunk = s << 3;
            firstFreeMask = -1L;
        }
        addU64(txn, agi, INODES, CHUNK_INODES);
        addU64(txn, agi, FREE_INODES, CHUNK_INODES);
        counters.inodes.add(CHUNK_INODES);
        counters.freeInodes.add(CHUNK_INODES);
    }

    /** True if the inode tree has a chunk holding {@code agIno} (lock-free). */
    boolean inChunk(int agIno) {
        MemorySegment key = MemorySegment.ofArray(new byte[4]);
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        AgTreeFormat.key32(key, agIno);
        return ino.find(null, key, BTree.Match.FLOOR, k, MemorySegment.ofArray(new byte[8])) >= 0
                && agIno - AgTreeFormat.key32(k) < CHUNK_INODES;
    }

    private Buffer lockInodeBlock(Txn txn, int agIno) {
        for (;;) {
            Buffer b = cache.get(start + (agIno >>> 3), InodeFormat.MAGIC, agno, INODE_BLOCK);
            if (txn.lock(b)) {
                return b;
            }
        }
    }

    /**
     * Frees inode {@code agIno} of this group in {@code txn}: its record is cleared (keeping the
     * generation) and its slot marked free. A chunk left with no inode in use is noted for
     * {@link #reclaimEmptyChunks}, which its caller runs once this transaction has committed.
     *
     * @return true, or false for {@link #RETRY_FIX} (nothing changed, headers released)
     * @throws InvalidArgumentException if the inode is not allocated (nothing changed)
     */
    boolean freeInode(Txn txn, int agIno) {
        lock(txn, agi);
        if (!agil.holds(OP_BLOCKS)) {
            txn.release(agi);
            return false;
        }
        MemorySegment key = MemorySegment.ofArray(new byte[4]);
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        MemorySegment v = MemorySegment.ofArray(new byte[8]);
        AgTreeFormat.key32(key, agIno);
        long ino = geometry.inodeNumber(agno, agIno);
        if (this.ino.find(txn, key, BTree.Match.FLOOR, k, v) < 0 || agIno - AgTreeFormat.key32(k) >= CHUNK_INODES) {
            txn.release(agi);
            throw new InvalidArgumentException("inode " + ino + " lies in no inode chunk of group " + agno);
        }
        long mask = AgTreeFormat.mask(v);
        long bit = 1L << (agIno - AgTreeFormat.key32(k));
        if ((mask & bit) != 0) {
            txn.release(agi);
            throw new InvalidArgumentException("inode " + ino + " is not allocated");
        }
        Buffer b = lockInodeBlock(txn, agIno);
        int rec = InodeFormat.recordOffset(cache.blockSize(), Geometry.inodeSlot(agIno));
        if (InodeFormat.mode(b.data(), rec) == 0) {
            throw new CorruptionException(b.block(), INODE_BLOCK, "inode " + ino + " is in use in the inode tree but its record is free");
        }
        AgTreeFormat.maskValue(v, mask | bit);
        this.ino.put(txn, k, v);
        fino.put(txn, k, v);
        int chunk = AgTreeFormat.key32(k);
        if (chunk == firstFreeChunk || firstFreeChunk >= 0 && chunk < firstFreeChunk) {
            firstFreeChunk = chunk;
            firstFreeMask = mask | bit;
        }
        if ((mask | bit) == -1L) {
            emptyChunks.offer(chunk);
        }
        addU64(txn, agi, FREE_INODES, 1);
        counters.freeInodes.increment();
        txn.log(b, rec, InodeFormat.clear(b.data(), rec, recordSize));
        return true;
    }

    /**
     * Returns to free space, each in a transaction of its own, the chunks {@link #freeInode} left with
     * no inode in use, unless one has been allocated from since, or the group would be left with fewer
     * than a chunk of free inodes (which keeps a create/unlink cycle at a chunk's edge from making and
     * freeing the same chunk over and over). Call holding no buffer lock.
     */
    void reclaimEmptyChunks() {
        for (Integer first; (first = emptyChunks.poll()) != null; ) {
            for (int attempt = 0; !freeChunk(first); attempt++) {
                if (attempt == FIX_ATTEMPTS) {
                    return; // the chunk stays: allocated and free, as it would after a crash
                }
                fix();
            }
        }
    }

    /** Items a {@link #freeChunk} transaction may change. */
    private int freeChunkItems() {
        return 2 + ino.reservation() + fino.reservation() + CHUNK_BLOCKS + freeSpaceItems();
    }

    /**
     * Frees chunk {@code first} if it is still empty and the group keeps a chunk of free inodes besides;
     * false if a free list must be refilled first (nothing changed).
     */
    private boolean freeChunk(int first) {
        Buffer[] blocks = new Buffer[CHUNK_BLOCKS];
        try (Txn txn = Txn.begin(cache, freeChunkItems())) {
            lock(txn, agi);
            if (!agil.holds(OP_BLOCKS)) {
                return false;
            }
            MemorySegment k = MemorySegment.ofArray(new byte[4]);
            MemorySegment v = MemorySegment.ofArray(new byte[8]);
            AgTreeFormat.key32(k, first);
            if (ino.find(txn, k, BTree.Match.EXACT, MemorySegment.ofArray(new byte[4]), v) < 0 || AgTreeFormat.mask(v) != -1L
                    || u64(agi.data(), FREE_INODES) < 2L * CHUNK_INODES) {
                return true;
            }
            lock(txn, agf);
            if (!agfl.holds(RESERVE)) {
                return false;
            }
            for (int i = 0; i < CHUNK_BLOCKS; i++) {
                blocks[i] = lockInodeBlock(txn, first + i * Geometry.INODES_PER_BLOCK);
                for (int slot = 0; slot < Geometry.INODES_PER_BLOCK; slot++) {
                    int rec = InodeFormat.recordOffset(cache.blockSize(), slot);
                    if (InodeFormat.mode(blocks[i].data(), rec) != 0) {
                        throw new CorruptionException(blocks[i].block(), INODE_BLOCK, "inode " + geometry.inodeNumber(agno,
                                first + i * Geometry.INODES_PER_BLOCK + slot) + " is free in the inode tree but its record is in use");
                    }
                }
            }
            if (!ino.delete(txn, k) || !fino.delete(txn, k)) {
                throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s inode trees disagree about the empty chunk at " + first);
            }
            for (Buffer b : blocks) {
                cache.free(txn, b, InodeFormat.FREED_MAGIC);
            }
            freeExtent(txn, first >>> 3, CHUNK_BLOCKS);
            if (firstFreeChunk == first) {
                firstFreeChunk = -1; // the next allocation reads the free-inode tree's new first record
            }
            addU64(txn, agi, INODES, -CHUNK_INODES);
            addU64(txn, agi, FREE_INODES, -CHUNK_INODES);
            counters.inodes.add(-CHUNK_INODES);
            counters.freeInodes.add(-CHUNK_INODES);
            txn.commit();
            return true;
        }
    }

    // ------------------------------------------------------------------ namespace transactions (AGI held)

    /**
     * True if the inode trees' free list is too short for an inode allocation, free or orphan change: the
     * caller holding the AGI lets go of everything unchanged and runs {@link #fix()}.
     */
    boolean inodeListLow() {
        return !agil.holds(OP_BLOCKS);
    }

    /**
     * With the AGI held by {@code txn}: the group inode {@link #allocInode} will hand out next, or -1 if it
     * must add a chunk first. Lets a transaction lock the new inode's block in its block order before
     * allocating.
     */
    int nextFreeInode(Txn txn) {
        if (!txn.holds(agi)) {
            throw new IllegalStateException("the AGI of group " + agno + " is not held");
        }
        if (u64(agi.data(), FREE_INODES) == 0 || !loadFirstFree(txn)) {
            return -1;
        }
        return firstFreeChunk + Long.numberOfTrailingZeros(firstFreeMask);
    }

    /** Items an orphan change may touch (the tree's creation included). */
    int orphanItems() {
        BTree t = orphans;
        return 1 + (t == null ? BTree.CREATE_ITEMS + 4 : t.reservation());
    }

    /** Records group inode {@code agIno} as an orphan in {@code txn}, which holds the AGI. */
    void addOrphan(Txn txn, int agIno) {
        lock(txn, agi);
        BTree t = orphans;
        if (t == null) {
            t = BTree.create(txn, agil, AgTreeFormat.treeId(agno, AgTreeFormat.ORPHAN));
            setU32(txn, agi, ORPHAN_TREE, relative(t.headerBlock()));
            orphans = t;
        }
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        AgTreeFormat.key32(k, agIno);
        if (!t.putIfAbsent(txn, k, NONE)) {
            throw new CorruptionException(agi.block(), AGI, "inode " + geometry.inodeNumber(agno, agIno)
                    + " is already an orphan of group " + agno);
        }
    }

    /** Removes group inode {@code agIno} from the orphans in {@code txn}, which holds the AGI. */
    void removeOrphan(Txn txn, int agIno) {
        lock(txn, agi);
        MemorySegment k = MemorySegment.ofArray(new byte[4]);
        AgTreeFormat.key32(k, agIno);
        BTree t = orphans;
        if (t == null || !t.delete(txn, k)) {
            throw new CorruptionException(agi.block(), AGI, "inode " + geometry.inodeNumber(agno, agIno)
                    + " is freed as an orphan but group " + agno + " does not list it");
        }
    }

    /** The orphans' inode numbers (a snapshot). */
    List<Long> orphanInodes() {
        List<Long> out = new java.util.ArrayList<>();
        BTree t = orphans;
        if (t != null) {
            for (Cursor c = t.cursor(null, false); c.next(); ) {
                long ino = geometry.inodeNumber(agno, AgTreeFormat.key32(MemorySegment.ofArray(c.key())));
                if (!geometry.isValidInode(ino) || geometry.agOfInode(ino) != agno) {
                    throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s orphan tree names inode " + ino
                            + ", which is not one of the group's");
                }
                out.add(ino);
            }
        }
        return out;
    }

    /** Allocated inodes of this group (a snapshot through the inode tree; for checkers). */
    List<Long> allocatedInodes() {
        List<Long> out = new java.util.ArrayList<>();
        for (Cursor c = ino.cursor(null, false); c.next(); ) {
            int first = AgTreeFormat.key32(MemorySegment.ofArray(c.key()));
            long mask = AgTreeFormat.mask(MemorySegment.ofArray(c.value()));
            for (int i = 0; i < CHUNK_INODES; i++) {
                if ((mask & (1L << i)) == 0) {
                    out.add(geometry.inodeNumber(agno, first + i));
                }
            }
        }
        return out;
    }

    // ------------------------------------------------------------------ checking

    private enum Use { HEADER, TREE_NODE, FREE_LIST, FREE, INODES, ALLOCATED }

    /**
     * Verifies the group while nothing changes it, adding one line per problem: headers, the four trees,
     * that every block is exactly one of header, tree node, free-list entry, free or inode chunk, that the
     * two free-space trees hold the same extents, that the two inode trees agree and match the inode
     * records, and the header counts. Never writes.
     *
     * @param allocated extents (device block to length) allocated to what the groups do not describe
     *                  themselves (file data, directory blocks)
     */
    void check(NavigableMap<Long, Integer> allocated, List<String> problems) {
        String where = "group " + agno;
        Use[] use = new Use[length];
        BitSet seen = new BitSet(length);
        Map<String, BTree> trees = new java.util.LinkedHashMap<>();
        trees.put("by-start free-space tree", bno);
        trees.put("by-length free-space tree", cnt);
        trees.put("inode tree", ino);
        trees.put("free-inode tree", fino);
        if (orphans != null) {
            trees.put("orphan tree", orphans);
        }
        mark(use, seen, AGF_BLOCK, 1, Use.HEADER, where, problems);
        mark(use, seen, AGI_BLOCK, 1, Use.HEADER, where, problems);
        for (Map.Entry<String, BTree> t : trees.entrySet()) {
            TreeCheck c = t.getValue().check();
            for (TreeCheck.Problem p : c.problems()) {
                problems.add(where + " " + t.getKey() + ": " + p);
            }
            if (c.height() >= MAX_HEIGHT) {
                problems.add(where + " " + t.getKey() + ": height " + c.height() + " reaches the limit " + MAX_HEIGHT);
            }
            TreeWalk.blocks(t.getValue(), block -> mark(use, seen, (int) (block - start), 1, Use.TREE_NODE,
                    where + " " + t.getKey(), problems));
        }
        for (FreeList l : new FreeList[] {agfl, agil}) {
            for (int i = 0; i < l.count(); i++) {
                mark(use, seen, l.entry(i), 1, Use.FREE_LIST, where + " free list", problems);
            }
        }
        long free = 0;
        Map<Long, Boolean> byStart = new HashMap<>();
        for (Cursor c = bno.cursor(null, false); c.next(); ) {
            int s = AgTreeFormat.key32(MemorySegment.ofArray(c.key()));
            int len = AgTreeFormat.length(MemorySegment.ofArray(c.value()));
            mark(use, seen, s, len, Use.FREE, where + " free extent", problems);
            free += len;
            byStart.put(extent(s, len), Boolean.TRUE);
        }
        for (Cursor c = cnt.cursor(null, false); c.next(); ) {
            MemorySegment k = MemorySegment.ofArray(c.key());
            if (byStart.remove(extent(AgTreeFormat.cntStart(k), AgTreeFormat.cntLength(k))) == null) {
                problems.add(where + ": extent [" + AgTreeFormat.cntStart(k) + ", +" + AgTreeFormat.cntLength(k)
                        + ") is in the by-length tree only");
            }
        }
        for (long e : byStart.keySet()) {
            problems.add(where + ": extent [" + extentStart(e) + ", +" + extentLength(e) + ") is in the by-start tree only");
        }
        if (free != u64(agf.data(), FREE_BLOCKS)) {
            problems.add(where + ": the free-space trees hold " + free + " blocks, the header counts " + u64(agf.data(), FREE_BLOCKS));
        }
        checkInodes(use, seen, where, problems);
        for (Map.Entry<Long, Integer> e : allocated.subMap(start, start + length).entrySet()) {
            mark(use, seen, (int) (e.getKey() - start), e.getValue(), Use.ALLOCATED, where + " allocated extent", problems);
        }
        for (int b = seen.nextClearBit(0); b < length; b = seen.nextClearBit(b)) {
            int end = Math.min(length, seen.nextSetBit(b) < 0 ? length : seen.nextSetBit(b));
            problems.add(where + ": blocks [" + b + ", " + end + ") are neither free nor in use (lost)");
            b = end;
        }
    }

    private void checkInodes(Use[] use, BitSet seen, String where, List<String> problems) {
        long inodes = 0, freeInodes = 0;
        Map<Integer, Long> withFree = new HashMap<>();
        for (Cursor c = fino.cursor(null, false); c.next(); ) {
            withFree.put(AgTreeFormat.key32(MemorySegment.ofArray(c.key())), AgTreeFormat.mask(MemorySegment.ofArray(c.value())));
        }
        for (Cursor c = ino.cursor(null, false); c.next(); ) {
            int first = AgTreeFormat.key32(MemorySegment.ofArray(c.key()));
            long mask = AgTreeFormat.mask(MemorySegment.ofArray(c.value()));
            mark(use, seen, first >>> 3, CHUNK_BLOCKS, Use.INODES, where + " inode chunk", problems);
            inodes += CHUNK_INODES;
            freeInodes += Long.bitCount(mask);
            Long f = withFree.remove(first);
            if (mask != 0 && (f == null || f != mask) || mask == 0 && f != null) {
                problems.add(where + ": chunk at inode " + first + " has free mask " + Long.toHexString(mask)
                        + " but the free-inode tree says " + (f == null ? "nothing" : Long.toHexString(f)));
            }
            for (int i = 0; i < CHUNK_INODES && (first >>> 3) + CHUNK_BLOCKS <= length; i++) {
                int agIno = first + i;
                Buffer b;
                try {
                    // the chunk is known here: a miss reads all of it at once
                    b = cache.get(start + (agIno >>> 3), InodeFormat.MAGIC, agno, INODE_BLOCK, start + (first >>> 3), CHUNK_BLOCKS);
                } catch (CorruptionException e) {
                    problems.add(where + ": " + e.getMessage());
                    i += Geometry.INODES_PER_BLOCK - 1;
                    continue;
                }
                boolean inUse = InodeFormat.mode(b.data(), InodeFormat.recordOffset(cache.blockSize(), Geometry.inodeSlot(agIno))) != 0;
                if (inUse == ((mask & (1L << i)) != 0)) {
                    problems.add(where + ": inode " + geometry.inodeNumber(agno, agIno) + " is " + (inUse ? "in use" : "free")
                            + " but the inode tree says " + (inUse ? "free" : "in use"));
                }
            }
        }
        for (int first : withFree.keySet()) {
            problems.add(where + ": chunk at inode " + first + " is in the free-inode tree only");
        }
        if (inodes != u64(agi.data(), INODES) || freeInodes != u64(agi.data(), FREE_INODES)) {
            problems.add(where + ": the inode trees hold " + inodes + " inodes, " + freeInodes + " free; the header counts "
                    + u64(agi.data(), INODES) + ", " + u64(agi.data(), FREE_INODES));
        }
    }

    private void mark(Use[] use, BitSet seen, int from, int n, Use as, String what, List<String> problems) {
        if (from < 0 || n < 1 || from > length - n) {
            problems.add(what + ": blocks [" + from + ", +" + n + ") lie outside the group's " + length + " blocks");
            return;
        }
        for (int b = from; b < from + n; b++) {
            if (seen.get(b)) {
                problems.add(what + ": block " + b + " is also " + use[b]);
            } else {
                seen.set(b);
                use[b] = as;
            }
        }
    }
}
