package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.LongUnaryOperator;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeFormat.FLAG_PREALLOC;
import static dev.ferrite.dir.InodeFormat.FLAG_SHARED;
import static dev.ferrite.dir.InodeFormat.FLAG_SPECULATIVE;
import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;
import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * Changes to a regular file's mapping, the xfs_bmap role: the extents (inline in the inode record or in
 * the inode's tree, through {@link ExtentMap}) read with the size ({@link #file}), holes mapped to new
 * unwritten blocks ({@link #allocate}), unwritten blocks converted and the size moved ({@link #update}),
 * blocks freed (truncate, punch hole, an orphan's destruction: {@link #release}), and speculative
 * preallocation past the end. Each change is a transaction; {@link FileData} does the I/O around them.
 *
 * <h2>Ordering</h2>
 * Filling a hole takes two transactions, as XFS's unwritten extents do: the first allocates the blocks
 * and maps them <em>unwritten</em> (read as zeros); then the caller writes the data; the second marks
 * them written and moves the size, ordered after the data ({@link Txn#orderAfterData}: its checkpoint is
 * written after a device flush, which every conversion in that checkpoint shares, as XFS's log writes
 * carry REQ_PREFLUSH), so no crash leaves it durable without the data, and concurrent writers pay for
 * one flush per checkpoint, not one each. A crash in between leaves an unwritten extent: accounted,
 * reading zeros, freed by truncate or unlink. Blocks freed from a file stay {@linkplain BusyExtents
 * busy} until the free is durable, and no allocation hands them out meanwhile: a crash can then not give
 * them back to their old file with another file's data in them, and no write waits on a force for that.
 *
 * <h2>Speculative preallocation</h2>
 * A write extending the file from inside it or at its end maps unwritten blocks past the new end as well
 * ({@link #allocateExtending}), flagging the inode {@link InodeFormat#FLAG_SPECULATIVE}; later appends
 * only convert them. The last close, or the first open after a crash, frees what is left past the end
 * ({@link #trimSpeculative}); fallocate's KEEP_SIZE flags the inode {@link InodeFormat#FLAG_PREALLOC}
 * instead, and such a file is neither preallocated for nor trimmed.
 *
 * <h2>Locks</h2>
 * The striped I/O locks ({@link #io}) are here, taken by {@link FileData} around I/O and by the frees
 * and trims here. Each extent change is a transaction reserved before the inode's lock (2), then a
 * group's AGF (3), then the record's block (4), then the nodes of the inode's extent tree (whose
 * allocator is the record's block, held already).
 */
final class FileMapping {
    /**
     * The I/O locks' stripes, as a power of two: 1,024. A file's exclusive hold (a write-back, freeing an
     * unlinked file, a trim) keeps out every file of its stripe: with 64, under {@code bench dbench} at 8
     * clients, reads and writes of other clients' files waited behind write-backs (up to 300 ms on a
     * loaded machine), which a kernel file system's per-inode lock does not make them do.
     */
    private static final int IO_STRIPE_BITS = 10;
    private static final int IO_STRIPES = 1 << IO_STRIPE_BITS;
    /** The least speculative preallocation, in bytes: a file written by 4 KiB appends starts with room for 64. */
    private static final long PREALLOC_MIN_BYTES = 256 << 10;

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeRecords records;
    private final InodeCache inodes;
    private final ExtentMap map;
    private final int blockSize;
    private final IoLock[] ioLocks = new IoLock[IO_STRIPES];
    /**
     * Files this mount gave speculative blocks past their end, until trimmed: what a write that finds no
     * free block reclaims before it gives up (XFS's eofblocks scan on ENOSPC).
     */
    private final Set<Long> speculative = ConcurrentHashMap.newKeySet();
    /** Speculative preallocation's bounds, in blocks. */
    private final long preallocMin, preallocCap;

    FileMapping(Volume volume, BufferCache cache, Geometry geometry, InodeRecords records, InodeCache inodes, ExtentMap map) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.records = records;
        this.inodes = inodes;
        this.map = map;
        this.blockSize = geometry.blockSize();
        for (int i = 0; i < IO_STRIPES; i++) {
            ioLocks[i] = new IoLock();
        }
        // the most: an eighth of a group (XFS goes up to its longest extent), so that a file written by
        // appends beside another ends in a handful of extents, yet a few growing files cannot fill a group
        this.preallocCap = Math.min(ExtentFormat.MAX_LENGTH, geometry.agBlocks() / 8);
        this.preallocMin = Math.min(PREALLOC_MIN_BYTES / blockSize, preallocCap);
    }

    /** The I/O lock of inode {@code ino}: one of a fixed set of stripes, shared with other files'. */
    IoLock io(long ino) {
        return ioLocks[stripe(ino)];
    }

    /** The stripe of {@code ino}'s I/O lock: a call holding two takes the lower first (a clone). */
    static int stripe(long ino) {
        return (int) (ino * 0x9E37_79B9_7F4A_7C15L >>> (64 - IO_STRIPE_BITS));
    }

    /** A file's size, flags and extents (all of an inline list, a window of a tree), read together. */
    record Snapshot(long size, int flags, ExtentList extents) {
    }

    /**
     * Inode {@code i}'s size and extents, of a tree those for {@code [from, to)} ({@link ExtentMap#window});
     * EISDIR for a directory, EINVAL for anything else not a regular file.
     */
    Snapshot file(Inode i, long from, long to) {
        long ino = i.ino;
        Object o = records.readRecord(ino, (b, rec) -> {
            int mode = InodeFormat.mode(b, rec);
            if ((mode & S_IFMT) != S_IFREG) {
                return mode;
            }
            return new Snapshot(InodeFormat.size(b, rec), InodeFormat.flags(b, rec), ExtentMap.decode(b, rec, geometry));
        });
        if (o instanceof Snapshot s) {
            return s.extents().inTree() ? new Snapshot(s.size(), s.flags(), map.window(i, s.extents(), from, to)) : s;
        }
        int mode = (Integer) o;
        if (mode == 0) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " is not allocated");
        }
        throw new NamespaceException((mode & S_IFMT) == S_IFDIR ? Errno.EISDIR : Errno.EINVAL,
                "inode " + ino + " (mode 0" + Integer.toOctalString(mode) + ") is not a regular file");
    }

    /**
     * A thread's mapping for a read ({@link #forRead}): the file's committed size, flags and extents, until
     * the thread's next read. A read only looks at them and does device I/O meanwhile, so one list per
     * thread serves every read, and a read decodes an inline list allocating nothing.
     */
    static final class ReadMapping implements InodeRecords.LongRecordReader {
        private final ExtentList scratch = new ExtentList(Integer.MAX_VALUE);
        private Geometry geometry;
        long size;
        int flags;
        ExtentList extents;

        /** The size, the extents decoded into {@link #scratch}; -1 for a tree or anything not a regular file ({@link #file} then). */
        @Override
        public long read(MemorySegment b, int rec) {
            if ((InodeFormat.mode(b, rec) & S_IFMT) != S_IFREG || InodeFormat.fork(b, rec) == InodeFormat.FORK_TREE) {
                return -1;
            }
            ExtentFormat.decodeInto(b, rec, geometry, scratch);
            flags = InodeFormat.flags(b, rec);
            return InodeFormat.size(b, rec);
        }
    }

    private static final ThreadLocal<ReadMapping> READS = ThreadLocal.withInitial(ReadMapping::new);

    /**
     * {@link #file} for a read of {@code [from, to)}, into the calling thread's {@link ReadMapping}: an
     * inline list decoded there, a tree's window loaded as {@link #file} loads it; the same errors.
     */
    ReadMapping forRead(Inode i, long from, long to) {
        ReadMapping r = READS.get();
        r.geometry = geometry;
        long size = records.readLong(i.ino, r);
        if (size >= 0) {
            r.size = size;
            r.extents = r.scratch;
        } else {
            Snapshot s = file(i, from, to);
            r.size = s.size();
            r.flags = s.flags();
            r.extents = s.extents();
        }
        return r;
    }

    /** The end of the last extent of {@code i}, whose extents for some range are {@code x}; 0 if it maps nothing. */
    long lastEnd(Inode i, ExtentList x) {
        ExtentList t = map.tail(i, x);
        return t.count() == 0 ? 0 : t.end(t.count() - 1);
    }

    /**
     * True if the extents of {@code x} and the ones filling the holes of {@code [first, end)} fit where
     * they are (an inline list in the record; a tree always) while they are unwritten and once
     * {@code [first, writtenEnd)} is written; if not, {@link ExtentMap#makeRoom} comes first.
     */
    static boolean fits(ExtentList x, long first, long end, long writtenEnd) {
        if (x.inTree()) {
            return true;
        }
        ExtentList sim = x.copy();
        fillHoles(sim, first, end);
        boolean unwritten = sim.fits();
        sim.setWritten(first, writtenEnd);
        return unwritten && sim.fits();
    }

    /**
     * Maps the holes of {@code [first, end)} for a write that extends the file from inside it or at its
     * end (a write further on leaves a hole: a sparse writer would only split the tail), and speculatively
     * the blocks after them (XFS's EOF preallocation): as many as the file will then hold, at least
     * {@link #preallocMin} and at most {@link #preallocCap} or a sixteenth of the free space, not into
     * anything already mapped past {@code end}; none for a file fallocate preallocated past its end. The
     * write's own blocks are taken first, so when the volume has no room for the
     * speculative ones the write goes on with what it got.
     */
    ExtentList allocateExtending(Inode i, int flags, ExtentList x, long first, long end, TreePromise tree) {
        int k = x.find(end);
        if ((flags & FLAG_PREALLOC) == 0 && k < 0) {
            long next = -k - 1 < x.count() ? x.fileBlock(-k - 1) : ExtentFormat.MAX_FILE_BLOCKS;
            // as XFS, less as the volume fills: others need space too; promised only if no promise holds them
            Counters c = volume.counters();
            long promised = c.promised();
            long room = Math.min(Math.max(0, volume.statfs().freeBlocks() - promised) / 16, Math.max(0, volume.spareBlocks() - promised));
            long spec = Math.min(next, end + Math.min(room, Math.clamp(end, preallocMin, preallocCap)));
            if (spec > end && c.claim(spec - end)) {
                try {
                    return allocate(i, first, spec, end, FLAG_SPECULATIVE, false, tree);
                } catch (NoSpaceException e) {
                    // no free block is left for the speculative ones: the write's own holes, filled first, are all mapped
                } finally {
                    c.release(spec - end);
                }
            }
        }
        return allocate(i, first, end, end, FLAG_SPECULATIVE, true, tree);
    }

    /** Maps the holes of {@code [first, end)} in {@code sim} to device blocks no extent has, so they merge with nothing. */
    static void fillHoles(ExtentList sim, long first, long end) {
        long fake = 1L << 42;
        for (long[] g = sim.firstGap(first, end, false); g != null; g = sim.firstGap(g[0] + g[1], end, false)) {
            for (long at = g[0]; at < g[0] + g[1]; ) {
                int len = (int) Math.min(g[0] + g[1] - at, ExtentFormat.MAX_LENGTH);
                sim.insert(at, fake, len, true);
                fake += 2L * ExtentFormat.MAX_LENGTH;
                at += len;
            }
        }
    }

    /**
     * Maps every hole of {@code [first, end)} to newly allocated, unwritten blocks, a hole (of at most
     * {@link ExtentFormat#MAX_LENGTH} blocks) per transaction, each contiguous, near the block after the
     * file's previous extent or in the inode's group first; a hole no group holds contiguous is taken in
     * halves, quarters..., each an extent. Returns the mapping of {@code [first, end)} after. The caller
     * goes on to write {@code [first, writtenEnd)}; an inline list that would not hold the extents then
     * becomes a tree first. A transaction that maps blocks past the end of the file sets
     * {@code pastEofFlag} in its record. With {@code mayReclaim}, when no group has a free block left the
     * speculative blocks of other files are freed ({@link #reclaimSpeculative}) and the allocation goes on
     * if that gave any back; the speculative allocations themselves never take others' that way. Before a
     * tree is made or changed, its blocks are promised ({@link #requireTree}) unless {@code tree} holds them.
     *
     * @throws NoSpaceException if no group has a free block left, or none not promised for the tree (the holes
     *         filled so far stay mapped unwritten)
     */
    ExtentList allocate(Inode i, long first, long end, long writtenEnd, int pastEofFlag, boolean mayReclaim, TreePromise tree) {
        long ino = i.ino;
        int rec = records.rec(ino);
        int most = ExtentFormat.MAX_LENGTH; // halved each time no group has that many blocks contiguous
        for (;;) {
            ExtentList x = file(i, first, end).extents();
            long[] gap = x.firstGap(first, end, false);
            if (gap == null) {
                return x;
            }
            if (x.inTree()) { // its reserve refilled first (an inline list needs nothing): changes since are looked at under the lock
                requireTree(i, tree);
                map.prepare(i);
            }
            if (!fits(x, first, end, writtenEnd)) {
                requireTree(i, tree);
                map.makeRoom(i);
                continue;
            }
            int len = (int) Math.min(gap[1], most);
            int k = -x.find(gap[0]) - 2; // the extent before the hole
            long near = k >= 0 ? x.deviceBlock(k) + (gap[0] - x.fileBlock(k)) : 0;
            // a file growing past its last extent by a preallocation's worth: if the blocks after that
            // extent are taken, a region of its own (small and sparse allocations keep to the best fit)
            boolean apart = k >= 0 && x.end(k) == gap[0] && len >= preallocMin;
            int home = geometry.agOfInode(ino);
            int start = near != 0 ? geometry.agOfBlock(near) : home;
            boolean done = false;
            // a first pass takes a group's blocks only if some are not busy, going on to the next group where
            // all are; only if no group has such blocks does a second wait out the busy ones (forcing the log):
            // a table blob's allocation, finding its group's space all freed by the blob reaper since the last
            // checkpoint, forced the log for 0.4 of 1 MiB puts while other groups had free blocks not busy
            for (int n = 0; n < 2 * geometry.agCount() && !done; n++) {
                boolean waits = n >= geometry.agCount(); // the second pass
                AllocationGroup ag = volume.group((start + n) % geometry.agCount());
                int[] busy = {0};
                for (int attempt = 0, used; attempt < RETRIES; attempt += used) {
                    if (ag.needsRefill()) {
                        ag.refillFreeList();
                    }
                    AllocOutcome r;
                    try (Txn txn = Txn.begin(cache, ag.blockItems() + 2 + map.items(i, x))) {
                        i.lock();
                        try {
                            ExtentList y = file(i, first, end).extents();
                            long[] again = y.firstGap(first, end, false);
                            if (again == null || again[0] != gap[0] || again[1] < len || !sameMap(x, y)
                                    || !fits(y, first, end, writtenEnd) || !map.ready(i, y)) {
                                done = true; // changed meanwhile: look again
                                break;
                            }
                            r = ag.allocBlocksNear(txn, near, len, apart);
                            if (r == AllocOutcome.DONE) {
                                y.insert(gap[0], ag.allocatedBlock(txn), len, true);
                                Buffer b = records.lockRecord(txn, ino);
                                MemorySegment m = b.data();
                                int span = map.store(txn, i, b, y);
                                InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) + len);
                                if (gap[0] + len > (InodeFormat.size(m, rec) + blockSize - 1) / blockSize) {
                                    InodeFormat.setFlags(m, rec, InodeFormat.flags(m, rec) | pastEofFlag);
                                    if (pastEofFlag == FLAG_SPECULATIVE) {
                                        speculative.add(ino);
                                    }
                                }
                                txn.log(b, rec, span);
                                commitData(i, txn);
                                done = true;
                                break;
                            }
                        } finally {
                            i.unlock();
                        }
                    }
                    if (!waits && r == AllocOutcome.BUSY || (used = ag.recover(r, busy)) < 0) {
                        break;
                    }
                }
            }
            if (!done) {
                if (len == 1) {
                    if (mayReclaim && reclaimSpeculative(ino)) {
                        mayReclaim = false; // once: what others preallocate from here on is theirs to use
                        most = ExtentFormat.MAX_LENGTH;
                        continue;
                    }
                    throw new NoSpaceException("no allocation group has a free block for inode " + ino);
                }
                most = len / 2;
            }
        }
    }

    /**
     * Whether a change of a file's mapping outside a write-back (a direct write's, fallocate's) holds an
     * extent tree's blocks promised ({@link Counters#claim}: its root and reserve,
     * {@link PageCache#FILE_META_BLOCKS}), and what it promised on need. A write-back's pages promised their
     * file's tree, and a direct write or fallocate promises it up front when its check finds the extents in a
     * tree or not fitting inline: both share {@link #HELD}, which never claims. Otherwise the step that finds them so promises it first
     * ({@link #requireTree}): another direct writer's change came between the check and the step (they share
     * the I/O lock), or the allocation took a hole in more pieces than the check counted. What it promised
     * is held until the change is done, its conversion after the data too, then given back
     * ({@link #releaseTree}). Used by one thread at a time.
     */
    static final class TreePromise {
        /** A change whose tree was promised before it began (by a write-back's pages, or by its own claim). */
        static final TreePromise HELD = new TreePromise(true);

        private boolean held;
        private long claimed;

        private TreePromise(boolean held) {
            this.held = held;
        }

        /** {@link #HELD} if {@code held}, else a promise of its own that {@link #requireTree} may make. */
        static TreePromise of(boolean held) {
            return held ? HELD : new TreePromise(false);
        }

        boolean held() {
            return held;
        }
    }

    /**
     * Promises a tree's blocks for the change {@code p} stands for unless it holds them: when the blocks not
     * promised fall short, other files' speculative ones are freed once; then NoSpaceException, with nothing
     * promised. The caller holds the I/O lock and no other.
     */
    void requireTree(Inode i, TreePromise p) {
        if (p.held) {
            return;
        }
        Counters c = volume.counters();
        long n = PageCache.FILE_META_BLOCKS;
        if (!c.claim(n) && !(reclaimSpeculative(i.ino) && c.claim(n))) {
            throw new NoSpaceException("inode " + i.ino + " needs " + n + " blocks for the extent tree its extents no longer fit"
                    + " without; " + Math.max(0, volume.spareBlocks() - c.promised())
                    + " are free that are not promised to buffered writes or other allocations");
        }
        p.claimed = n;
        p.held = true;
    }

    /** Gives back what {@link #requireTree} promised for {@code p}; it holds nothing after (unless it held the tree up front). */
    void releaseTree(TreePromise p) {
        if (p.claimed != 0) {
            volume.counters().release(p.claimed);
            p.claimed = 0;
            p.held = false;
        }
    }

    /** True if {@code x} and {@code y} come from the same place (the record, or the same tree): a transaction reserved for one suits the other. */
    static boolean sameMap(ExtentList x, ExtentList y) {
        return x.inTree() == y.inTree() && x.header == y.header;
    }

    /**
     * The second transaction of a write: {@code [first, end)} written, the size at least {@code newSize};
     * ordered after the data just written (a flush before its checkpoint, shared with every other in it).
     * A {@code writeBack} of cached pages logs the time their buffered write recorded, not its own.
     */
    void finish(Inode i, long first, long end, long newSize, boolean writeBack) {
        update(i, first, end, (y, from, to) -> y.setWritten(from, to), size -> Math.max(size, newSize), true, writeBack);
    }

    /** A change of the extents in a range, for {@link #update}. */
    interface RangeChange {
        void apply(ExtentList y, long from, long to);
    }

    /**
     * Transactions changing {@code i}'s record (and tree) alone: {@code change} edits its extents over
     * {@code [from, to)} (null: leaves them, and only the inode core is logged); in the last, the size
     * becomes {@code size} of the old one; the change and modification times move. An inline list
     * changes in one transaction (made a tree first if the result would not fit); a tree a piece at a
     * time, an extent (and the hole before it) per transaction, so that each puts or deletes at most
     * {@link ExtentMap#TREE_OPS} keys: a crash between them leaves part of the range changed, which is
     * what the caller's own ordering already allows (the data is durable, the size moves last). With
     * {@code afterData} each transaction is {@link Txn#orderAfterData ordered after} the data writes that
     * completed before it.
     */
    void update(Inode i, long from, long to, RangeChange change, LongUnaryOperator size, boolean afterData) {
        update(i, from, to, change, size, afterData, false);
    }

    /**
     * {@link #update(Inode, long, long, RangeChange, LongUnaryOperator, boolean)}; for a {@code writeBack} of cached
     * pages the times become the one their buffered write recorded ({@link Inode#modified}), or stay as they are if
     * none waits (a setattr since then set them: its time wins, as on Linux, where write-back moves no time).
     */
    void update(Inode i, long from, long to, RangeChange change, LongUnaryOperator size, boolean afterData, boolean writeBack) {
        int rec = records.rec(i.ino);
        for (long at = from; ; ) {
            ExtentList plan = null;
            if (change != null) {
                map.prepare(i);
                plan = file(i, 0, 0).extents(); // where the extents are is all the reservation needs
            }
            boolean grow = false;
            try (Txn txn = Txn.begin(cache, 2 + (plan == null ? 0 : map.items(i, plan)))) {
                i.lock();
                try {
                    long stop = to;
                    ExtentList y = null;
                    if (change != null) {
                        y = file(i, at, to).extents();
                        if (!sameMap(plan, y) || !map.ready(i, y)) {
                            continue; // changed meanwhile: look again
                        }
                        if (y.inTree()) {
                            stop = stepEnd(y, at, to);
                        }
                        change.apply(y, at, stop);
                        if (!y.fits()) {
                            grow = true;
                            continue;
                        }
                    }
                    Buffer b = records.lockRecord(txn, i.ino);
                    MemorySegment m = b.data();
                    int span = y == null ? InodeFormat.INLINE : Math.max(InodeFormat.INLINE, map.store(txn, i, b, y));
                    if (stop >= to) {
                        InodeFormat.setSize(m, rec, size.applyAsLong(InodeFormat.size(m, rec)));
                    }
                    long now = writeBack ? i.modified() : nowNanos();
                    if (now != 0) {
                        InodeFormat.touch(m, rec, now, true);
                    }
                    txn.log(b, rec, span);
                    if (afterData) {
                        txn.orderAfterData();
                    }
                    commitData(i, txn);
                    if (now != 0) {
                        records.clearModified(i, now);
                    }
                    if (stop >= to) {
                        return;
                    }
                    at = stop;
                } finally {
                    i.unlock();
                }
            } finally {
                if (grow) {
                    map.makeRoom(i); // the transaction closed, changing nothing, and the lock let go
                }
            }
        }
    }

    /**
     * Where a step of {@link #update} over {@code [from, to)} of the tree window {@code y} ends: past the
     * extent holding {@code from}, or past the hole at {@code from} and the extent after it.
     */
    static long stepEnd(ExtentList y, long from, long to) {
        int k = y.find(from);
        if (k < 0) {
            k = -k - 1;
            if (k == y.count() || y.fileBlock(k) >= to) {
                return to;
            }
        }
        return Math.min(to, y.end(k));
    }

    /** Commits {@code txn}, a change to {@code i}'s size or extents (what {@link FileData#sync} with dataOnly waits for). */
    static long commitData(Inode i, Txn txn) {
        long seq = txn.commit();
        i.lastSeq = seq;
        i.lastDataSeq = seq;
        return seq;
    }

    static long[] lastPieceFrom(ExtentList x, long from) {
        long[][] piece = x.trimFrom(from, 1);
        return piece.length == 0 ? null : piece[0];
    }

    /**
     * Frees what writes mapped past the end of {@code i}'s file (speculative preallocation, or the first
     * transaction of a write whose second never came), then clears {@link InodeFormat#FLAG_SPECULATIVE};
     * at its last close, and at its first open after a crash or an unmount with it open. The times stay.
     * A file fallocate preallocated past its end keeps everything (the flag stays too).
     */
    void trimSpeculative(Inode i) {
        long ino = i.ino;
        int rec = records.rec(ino);
        IoLock l = io(ino);
        l.lock();
        try {
            long eof = records.readLong(ino, speculativeEof);
            if (eof < 0) {
                speculative.remove(ino);
                return;
            }
            release(i, eof, TAIL, x -> lastPieceFrom(x, eof), false);
            try (Txn txn = Txn.begin(cache, 2)) {
                i.lock();
                try {
                    Buffer b = records.lockRecord(txn, ino);
                    MemorySegment m = b.data();
                    InodeFormat.setFlags(m, rec, InodeFormat.flags(m, rec) & ~FLAG_SPECULATIVE);
                    txn.log(b, rec, InodeFormat.INLINE);
                    i.lastSeq = txn.commit();
                    speculative.remove(ino);
                } finally {
                    i.unlock();
                }
            }
        } finally {
            l.unlock();
        }
    }

    /**
     * Inside a transaction holding {@code i}'s record {@code m} (at {@code rec}), its lock held, with its
     * inline extents {@code x} and its size as they will commit: clears {@link InodeFormat#FLAG_SPECULATIVE}
     * if the size covers every block the file maps. A write that allocated exactly its blocks (a table
     * blob's, {@link FileData#writeBlocks}) then leaves nothing past the end for the flag to have trimmed
     * after a crash, and the flag goes with its size rather than in a transaction of its own at the last
     * close ({@link #trimSpeculative}): one transaction fewer a blob.
     */
    void clearSpeculativeIfCovered(Inode i, MemorySegment m, int rec, ExtentList x) {
        int flags = InodeFormat.flags(m, rec);
        long eof = (InodeFormat.size(m, rec) + blockSize - 1) / blockSize;
        if ((flags & (FLAG_SPECULATIVE | FLAG_PREALLOC)) == FLAG_SPECULATIVE && (x.count() == 0 || x.end(x.count() - 1) <= eof)) {
            InodeFormat.setFlags(m, rec, flags & ~FLAG_SPECULATIVE);
            speculative.remove(i.ino);
        }
    }

    /** {@link #trimSpeculative}'s record read, made once: the block past the end of a file with speculative blocks, else -1. */
    private final InodeRecords.LongRecordReader speculativeEof = this::speculativeEof;

    private long speculativeEof(MemorySegment b, int r) {
        return (InodeFormat.mode(b, r) & S_IFMT) != S_IFREG || (InodeFormat.flags(b, r) & (FLAG_SPECULATIVE | FLAG_PREALLOC)) != FLAG_SPECULATIVE
                ? -1 : (InodeFormat.size(b, r) + blockSize - 1) / blockSize;
    }

    /** What {@link #release} loads of a tree for a change at its end: its last extent. */
    static final long TAIL = -1;

    /**
     * Trims the speculative blocks of every file but {@code self} that this mount preallocated for and
     * whose I/O lock is free at this moment (a file being written keeps its own; so does one sharing a
     * lock stripe with a write in progress here); returns whether any block came back. Open files lose
     * nothing but room to grow: their next append preallocates again.
     */
    boolean reclaimSpeculative(long self) {
        long before = volume.statfs().freeBlocks();
        for (Long ino : speculative) {
            if (ino == self) {
                continue;
            }
            IoLock l = io(ino);
            if (!l.tryLock()) {
                continue;
            }
            try {
                Inode o = inodes.acquire(ino);
                try {
                    trimSpeculative(o);
                } finally {
                    inodes.release(o);
                }
            } finally {
                l.unlock();
            }
        }
        return volume.statfs().freeBlocks() > before;
    }

    /**
     * Frees the blocks {@code unmap} takes from {@code i}'s extents (it unmaps one piece of one extent and
     * returns it as {@code {device block, length}}, or null when done), a piece per transaction, until
     * it returns null. {@code unmap} looks at the extents of {@code [from, to)} only, or with {@code to}
     * {@link #TAIL} at the last one (of a tree, only those are loaded). Each transaction frees the piece,
     * counts it off the inode's blocks and, with {@code touch}, touches its times. A tree left mapping
     * few extents then becomes an inline list ({@link ExtentMap#revert}).
     */
    void release(Inode i, long from, long to, Function<ExtentList, long[]> unmap, boolean touch) {
        long ino = i.ino;
        int rec = records.rec(ino);
        IoLock l = io(ino);
        l.lock();
        try {
            // set only under the I/O lock held exclusively, as here, and never cleared: one read serves the loop
            boolean shared = (records.readLong(ino, FileMapping::flags) & FLAG_SHARED) != 0;
            // trims from the end (a shared file's a run of one count at a time, the last first): no key added,
            // none but the last changed, in place
            boolean removal = to == TAIL;
            for (int fails = 0; ; ) {
                map.prepare(i, removal);
                ExtentList plan = unmapped(i, from, to);
                ExtentList sim = plan.copy();
                long[] next = shared ? byRun(sim, unmap, null, removal) : unmap.apply(sim);
                if (next == null) {
                    break;
                }
                if (!sim.fits()) { // a punch splitting an extent of a full inline list
                    map.makeRoom(i);
                    continue;
                }
                AllocationGroup ag = volume.group(geometry.agOfBlock(next[0]));
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                int items = ag.blockItems() + 2 + map.items(i, plan) + (shared ? ag.refcounts.items(1) : 0);
                try (Txn txn = Txn.begin(cache, items)) {
                    i.lock();
                    try {
                        ExtentList y = unmapped(i, from, to);
                        if (!sameMap(plan, y) || !map.ready(i, y, removal)) {
                            continue;
                        }
                        // a shared file's counts are read under the AGF, which a free takes anyway
                        boolean locked = !shared || ag.refcounts.lockForChange(txn);
                        long[] piece = !locked ? null : shared ? byRun(y, unmap, txn, removal) : unmap.apply(y);
                        if (locked && (piece == null || geometry.agOfBlock(piece[0]) != ag.agno || !y.fits())) {
                            continue;
                        }
                        int count = piece == null ? 1 : shared ? (int) piece[2] : 1;
                        if (count == RefcountFormat.STAGING) {
                            throw new CorruptionException(piece[0], Refcounts.TREE, "file " + ino + " maps device block " + piece[0]
                                    + ", which group " + ag.agno + " counts as a copy-on-write's staging block");
                        }
                        // a block another extent still maps loses a reference; one no other maps is freed
                        if (locked && (count > 1 || ag.releaseData(txn, piece[0], (int) piece[1]) == AllocOutcome.DONE)) {
                            BusyExtents.Entry busy = count > 1 ? null : ag.freedData(txn);
                            Refcounts.Lowered lowered = count != 2 ? null
                                    : ag.refcounts.lowering(piece[0], (int) piece[1], cache.journal().durableSeq());
                            if (count > 1) {
                                ag.refcounts.set(txn, piece[0], (int) piece[1], count, count - 1);
                            }
                            Buffer b = records.lockRecord(txn, ino);
                            MemorySegment m = b.data();
                            int span = map.store(txn, i, b, y);
                            InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) - piece[1]);
                            long now = nowNanos();
                            if (touch) {
                                InodeFormat.touch(m, rec, now, true);
                            }
                            txn.log(b, rec, Math.max(InodeFormat.INLINE, span));
                            long seq = 0;
                            try {
                                seq = commitData(i, txn);
                            } finally {
                                if (lowered != null) {
                                    ag.refcounts.lowered(lowered, seq);
                                }
                            }
                            if (busy != null) {
                                busy.settle(seq);
                            }
                            if (touch) {
                                records.clearModified(i, now);
                            }
                            fails = 0;
                            continue;
                        }
                    } finally {
                        i.unlock();
                    }
                }
                if (fails++ == RETRIES) {
                    throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its free-space trees");
                }
                ag.refillFreeList();
            }
            long treeBlocks = map.revert(i);
            if (treeBlocks >= 0) { // the old tree's blocks, mapped past every extent: freed as a trim frees
                release(i, treeBlocks, TAIL, x -> lastPieceFrom(x, treeBlocks), false);
            }
        } finally {
            l.unlock();
        }
    }

    /**
     * {@code unmap} for a file that may share blocks: of the piece it would unmap, only the first run of
     * blocks with one reference count ({@link Refcounts#run}, read in {@code txn}, which holds the group's
     * AGF, or as a snapshot for a plan), or with {@code last} the last run ({@link Refcounts#runBefore}:
     * a trim from the end then only shortens the last extent, where the first run split it, a key added
     * that its tree's reserve had to hold, unpromised), unmapped from {@code x}; returns
     * {@code {device block, length, count}}, or null when {@code unmap} finds nothing.
     */
    private long[] byRun(ExtentList x, Function<ExtentList, long[]> unmap, Txn txn, boolean last) {
        ExtentList probe = x.copy();
        long[] p = unmap.apply(probe);
        if (p == null) {
            return null;
        }
        Refcounts counts = volume.group(geometry.agOfBlock(p[0])).refcounts;
        long run = last ? counts.runBefore(txn, p[0] + p[1], (int) p[1]) : counts.run(txn, p[0], (int) p[1]);
        long fb = x.firstChange(probe) + (last ? p[1] - Refcounts.runLength(run) : 0);
        long[] q = x.punch(fb, fb + Refcounts.runLength(run));
        return new long[] {q[0], q[1], Refcounts.runCount(run)};
    }

    /** A record's flags, read with nothing allocated. */
    private static long flags(MemorySegment b, int rec) {
        return InodeFormat.flags(b, rec);
    }

    /** {@code i}'s extents for {@link #release}: of {@code [from, to)}, or the last one. */
    ExtentList unmapped(Inode i, long from, long to) {
        ExtentList x = file(i, 0, 0).extents();
        return to == TAIL ? map.tail(i, x) : map.window(i, x, from, to);
    }
}
