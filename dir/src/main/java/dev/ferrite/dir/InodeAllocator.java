package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;

import static dev.ferrite.dir.AgHeaderFormat.FIRST_FREE;
import static dev.ferrite.dir.AgHeaderFormat.FREE_INODES;
import static dev.ferrite.dir.AgHeaderFormat.INODES;
import static dev.ferrite.dir.AgHeaderFormat.u64;
import static dev.ferrite.dir.AllocationGroup.AGI;
import static dev.ferrite.dir.AllocationGroup.INODE_BLOCK;
import static dev.ferrite.dir.AllocationGroup.OP_BLOCKS;
import static dev.ferrite.dir.AllocationGroup.RESERVE;
import static dev.ferrite.dir.AllocationGroup.addU64;
import static dev.ferrite.dir.AllocationGroup.lock;
import static dev.ferrite.dir.FreeSpace.extentStart;
import static dev.ferrite.dir.Geometry.CHUNK_BLOCKS;
import static dev.ferrite.dir.Geometry.CHUNK_INODES;

/**
 * A group's inode allocation, the xfs_ialloc role: the inode tree (every chunk of
 * {@value Geometry#CHUNK_INODES} inodes with its free mask, {@link #ino}) and the free-inode tree (the
 * chunks with a free inode, {@link #fino}), allocating and freeing inodes, and making and reclaiming
 * chunks, whose blocks come from the group's {@link FreeSpace}.
 *
 * <h2>Locks</h2>
 * Every change here is made under the AGI buffer's lock, held by the transaction to commit; making or
 * freeing a chunk also takes the AGF, after the AGI ({@link AllocationGroup}'s order). An inode's block is
 * locked after the group's headers.
 */
final class InodeAllocator {
    /** Free-list refills an operation that met a short list tries before giving up. */
    private static final int REFILL_ATTEMPTS = 4;
    /** What a new chunk claims: its blocks, and the free-space trees' and the inode trees' worst growth. */
    private static final int CHUNK_CLAIM = CHUNK_BLOCKS + 2 * OP_BLOCKS;

    private final BufferCache cache;
    private final Geometry geometry;
    private final Counters counters;
    private final FreeSpace space;
    private final int agno;
    private final long start;
    private final int length;
    private final int recordSize;
    private final Buffer agf;
    private final Buffer agi;
    private final FreeList agfl;
    private final FreeList agil;
    /** Every chunk, by its first group inode, with its free mask; set once when the group is formatted or opened. */
    BTree ino;
    /** The chunks with a free inode, as in {@link #ino}; set with it. */
    BTree fino;
    /**
     * Under the AGI: the free-inode tree's first record, chunk {@code firstFreeChunk} with free mask
     * {@code firstFreeMask}, as this group last read or wrote it; -1 if not known. Inode allocation takes
     * from it without searching either inode tree; every change of the free-inode tree keeps it exact.
     */
    private int firstFreeChunk = -1;
    private long firstFreeMask;
    /** Under the AGI: the inode number the last {@link #allocInode} that came to DONE handed out. */
    private long allocated;
    /** Chunks whose last inode in use was freed, for {@link #reclaimEmptyChunks} to look at. */
    private final Queue<Integer> emptyChunks = new ConcurrentLinkedQueue<>();
    /**
     * Keys and values of the inode trees' records, for whoever holds the AGI (one transaction at a time),
     * so allocating and freeing an inode make no garbage. A method fills what it reads before it reads it
     * and reads nothing of them after calling another that uses them.
     */
    private final MemorySegment key = MemorySegment.ofArray(new byte[4]), foundKey = MemorySegment.ofArray(new byte[4]),
            value = MemorySegment.ofArray(new byte[8]);

    InodeAllocator(AllocationGroup ag, BufferCache cache, Geometry geometry, Counters counters, FreeSpace space) {
        this.cache = cache;
        this.geometry = geometry;
        this.counters = counters;
        this.space = space;
        this.agno = ag.agno;
        this.start = ag.start;
        this.length = ag.length;
        this.recordSize = geometry.inodeSize();
        this.agf = ag.agf;
        this.agi = ag.agi;
        this.agfl = ag.agfl;
        this.agil = ag.agil;
    }

    /**
     * Items an {@link #allocInode} transaction may change: the AGI, one operation on each inode tree and
     * the inode's block; with a new chunk also the AGF, a free-space change, the chunk's blocks and the
     * record that initialises them. Call before locking anything (it reads the trees' heights).
     */
    int allocInodeItems(boolean mayAddChunk) {
        int items = 2 + ino.reservation() + fino.reservation();
        return mayAddChunk ? items + 2 + CHUNK_BLOCKS + space.freeSpaceItems() : items;
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
     * @return DONE (the inode is {@link #allocatedInode}); or NO_SPACE (no free inode and no room for a
     *         chunk), NEEDS_REFILL, BUSY or NEEDS_CHUNK (retry with frames and the larger reservation), each
     *         with nothing changed and the headers released
     */
    AllocOutcome allocInode(Txn txn, int[] frames, int mode, int uid, int gid, int nlink, long nowNanos) {
        lock(txn, agi);
        if (!agil.holds(OP_BLOCKS)) {
            txn.release(agi);
            return AllocOutcome.NEEDS_REFILL;
        }
        if (u64(agi.data(), FREE_INODES) == 0) {
            if (frames == null) {
                txn.release(agi);
                return AllocOutcome.NEEDS_CHUNK;
            }
            AllocOutcome made = makeChunk(txn, frames);
            if (made != AllocOutcome.DONE) {
                return made;
            }
        }
        if (!loadFirstFree(txn)) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + " counts " + u64(agi.data(), FREE_INODES)
                    + " free inodes but its free-inode tree is empty");
        }
        initInode(txn, takeListedInode(txn), mode, uid, gid, nlink, nowNanos);
        return AllocOutcome.DONE;
    }

