package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

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

/**
 * One allocation group: a slice of the device with its own headers (the AGF heading free space, the AGI
 * heading inodes, each with a free list), its {@link FreeSpace} (the free-space trees, by start and by
 * length), its {@link InodeAllocator} (the inode trees: every chunk, and the chunks with a free inode) and
 * its orphan tree, so that allocations in different groups share no lock and no block. This class holds
 * the headers, opens and formats the group, and is what the volume and the namespace's transactions call;
 * the two parts do the allocating.
 *
 * <h2>Locks</h2>
 * The AGI buffer's lock serializes the group's inode allocation and freeing, the AGF buffer's its
 * free-space changes; a transaction takes them through {@link Txn#lock} (AGI before AGF when it needs
 * both) and holds them to commit, like XFS's AGI/AGF buffer locks. Only holders of the AGF change the
 * free-space trees and only holders of the AGI the inode trees, so several operations on one tree may
 * share a transaction, and their reads go through {@link BTree#find} with that transaction. The order is
 * AGI, then AGF, then inode blocks. Both header buffers are resident: the free lists in them are popped
 * with tree nodes locked.
 *
 * <h2>Free lists</h2>
 * Every operation that changes trees first checks that the free list the trees draw nodes from holds
 * {@link #RESERVE} entries (twice the most one operation can take); if not it gives up its locks and
 * the caller runs {@link #refillFreeList()}, which refills the lists from the free-space trees (and
 * spills past {@link #LIST_MOST} back) in transactions of its own. Allocations for inodes and data keep
 * in the trees what the lists lack of their most ({@link FreeList#lack}), so refilling the lists can always
 * succeed, and beside them the refcount tree's reservation ({@link Refcounts#reserve}), so that its nodes
 * can always be had. The volume's spare count holds back the same ({@link Counters#listsLack}): the lists'
 * blocks count as free ones held back, so a refill or a spill moves it not at all.
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
    /** Entries a free list holds at most between operations: past them it spills back to free space. */
    static final int LIST_MOST = 4 * RESERVE;
    /** Times an operation may meet {@link AllocOutcome#BUSY} in a row before it gives up with ENOSPC. */
    static final int BUSY_RETRIES = 1000;
    static final String AGF = "allocation group free-space header";
    static final String AGI = "allocation group inode header";
    static final String INODE_BLOCK = "inode block";
    static final MemorySegment NONE = MemorySegment.ofArray(new byte[0]);

    final int agno;
    final long start;
    final int length;
    final BufferCache cache;
    final Geometry geometry;
    final Buffer agf;
    final Buffer agi;
    final FreeList agfl;
    final FreeList agil;
    final FreeSpace space;
    final InodeAllocator inodes;
    /** Counts of the group's shared data blocks (its refcount tree, made by the first clone, under the AGF). */
    final Refcounts refcounts;
    /** Unlinked inodes still open or still being freed; null until the first (created under the AGI). */
    volatile BTree orphans;

    private AllocationGroup(BufferCache cache, Geometry geometry, Counters counters, int agno, Buffer agf, Buffer agi) {
        this.cache = cache;
        this.geometry = geometry;
        this.agno = agno;
        this.start = geometry.agStart(agno);
        this.length = geometry.agLength(agno);
        this.agf = agf;
        this.agi = agi;
        this.agfl = new FreeList(cache, agf, AGF_LIST_COUNT, start, counters);
        this.agil = new FreeList(cache, agi, AGI_LIST_COUNT, start, counters);
        this.refcounts = new Refcounts(this, counters);
        this.space = new FreeSpace(this, cache, counters);
        this.inodes = new InodeAllocator(this, cache, geometry, counters, space);
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
        setU32(txn, agf, AG_NUMBER, agno);
        setU32(txn, agf, AG_LENGTH, ag.length);
        setU32(txn, agi, AG_NUMBER, agno);
        // each list starts with its two trees' header and root blocks on top (popped by create), then its reserve
        int next = seed(txn, ag.agfl, FIRST_FREE, 4 + 2 * RESERVE);
        next = seed(txn, ag.agil, next, 4 + 2 * RESERVE);
        FreeSpace space = ag.space;
        InodeAllocator inodes = ag.inodes;
        space.bno = BTree.create(txn, ag.agfl, AgTreeFormat.treeId(agno, AgTreeFormat.BNO));
        space.cnt = BTree.create(txn, ag.agfl, AgTreeFormat.treeId(agno, AgTreeFormat.CNT));
        inodes.ino = BTree.create(txn, ag.agil, AgTreeFormat.treeId(agno, AgTreeFormat.INO));
        inodes.fino = BTree.create(txn, ag.agil, AgTreeFormat.treeId(agno, AgTreeFormat.FINO));
        setU32(txn, agf, BNO_TREE, ag.relative(space.bno.headerBlock()));
        setU32(txn, agf, CNT_TREE, ag.relative(space.cnt.headerBlock()));
        setU32(txn, agi, INO_TREE, ag.relative(inodes.ino.headerBlock()));
        setU32(txn, agi, FINO_TREE, ag.relative(inodes.fino.headerBlock()));
        space.insertExtent(txn, next, ag.length - next);
        space.addFree(txn, ag.length - next);
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
        ag.verifyList(ag.agfl, agf, AGF);
        ag.verifyList(ag.agil, agi, AGI);
        ag.verifyCounts(f, i, g);
        ag.pendingAtOpen = ag.space.openPending();
        ag.space.bno = ag.openTree(agf, BNO_TREE, ag.agfl, AgTreeFormat.BNO, AGF);
        ag.space.cnt = ag.openTree(agf, CNT_TREE, ag.agfl, AgTreeFormat.CNT, AGF);
        ag.inodes.ino = ag.openTree(agi, INO_TREE, ag.agil, AgTreeFormat.INO, AGI);
        ag.inodes.fino = ag.openTree(agi, FINO_TREE, ag.agil, AgTreeFormat.FINO, AGI);
        if (u32(i, ORPHAN_TREE) != 0) {
            ag.orphans = ag.openTree(agi, ORPHAN_TREE, ag.agil, AgTreeFormat.ORPHAN, AGI);
        }
        ag.refcounts.open();
        return ag;
    }

    /**
     * The headers' counts possible for the group: a mount after a crash sums them into the volume's free
     * and inode counters, which size allocations (a negative free count once made a write's speculative
     * end fall before its start, and the write go on with no blocks mapped).
     */
    private void verifyCounts(MemorySegment f, MemorySegment i, Geometry g) {
        long free = u64(f, FREE_BLOCKS), inodes = u64(i, INODES), freeInodes = u64(i, FREE_INODES);
        long most = (long) length * (g.blockSize() / g.inodeSize());
        if (free < 0 || free > length) {
            throw new CorruptionException(agf.block(), AGF, "free block count " + free + ", expected 0.." + length);
        }
        if (inodes < 0 || inodes > most || freeInodes < 0 || freeInodes > inodes) {
            throw new CorruptionException(agi.block(), AGI, inodes + " inodes of which " + freeInodes + " free, expected 0.."
                    + most + " inodes and at most as many free");
        }
    }

    /** A free list's count in range, and its entries distinct blocks of the group past the headers: they become tree nodes. */
    private void verifyList(FreeList list, Buffer header, String what) {
        int n = list.count();
        if (n < 0 || n > list.capacity()) {
            throw new CorruptionException(header.block(), what, "free list of " + n + " entries; it holds at most "
                    + list.capacity());
        }
        BitSet seen = new BitSet();
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

    static void setU32(Txn txn, Buffer b, int offset, int v) {
        AgHeaderFormat.setU32(b.data(), offset, v);
        txn.log(b, offset, 4);
    }

    static void addU64(Txn txn, Buffer b, int offset, long delta) {
        AgHeaderFormat.setU64(b.data(), offset, u64(b.data(), offset) + delta);
        txn.log(b, offset, 8);
    }

    /** A header field read without the lock (validated against the buffer's version). */
    static long snapshot(Buffer b, int offset) {
        for (;;) {
            long v = b.readVersion();
            long x = u64(b.data(), offset);
            if (b.validate(v)) {
                return x;
            }
        }
    }

    /** The free block count in the AGF, read without the lock. */
    long freeBlockCount() {
        return space.freeBlockCount();
    }

    long freeInodes() {
        return snapshot(agi, FREE_INODES);
    }

    /** {@link FreeSpace#heldBack}. */
    long heldBack() {
        return space.heldBack();
    }

    /** {@link FreeSpace#mayAddChunk}. */
    boolean mayAddChunk() {
        return space.mayAddChunk();
    }

    long inodes() {
        return snapshot(agi, INODES);
    }

    /** Group 0: the table catalog's inode number, 0 if the volume has none yet (read without the lock). */
    long catalog() {
        return snapshot(agi, AgHeaderFormat.CATALOG);
    }

    /** Group 0: the tables' blob directory's inode number, 0 if the volume has none yet (read without the lock). */
    long blobDirectory() {
        return snapshot(agi, AgHeaderFormat.BLOBS);
    }

    /** Group 0: the tables' overflow tree's inode number, 0 if the volume has none yet (read without the lock). */
    long overflowTree() {
        return snapshot(agi, AgHeaderFormat.OVERFLOW);
    }

    /** Group 0, in {@code txn}: sets header field {@code field} ({@code AgHeaderFormat.CATALOG}, {@code BLOBS} or {@code OVERFLOW}) to inode {@code ino}. */
    void setTablesInode(Txn txn, int field, long ino) {
        lock(txn, agi);
        AgHeaderFormat.setU64(agi.data(), field, ino);
        txn.log(agi, field, 8);
    }

    static void lock(Txn txn, Buffer header) {
        if (!txn.lock(header)) {
            throw new IllegalStateException("resident group header " + header + " became obsolete");
        }
    }

    // ------------------------------------------------------------------ free space and inodes (the parts' work)

    /** {@link FreeSpace#needsRefill}. */
    boolean needsRefill() {
        return space.needsRefill();
    }

    /** {@link FreeSpace#refillFreeList}: call holding no buffer lock. */
    void refillFreeList() {
        space.refillFreeList();
    }

    /** {@link FreeSpace#awaitBusy}: call holding no buffer lock. */
    void awaitBusy(int attempt) {
        space.awaitBusy(attempt);
    }

    /**
     * After a block allocation here came to {@code r} (not DONE) and its locks were let go: -1 if the group
     * has no room (try another), or only busy blocks no wait can free ({@link FreeSpace#waitingHelps});
     * else waits out busy blocks ({@code busy[0]} counts the waits, up to {@link #BUSY_RETRIES}) or
     * refills the free lists, and returns the attempts that used up: 0 after a
     * wait, 1 after a refill.
     */
    int recover(AllocOutcome r, int[] busy) {
        if (r == AllocOutcome.NO_SPACE) {
            return -1;
        }
        if (r == AllocOutcome.BUSY && busy[0] < BUSY_RETRIES) {
            if (!space.waitingHelps(busy[0])) {
                return -1; // inside a journal group the busy blocks outlast any wait: another group's space
            }
            awaitBusy(busy[0]++);
            return 0;
        }
        refillFreeList();
        return 1;
    }

    /** {@link FreeSpace#blockItems}. */
    int blockItems() {
        return space.blockItems();
    }

    /** {@link FreeSpace#allocBlocks}. */
    AllocOutcome allocBlocks(Txn txn, int len) {
        return space.allocBlocks(txn, len);
    }

    /** {@link FreeSpace#allocClaiming}. */
    AllocOutcome allocClaiming(Txn txn, int len) {
        return space.allocClaiming(txn, len);
    }

    /** {@link FreeSpace#allocRuns}. */
    int allocRuns(Txn txn, int min, int want, int items, long[] into) {
        return space.allocRuns(txn, min, want, items, into);
    }

    /** {@link FreeSpace#allocPair}. */
    AllocOutcome allocPair(Txn txn, boolean claiming, long[] into) {
        return space.allocPair(txn, claiming, into);
    }

    /** {@link FreeSpace#findHalf}. */
    long[] findHalf(Txn txn) {
        return space.findHalf(txn);
    }

    /** {@link FreeSpace#takeHalf}. */
    long takeHalf(Txn txn, long[] at) {
        return space.takeHalf(txn, at);
    }

    /** {@link FreeSpace#claimPair}. */
    boolean claimPair() {
        return space.claimPair();
    }

    /** {@link FreeSpace#releasePair}. */
    void releasePair() {
        space.releasePair();
    }

    /** {@link FreeSpace#pairItems}. */
    int pairItems() {
        return space.pairItems();
    }

    /** {@link FreeSpace#allocBlocksNear}. */
    AllocOutcome allocBlocksNear(Txn txn, long near, int len, boolean apart) {
        return space.allocBlocksNear(txn, near, len, apart);
    }

    /** {@link FreeSpace#allocatedBlock}. */
    long allocatedBlock(Txn txn) {
        return space.allocatedBlock(txn);
    }

    /** Blocks the pending-free list held when the group was opened: a mount after a crash counts them free. */
    long pendingAtOpen;

    /** {@link FreeSpace#deferData}. */
    boolean deferData(Txn txn, long block, int len) {
        return space.deferData(txn, block, len);
    }

    /** {@link FreeSpace#drainPending}. */
    void drainPending(boolean wait) {
        space.drainPending(wait);
    }

    /** {@link FreeSpace#pendingCount}. */
    int pendingCount() {
        return space.pendingCount();
    }

    /** {@link FreeSpace#pendingHalfFull}. */
    boolean pendingHalfFull() {
        return space.pendingHalfFull();
    }

    /** {@link FreeSpace#lockForRelease}. */
    boolean lockForRelease(Txn txn) {
        return space.lockForRelease(txn);
    }

    /** {@link FreeSpace#tryLockForRelease}. */
    boolean tryLockForRelease(Txn txn) {
        return space.tryLockForRelease(txn);
    }

    /** {@link FreeSpace#releaseData}. */
    AllocOutcome releaseData(Txn txn, long block, int len) {
        return space.releaseData(txn, block, len);
    }

    /** {@link FreeSpace#replaceData}. */
    AllocOutcome replaceData(Txn txn, int len, long block, int oldLen) {
        return space.replaceData(txn, len, block, oldLen);
    }

    /** {@link FreeSpace#retakeData}. */
    AllocOutcome retakeData(Txn txn, long block, int len, BusyExtents.Entry busy) {
        return space.retakeData(txn, block, len, busy);
    }

    /** {@link FreeSpace#freedData}. */
    BusyExtents.Entry freedData(Txn txn) {
        return space.freedData(txn);
    }

    /** {@link FreeSpace#releaseBlocks}. */
    AllocOutcome releaseBlocks(Txn txn, long block, int len) {
        return space.releaseBlocks(txn, block, len);
    }

    /** {@link FreeSpace#runsItems}. */
    int runsItems() {
        return space.runsItems();
    }

    /** {@link FreeSpace#releaseDataRuns}. */
    int releaseDataRuns(Txn txn, long[] blocks, int[] lens, int from, int to, int items, BusyExtents.Entry[] busy) {
        return space.releaseDataRuns(txn, blocks, lens, from, to, items, busy);
    }

    /** {@link FreeSpace#releaseSingles}. */
    int releaseSingles(Txn txn, long[] blocks, int n, int items) {
        return space.releaseSingles(txn, blocks, n, items);
    }

    /** {@link InodeAllocator#allocInodeItems}. */
    int allocInodeItems(boolean mayAddChunk) {
        return inodes.allocInodeItems(mayAddChunk);
    }

    /** {@link InodeAllocator#freeInodeItems}. */
    int freeInodeItems() {
        return inodes.freeInodeItems();
    }

    /** {@link InodeAllocator#allocInode}. */
    AllocOutcome allocInode(Txn txn, int[] frames, int mode, int uid, int gid, int nlink, long nowNanos) {
        return inodes.allocInode(txn, frames, mode, uid, gid, nlink, nowNanos);
    }

    /** {@link InodeAllocator#takeListedInode}. */
    int takeListedInode(Txn txn) {
        return inodes.takeListedInode(txn);
    }

    /** {@link InodeAllocator#initInode}. */
    void initInode(Txn txn, int agIno, int mode, int uid, int gid, int nlink, long nowNanos) {
        inodes.initInode(txn, agIno, mode, uid, gid, nlink, nowNanos);
    }

    /** {@link InodeAllocator#allocatedInode}. */
    long allocatedInode(Txn txn) {
        return inodes.allocatedInode(txn);
    }

    /** {@link InodeAllocator#ensureFreeInode}. */
    AllocOutcome ensureFreeInode(int[] frames) {
        return inodes.ensureFreeInode(frames);
    }

    /** {@link InodeAllocator#freeInode}. */
    AllocOutcome freeInode(Txn txn, int agIno) {
        return inodes.freeInode(txn, agIno);
    }

    /** {@link InodeAllocator#reclaimEmptyChunks}: call holding no buffer lock. */
    void reclaimEmptyChunks() {
        inodes.reclaimEmptyChunks();
    }

    /** {@link InodeAllocator#inChunk}. */
    boolean inChunk(int agIno) {
        return inodes.inChunk(agIno);
    }

    /** {@link InodeAllocator#hasFreeInode}. */
    boolean hasFreeInode(Txn txn) {
        return inodes.hasFreeInode(txn);
    }

    /** {@link InodeAllocator#nextFreeInode}. */
    int nextFreeInode(Txn txn) {
        return inodes.nextFreeInode(txn);
    }

    /** {@link InodeAllocator#allocatedInodes}. */
    List<Long> allocatedInodes() {
        return inodes.allocatedInodes();
    }

    // ------------------------------------------------------------------ namespace transactions (AGI held)

    /**
     * True if the inode trees' free list is too short for an inode allocation, free or orphan change: the
     * caller holding the AGI lets go of everything unchanged and runs {@link #refillFreeList()}.
     */
    boolean inodeListLow() {
        return !agil.holds(OP_BLOCKS);
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
        List<Long> out = new ArrayList<>();
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
}