    /**
     * With the AGI held by {@code txn} and {@link #hasFreeInode}: takes the inode {@link #nextFreeInode}
     * names out of the inode trees (it becomes {@link #allocatedInode}), its record not yet written
     * ({@link #initInode}, in the same transaction): so that a caller can lock the record's block later
     * in its own lock order.
     */
    int takeListedInode(Txn txn) {
        if (!hasFreeInode(txn)) {
            throw new IllegalStateException("group " + agno + " has no free inode listed");
        }
        int first = firstFreeChunk;
        long mask = firstFreeMask;
        int slot = Long.numberOfTrailingZeros(mask);
        long left = mask & ~(1L << slot);
        MemorySegment k = key, v = value;
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
        allocated = geometry.inodeNumber(agno, agIno);
        return agIno;
    }

    /** In {@code txn}: writes the new record of group inode {@code agIno}, just taken ({@link #takeListedInode}). */
    void initInode(Txn txn, int agIno, int mode, int uid, int gid, int nlink, long nowNanos) {
        Buffer b = lockInodeBlock(txn, agIno);
        int rec = InodeFormat.recordOffset(cache.blockSize(), Geometry.inodeSlot(agIno));
        if (InodeFormat.mode(b.data(), rec) != 0) {
            throw new CorruptionException(b.block(), INODE_BLOCK, "inode " + geometry.inodeNumber(agno, agIno)
                    + " is free in the inode tree but its record has mode 0" + Integer.toOctalString(InodeFormat.mode(b.data(), rec)));
        }
        txn.log(b, rec, InodeFormat.init(b.data(), rec, recordSize, mode, uid, gid, nlink, nowNanos));
    }

    /**
     * The inode {@link #allocInode} handed out in {@code txn}, which still holds the AGI (nobody else can
     * allocate here meanwhile); read it before the transaction's next allocation here.
     */
    long allocatedInode(Txn txn) {
        if (!txn.holds(agi)) {
            throw new IllegalStateException("the AGI of group " + agno + " is not held");
        }
        return allocated;
    }

    /**
     * With the AGI held (its free list in range): adds a chunk of free inodes.
     *
     * @return DONE; or NO_SPACE, NEEDS_REFILL or BUSY with nothing changed and the headers released
     */
    private AllocOutcome makeChunk(Txn txn, int[] frames) {
        lock(txn, agf);
        long[] at = null;
        AllocOutcome outcome = !agfl.holds(RESERVE) ? AllocOutcome.NEEDS_REFILL : space.roomFor(CHUNK_BLOCKS);
        if ((outcome == AllocOutcome.DONE || outcome == AllocOutcome.BUSY) && !space.hasExtent(txn, CHUNK_BLOCKS)) {
            outcome = AllocOutcome.NO_SPACE;
        } else if (outcome == AllocOutcome.DONE && (at = space.findUsable(txn, CHUNK_BLOCKS, CHUNK_BLOCKS)) == null) {
            outcome = AllocOutcome.BUSY;
        }
        if (outcome == AllocOutcome.NO_SPACE) {
            space.noChunkRoom();
        }
        // the group has room, but the blocks not promised to dirty pages or allocations in flight may not;
        // the claim covers the trees' growth too: a free-space change and a record in both inode trees
        if (outcome != AllocOutcome.DONE || !counters.claim(CHUNK_CLAIM)) {
            txn.release(agf);
            txn.release(agi);
            return outcome != AllocOutcome.DONE ? outcome : AllocOutcome.NO_SPACE;
        }
        agil.charged = true;
        try {
            addChunk(txn, frames, at);
        } finally {
            agil.charged = false;
            counters.release(CHUNK_CLAIM);
        }
        return AllocOutcome.DONE;
    }

    /**
     * Makes sure the group has a free inode, adding a chunk in a transaction of its own if it has none:
     * what a create that allocates more than its inode (a long symlink's block) runs first, so that
     * nothing can fail in its own transaction after its first change.
     *
     * @param frames {@value Geometry#CHUNK_BLOCKS} reserved cache frames, as for {@link #allocInode}
     * @return DONE if the group has a free inode now; else NO_SPACE, NEEDS_REFILL or BUSY, with nothing
     *         changed
     */
    AllocOutcome ensureFreeInode(int[] frames) {
        try (Txn txn = Txn.begin(cache, allocInodeItems(true))) {
            lock(txn, agi);
            if (u64(agi.data(), FREE_INODES) > 0) {
                return AllocOutcome.DONE;
            }
            if (!agil.holds(OP_BLOCKS)) {
                return AllocOutcome.NEEDS_REFILL;
            }
            AllocOutcome made = makeChunk(txn, frames);
            if (made == AllocOutcome.DONE) {
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
        AgTreeFormat.key32(key, 0);
        if (fino.find(txn, key, BTree.Match.CEILING, foundKey, value) < 0) {
            return false;
        }
        int first = AgTreeFormat.key32(foundKey);
        long mask = AgTreeFormat.mask(value);
        if (first < 0 || first % Geometry.INODES_PER_BLOCK != 0 || (first >>> 3) < FIRST_FREE || (first >>> 3) > length - CHUNK_BLOCKS) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s free-inode tree holds a chunk at inode "
                    + Integer.toUnsignedString(first) + ", which is no chunk of the group");
        }
        verifyChunk(txn, first, mask);
        firstFreeMask = mask;
        firstFreeChunk = first;
        return true;
    }

    /** The inode tree must hold the free-inode tree's record for the chunk at {@code first}, with the same mask. */
    private void verifyChunk(Txn txn, int first, long mask) {
        AgTreeFormat.key32(key, first);
        if (ino.find(txn, key, BTree.Match.EXACT, foundKey, value) < 0 || AgTreeFormat.mask(value) != mask) {
            throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s inode trees disagree about the chunk at "
                    + first + ": free mask " + Long.toHexString(mask) + " in the free-inode tree");
        }
    }

    /**
     * With AGI and AGF held and the free lists in range: a new chunk of free inodes at {@code at}
     * ({@link FreeSpace#findUsable}). Its blocks are logged as one initialisation record, not block by
     * block (XFS's icreate); each record logs itself when its inode is handed out.
     */
    private void addChunk(Txn txn, int[] frames, long[] at) {
        int s = extentStart(at[1]);
        space.takeCharged(txn, at[0], at[1]);
        cache.createInitialised(txn, start + s, CHUNK_BLOCKS, InodeFormat.MAGIC, agno, frames);
        AgTreeFormat.key32(key, s << 3);
        AgTreeFormat.maskValue(value, -1L);
        if (!ino.putIfAbsent(txn, key, value) || !fino.putIfAbsent(txn, key, value)) {
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
     * @return DONE, or NEEDS_REFILL (nothing changed, headers released)
     * @throws InvalidArgumentException if the inode is not allocated (nothing changed)
     */
    AllocOutcome freeInode(Txn txn, int agIno) {
        lock(txn, agi);
        if (!agil.holds(OP_BLOCKS)) {
            txn.release(agi);
            return AllocOutcome.NEEDS_REFILL;
        }
        MemorySegment k = foundKey, v = value;
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
        return AllocOutcome.DONE;
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
                if (attempt == REFILL_ATTEMPTS) {
                    return; // the chunk stays: allocated and free, as it would after a crash
                }
                space.refillFreeList();
            }
        }
    }

    /** Items a {@link #freeChunk} transaction may change. */
    private int freeChunkItems() {
        return 2 + ino.reservation() + fino.reservation() + CHUNK_BLOCKS + space.freeSpaceItems();
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
            AgTreeFormat.key32(key, first);
            if (ino.find(txn, key, BTree.Match.EXACT, foundKey, value) < 0 || AgTreeFormat.mask(value) != -1L
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
            if (!ino.delete(txn, key) || !fino.delete(txn, key)) {
                throw new CorruptionException(agi.block(), AGI, "group " + agno + "'s inode trees disagree about the empty chunk at " + first);
            }
            for (Buffer b : blocks) {
                cache.free(txn, b, InodeFormat.FREED_MAGIC);
            }
            space.freeExtent(txn, first >>> 3, CHUNK_BLOCKS);
            counters.repay(CHUNK_BLOCKS);
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

    /**
     * With the AGI held by {@code txn}: true if the group has a free inode for {@link #allocInode} to hand
     * out ({@link #nextFreeInode}), false if it must add a chunk first.
     */
    boolean hasFreeInode(Txn txn) {
        if (!txn.holds(agi)) {
            throw new IllegalStateException("the AGI of group " + agno + " is not held");
        }
        return u64(agi.data(), FREE_INODES) != 0 && loadFirstFree(txn);
    }

    /**
     * With the AGI held by {@code txn} and {@link #hasFreeInode}: the group inode {@link #allocInode} will
     * hand out next. Lets a transaction lock the new inode's block in its block order before allocating.
     */
    int nextFreeInode(Txn txn) {
        if (!hasFreeInode(txn)) {
            throw new IllegalStateException("group " + agno + " has no free inode listed");
        }
        return firstFreeChunk + Long.numberOfTrailingZeros(firstFreeMask);
    }

    /** Allocated inodes of this group (a snapshot through the inode tree; for checkers). */
    List<Long> allocatedInodes() {
        List<Long> out = new ArrayList<>();
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
}
