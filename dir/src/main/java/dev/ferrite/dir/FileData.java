package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.internal.SharedFlush;

import static dev.ferrite.dir.InodeFormat.FLAG_PREALLOC;
import static dev.ferrite.dir.InodeFormat.FLAG_SHARED;
import static dev.ferrite.dir.InodeFormat.FLAG_SPECULATIVE;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;

/**
 * Regular files' data, the direct-I/O role: reads, writes and appends straight between the caller's
 * aligned buffer and the device, truncate, fallocate, fsync and fdatasync, the FIEMAP view, and the
 * lazily logged modification time. Every change to a file's mapping (allocation, conversion, size,
 * freeing, speculative preallocation) is {@link FileMapping}'s. A call not aligned for the direct path
 * goes to {@link BufferedIo} (the data page cache), whose write-back comes back here as direct writes
 * ({@link #writeBackRun}).
 *
 * <h2>Ordering</h2>
 * Data reaches the device before any extent that points at it says written. Overwriting written blocks
 * is a plain device write (no transaction, no allocation), its block found through the file's
 * {@link OverwriteHint} while the inode record is the version the hint decoded. Filling a hole maps the blocks unwritten
 * first, writes the data, then converts them in a transaction ordered after it
 * ({@link FileMapping#finish}), a direct write's batched with the file's other writers' ({@link Conversions}). An fsync's data is made durable by the flush of the checkpoint its force
 * wrote when that flush began after the data was written, else by a flush of its own, shared by
 * concurrent callers ({@link SharedFlush}).
 *
 * <h2>Locks</h2>
 * A striped I/O lock per inode ({@link FileMapping#io}, an {@link IoLock}), taken before the log
 * reservation (XFS's i_rwsem): shared by reads and writes (buffered ones too) and a write-back of cached
 * pages, exclusive by truncate, fallocate, append (which so owns the end of the file while it writes
 * there), a trim and by freeing an orphan, so that no read or write uses a mapping whose blocks are being
 * freed or unwritten. A direct write over a file with cached pages also takes their
 * {@link FilePages#writeBack} lock, so that a write-back's older copy never lands over it. Concurrent
 * writes to disjoint ranges run their device I/O in parallel, a shared file's copies on write too (each
 * holding its range of blocks, and a read of such a file its own, in the file's {@link BlockRanges}, so
 * that no remap lets go of blocks a read is reading); a shared hold is one CAS each way and
 * nothing per thread, and not reentrant: no call here takes it again. An
 * operation on a handle checks again that the handle is open once it holds the I/O lock
 * ({@link #lockIo}), so that a last close racing it cannot free the inode under it.
 */
final class FileData {
    /** The largest file: 2^63 - 1 bytes rounded down to 4 KiB, the limit of {@link ExtentFormat#MAX_FILE_BLOCKS}. */
    static final long MAX_FILE_SIZE = ExtentFormat.MAX_FILE_BLOCKS * 4096;
    /** The longest single transfer: what a read's int result can count, in whole 4 KiB blocks (as Linux's 0x7ffff000). */
    static final int MAX_TRANSFER = Integer.MAX_VALUE & -4096;
    private static final VarHandle WRITTEN, VOLUME_SYNCS;

    static {
        try {
            WRITTEN = MethodHandles.lookup().findVarHandle(FileData.class, "written", boolean.class);
            VOLUME_SYNCS = MethodHandles.lookup().findVarHandle(FileData.class, "volumeSyncs", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** How {@link #flushAll} takes {@link #written}, counted in {@link #volumeSyncs}. */
    private static final DataMark WRITTEN_MARK = new DataMark(WRITTEN, VOLUME_SYNCS);

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeRecords records;
    private final InodeCache inodes;
    private final BlockDevice device;
    private final ExtentMap map;
    private final int blockSize;
    /** File data was written to the device since the last {@link #flushAll} took this mark ({@link #WRITTEN_MARK}). */
    @SuppressWarnings("unused") // through WRITTEN
    private volatile boolean written;
    /** {@link #flushAll} calls under way, from before they take {@link #written} to the end of their flush. */
    @SuppressWarnings("unused") // through VOLUME_SYNCS
    private volatile int volumeSyncs;
    /** Device flushes for file data, shared by concurrent fsyncs. */
    private final SharedFlush flushes;
    /** The buffered path: what a call not aligned for the direct one goes through. */
    final BufferedIo buffered;
    /** Every change to a file's mapping. */
    final FileMapping mapping;
    /** Direct writes' conversions, batched per file. */
    private final Conversions conversions;
    /** Writes into shared blocks: to new ones, remapped. */
    final CopyOnWrite cow;

    FileData(Volume volume, BufferCache cache, Geometry geometry, InodeRecords records, InodeCache inodes, PageCache pages,
             ExtentMap map) {
        this.volume = volume;
        this.inodes = inodes;
        this.map = map;
        this.cache = cache;
        this.geometry = geometry;
        this.records = records;
        this.device = cache.device();
        this.blockSize = geometry.blockSize();
        this.flushes = new SharedFlush(device::flush);
        this.mapping = new FileMapping(volume, cache, geometry, records, inodes, map);
        this.conversions = new Conversions(cache, records, map, mapping);
        this.cow = new CopyOnWrite(volume, cache, geometry, records, map, mapping);
        this.buffered = new BufferedIo(this, pages, blockSize, records.pendingSizes, inodes);
    }

    /** {@link FileMapping#io}. */
    IoLock io(long ino) {
        return mapping.io(ino);
    }

    /** Test seam: run by an operation on a handle between its EBADF check and taking the I/O lock; null outside tests. */
    volatile Runnable beforeIoLock;

    /** {@link #lockIo} shared: a read or write of {@code h}'s file; let go with {@link IoLock#unlockShared}. */
    IoLock lockShared(Handle h, Inode i) {
        return lockIo(h, i, false);
    }

    /** {@link #lockIo} exclusively: a change to {@code h}'s file's mapping or end; let go with {@link IoLock#unlock}. */
    IoLock lockExclusive(Handle h, Inode i) {
        return lockIo(h, i, true);
    }

    /**
     * Takes the I/O lock of {@code h}'s inode {@code i} for an operation on {@code h}, then checks again
     * that {@code h} is open (EBADF if not). A last close marks its handle closed before it frees an
     * orphan, and freeing takes this lock exclusively: an operation that finds the handle open here holds
     * the freeing off until it unlocks; one that finds it closed never touches the inode, whose slot a new
     * file may hold by now. One volatile read, no count of operations in flight to update.
     */
    private IoLock lockIo(Handle h, Inode i, boolean exclusive) {
        volume.requireOpen(); // a closed or shut down volume takes no more I/O
        Runnable hook = beforeIoLock;
        if (hook != null) {
            hook.run();
        }
        IoLock l = io(i.ino);
        if (exclusive) {
            l.lock();
        } else {
            l.lockShared();
        }
        if (!h.isOpen()) {
            if (exclusive) {
                l.unlock();
            } else {
                l.unlockShared();
            }
            h.requireOpen();
        }
        return l;
    }

    /**
     * Whether a transfer of {@code buf} at {@code offset} through {@code h} takes the direct path: its
     * offset and length are whole blocks and its buffer native and aligned to
     * {@link BlockDevice#BUFFER_ALIGNMENT} (else it is buffered), or EINVAL if {@code h} is
     * {@link Namespace#O_DIRECT} and it is not. EINVAL for a negative offset or an over-long transfer.
     */
    private boolean direct(Handle h, Inode i, String op, long offset, MemorySegment buf) {
        if (offset < 0) {
            throw new NamespaceException(Errno.EINVAL, op + " at negative offset " + offset + " of inode " + i.ino);
        }
        long len = buf.byteSize();
        if (len > MAX_TRANSFER) {
            throw new NamespaceException(Errno.EINVAL, op + " of " + len + " bytes: at most " + MAX_TRANSFER + " at a time");
        }
        boolean aligned = offset % blockSize == 0 && len % blockSize == 0 && buf.isNative()
                && (buf.address() & (BlockDevice.BUFFER_ALIGNMENT - 1)) == 0;
        if (!aligned && h.isDirect()) {
            throw new NamespaceException(Errno.EINVAL, op + " of " + len + " bytes at offset " + offset + " of inode " + i.ino
                    + " through an O_DIRECT handle: the offset and length must be multiples of " + blockSize
                    + " and the buffer native and aligned to " + BlockDevice.BUFFER_ALIGNMENT + " bytes");
        }
        return aligned;
    }

    /** The size {@code i} has committed (buffered writes may show a larger one); EISDIR or EINVAL as {@link FileMapping#file}. */
    long committedSize(Inode i) {
        long size = records.readLong(i.ino, FileData::regularSize);
        return size >= 0 ? size : mapping.file(i, 0, 0).size();
    }

    private static long regularSize(MemorySegment b, int rec) {
        return (InodeFormat.mode(b, rec) & S_IFMT) == S_IFREG ? InodeFormat.size(b, rec) : -1;
    }

    /** The device block of file block {@code first} if one written extent holds {@code [first, end)} inside the size; else -1. */
    private long inPlace(Inode i, long first, long end) {
        long dev = writtenBlock(i, first, end);
        return dev == ExtentFormat.IN_TREE ? map.mappedBlock(i, first, end, false) : dev;
    }

    /**
     * {@link ExtentFormat#writtenBlock} of {@code i}'s record for {@code [first, end)}: from the file's
     * {@link OverwriteHint} while the record is the version it decoded, else by an optimistic read of the
     * record, which rebuilds the hint when the answer is a written block (so a record whose writes convert
     * or allocate, and so change it each time, is not decoded whole each time).
     */
    private long writtenBlock(Inode i, long first, long end) {
        OverwriteHint hint = i.overwriteHint;
        if (hint != null) {
            long dev = hint.lookup(first, end);
            if (dev >= 0) {
                return dev;
            }
        }
        int rec = records.rec(i.ino);
        for (int spins = 0; ; spins++) {
            Buffer b = records.inodeBuffer(i.ino);
            long v = b.readVersion();
            if (v < 0) { // evicted: the next lookup finds or reads its successor
                InodeRecords.backOff(spins);
                continue;
            }
            MemorySegment m = b.data();
            long dev;
            try {
                dev = ExtentFormat.writtenBlock(m, rec, first, end, geometry);
                if (dev >= 0) {
                    if (hint == null) {
                        i.overwriteHint = hint = new OverwriteHint(); // one per inode: racing makers lose only a hint
                    }
                    hint.rebuild(b, v, m, rec, geometry);
                }
            } catch (RuntimeException e) {
                if (b.validate(v)) {
                    throw e;
                }
                continue;
            }
            if (b.validate(v)) {
                return dev;
            }
        }
    }

    int read(Handle h, long offset, MemorySegment dst) {
        Inode i = h.requireReadable();
        if (!direct(h, i, "read", offset, dst)) {
            return buffered.read(h, i, offset, dst);
        }
        long first = offset / blockSize;
        if (BufferedIo.hasDirty(i)) { // the device gets what the cache holds for the range first
            buffered.writeBack(i, first, first + dst.byteSize() / blockSize);
        }
        IoLock l = lockShared(h, i);
        try {
            long blocks = dst.byteSize() / blockSize;
            long dev = blocks == 0 ? -1 : inPlace(i, first, first + blocks);
            if (dev >= 0) {
                device.read(dev, dst);
                return (int) dst.byteSize();
            }
            FileMapping.ReadMapping s = mapping.forRead(i, first, first + blocks);
            BlockRanges r = null;
            if ((s.flags & FLAG_SHARED) != 0 && blocks > 0) { // looked up again holding the blocks: no copy on write lets go of them meanwhile
                (r = BlockRanges.of(i)).lock(first, first + blocks, false);
                s = mapping.forRead(i, first, first + blocks);
            }
            try {
                long size = Math.max(s.size, i.pendingSize);
                if (offset >= size || dst.byteSize() == 0) {
                    return 0;
                }
                long n = Math.min(dst.byteSize(), size - offset);
                readRuns(s.extents, first, first + (n + blockSize - 1) / blockSize, dst); // whole blocks: the buffer holds them
                return (int) n;
            } finally {
                if (r != null) {
                    r.unlock(first, first + blocks, false);
                }
            }
        } finally {
            l.unlockShared();
        }
    }

    /** Reads file blocks {@code [first, end)} as {@code x} maps them into {@code dst}: holes and unwritten blocks as zeros. */
    private void readRuns(ExtentList x, long first, long end, MemorySegment dst) {
        for (long fb = first; fb < end; ) {
            int k = x.find(fb);
            long runEnd = Math.min(end, k >= 0 ? x.end(k) : -k - 1 < x.count() ? x.fileBlock(-k - 1) : end);
            long at = (fb - first) * blockSize, len = (runEnd - fb) * blockSize;
            MemorySegment part = at == 0 && len == dst.byteSize() ? dst : dst.asSlice(at, len); // one run: no slice object
            if (k < 0 || x.unwritten(k)) {
                part.fill((byte) 0);
            } else {
                device.read(x.deviceBlock(k) + (fb - x.fileBlock(k)), part);
            }
            fb = runEnd;
        }
    }

    /**
     * What a buffered page of file block {@code fb} of {@code i}, about to be dirtied, reserves for its
     * write-back ({@link PageCache#reserve}). A block ({@link PageCache#BLOCK}): over a hole; over any block
     * of a file that shares blocks (its write-back may copy on write: reflinked files reserve for overwrites
     * too rather than look each block's count up); past the committed size over a speculative block, which
     * a trim or another file's ENOSPC may free before the write-back (fallocate's past the end stay). Its
     * file's map only ({@link PageCache#MAP}) over an unwritten block of its own (fallocate's past the end
     * too): converting it may split its extent in three and make or grow a tree. Nothing over a written
     * block of its own. The caller holds the I/O lock.
     */
    byte reservation(Inode i, long fb) {
        if (inPlace(i, fb, fb + 1) >= 0) { // an overwrite: the direct path's lookup, no allocation
            return PageCache.NONE;
        }
        FileMapping.ReadMapping r = mapping.forRead(i, fb, fb + 1);
        int k = r.extents.find(fb);
        if ((r.flags & FLAG_SHARED) != 0 || k < 0 || fb >= (r.size + blockSize - 1) / blockSize && (r.flags & FLAG_PREALLOC) == 0) {
            return PageCache.BLOCK;
        }
        return r.extents.unwritten(k) ? PageCache.MAP : PageCache.NONE;
    }

    /** Whether file block {@code fb} of {@code i} reads zeros from the device: a hole or an unwritten block (the I/O lock held). */
    boolean readsZeros(Inode i, long fb) {
        ExtentList x = mapping.forRead(i, fb, fb + 1).extents;
        int k = x.find(fb);
        return k < 0 || x.unwritten(k);
    }

    /**
     * Promises ({@link Counters#claim}) the blocks a change of {@code [first, end)} of {@code i} will take
     * outside a write-back (a direct write's, fallocate's): one for each hole of the range in {@code x}, and
     * with {@code tree} an extent tree's root and reserve ({@link PageCache#FILE_META_BLOCKS}: the extents
     * become a tree, or a tree may refill its reserve). Returns what it promised, to {@link Counters#release}
     * once the allocation is made (its free count moved) or failed. When the blocks not promised fall
     * short, the file's own reserved pages in the range count as room (the write drops them, fallocate
     * backs them: their promises go back), then other files' speculative blocks are freed once; then
     * NoSpaceException with nothing changed: what is left is promised to dirty pages, whose write-backs
     * must find it, or to allocations in flight. The caller holds the I/O lock.
     */
    private long claimHoles(Inode i, ExtentList x, long first, long end, boolean tree) {
        return claim(i, holes(x, first, end), first, end, tree);
    }

    /** The blocks of holes {@code x} has in {@code [first, end)}. */
    private static long holes(ExtentList x, long first, long end) {
        long holes = 0;
        for (long[] g = x.firstGap(first, end, false); g != null; g = x.firstGap(g[0] + g[1], end, false)) {
            holes += g[1];
        }
        return holes;
    }

    /** {@link #claimHoles} for {@code holes} blocks (a clone: a block per {@link PageCache#PAGES_PER_META_BLOCK} extents it maps). */
    long claim(Inode i, long holes, long first, long end, boolean tree) {
        long n = claimFor(holes, tree);
        Counters c = volume.counters();
        if (n == 0 || c.claim(n)) {
            return n;
        }
        n = claimFor(Math.max(0, holes - buffered.reservedIn(i, first, end)), tree);
        if (n == 0 || c.claim(n) || mapping.reclaimSpeculative(i.ino) && c.claim(n)) {
            return n;
        }
        throw new NoSpaceException("inode " + i.ino + " needs " + n + " blocks for file blocks [" + first + ", " + end + ")"
                + (tree ? " and its extent tree" : "") + "; " + Math.max(0, volume.spareBlocks() - c.promised())
                + " are free that are not promised to buffered writes or other allocations");
    }

    /**
     * What a change taking {@code holes} blocks no page reserved claims: them, a tree's blocks with
     * {@code tree}, and beside them the most one free-space change grows its group's free-space trees by
     * ({@link AllocationGroup#OP_BLOCKS}: a split at every level of both), which their nodes take off the
     * free list (a write-back's pages reserve their share with their map's).
     */
    private static long claimFor(long holes, boolean tree) {
        return holes + (tree ? PageCache.FILE_META_BLOCKS : 0) + (holes > 0 || tree ? AllocationGroup.OP_BLOCKS : 0);
    }

    /** Reads file blocks from {@code fb} of {@code i} into {@code dst} as mapped, whatever the size; the caller holds its I/O lock. */
    void readBlocks(Inode i, long fb, MemorySegment dst) {
        long end = fb + dst.byteSize() / blockSize;
        FileMapping.ReadMapping s = mapping.forRead(i, fb, end);
        if ((s.flags & FLAG_SHARED) == 0) {
            readRuns(s.extents, fb, end, dst);
            return;
        }
        BlockRanges r = BlockRanges.of(i); // as a direct read of a shared file's
        r.lock(fb, end, false);
        try {
            readRuns(mapping.forRead(i, fb, end).extents, fb, end, dst);
        } finally {
            r.unlock(fb, end, false);
        }
    }

    /** A write-back's record read (its runs follow changes of the record: no hint), made once: a lambda capturing the range would be an object per write. */
    private final InodeRecords.RangeRecordReader recordWrittenBlock = this::recordWrittenBlock;

    private long recordWrittenBlock(MemorySegment b, int rec, long first, long end) {
        return ExtentFormat.writtenBlock(b, rec, first, end, geometry);
    }

    void write(Handle h, long offset, MemorySegment src) {
        Inode i = h.requireWritable();
        if (h.isAppend()) { // as Linux's pwrite on an O_APPEND file: at the end, whatever the offset
            append(h, src);
            return;
        }
        if (!direct(h, i, "write", offset, src)) {
            requireBelowMax(i, offset, src.byteSize());
            buffered.write(h, i, offset, src);
            return;
        }
        requireBelowMax(i, offset, src.byteSize());
        writeDirect(h, i, offset, src, offset + src.byteSize(), true);
    }

    /**
     * A direct write of {@code src} (whole blocks from an aligned native buffer, as {@link #direct} takes)
     * at block-aligned {@code offset} that leaves the size at least {@code size}, which may end inside its
     * last block (whose bytes past it must be zeros): a table blob's value, written without passing
     * through the page cache and committing its exact length. Its length being known, no block is
     * allocated past it speculatively (such a tail was freed again when the writer closed the file, and
     * the next allocation found those blocks busy and forced the log).
     */
    void writeBlocks(Handle h, long offset, MemorySegment src, long size) {
        Inode i = h.requireWritable();
        if (!direct(h, i, "write", offset, src) || size > offset + src.byteSize() || size <= offset + src.byteSize() - blockSize) {
            throw new IllegalArgumentException("not whole aligned blocks ending in the block of size " + size + ": "
                    + src.byteSize() + " bytes at offset " + offset + " of inode " + i.ino);
        }
        requireBelowMax(i, offset, src.byteSize());
        writeDirect(h, i, offset, src, size, false); // its length is known: nothing past it to preallocate, nor trim at close
    }

    /**
     * The direct path's write; the I/O lock is taken here (under an append's exclusive hold, as its owner's).
     * A write extending the file may allocate speculatively past its end if {@code speculate}.
     */
    private void writeDirect(Handle h, Inode i, long offset, MemorySegment src, long newSize, boolean speculate) {
        long len = src.byteSize();
        IoLock l = lockShared(h, i);
        // a write-back in flight lets go of the I/O lock's exclusion: its copies land before this write, not over it
        FilePages p = i.pages;
        ReentrantLock writeBack = p != null && p.size() > 0 ? p.writeBack : null;
        if (writeBack != null) {
            writeBack.lock();
        }
        boolean sparse;
        try {
            sparse = !writeLocked(i, offset, src, true, newSize, false, speculate);
            if (!sparse) { // under the I/O lock: no write-back puts an older cached block over this write
                buffered.drop(i, offset / blockSize, (offset + len) / blockSize);
            }
        } finally {
            if (writeBack != null) {
                writeBack.unlock();
            }
            l.unlockShared();
        }
        if (sparse) {
            l = lockExclusive(h, i);
            try {
                mapping.trimSpeculative(i);
                writeLocked(i, offset, src, false, newSize, false, speculate);
                buffered.drop(i, offset / blockSize, (offset + len) / blockSize);
            } finally {
                l.unlock();
            }
        }
    }

    /** EFBIG if {@code len} bytes at {@code offset} end past the largest file (EISDIR or EINVAL first). */
    private void requireBelowMax(Inode i, long offset, long len) {
        if (offset > MAX_FILE_SIZE - len) {
            mapping.file(i, 0, 0); // EISDIR or EINVAL before EFBIG
            throw new NamespaceException(Errno.EFBIG, "write of " + len + " bytes at offset " + offset + " of inode " + i.ino
                    + " ends past the largest file, " + MAX_FILE_SIZE + " bytes");
        }
    }

    /**
     * Writes back a run of cached pages, {@code src} at {@code offset}, as a direct write, committing a
     * size of at least {@code newSize} (no more than the bytes the file has: its last block may be
     * partial). The caller holds the I/O lock exclusively.
     */
    void writeBackRun(Inode i, long offset, MemorySegment src, long newSize) {
        if (!writeBackRunShared(i, offset, src, newSize)) {
            mapping.trimSpeculative(i);
            writeLocked(i, offset, src, false, newSize, true, true);
        }
    }

    /**
     * {@link #writeBackRun} for a caller holding the I/O lock shared: false, with nothing done, if the run
     * starts past the end of a file with a speculative tail, which must be trimmed first, under the lock
     * held exclusively.
     */
    boolean writeBackRunShared(Inode i, long offset, MemorySegment src, long newSize) {
        return writeLocked(i, offset, src, true, newSize, true, true);
    }

    /** Commits a size of at least {@code size} for {@code i} (a buffered write's, whose pages were written or dropped). */
    void commitSize(Inode i, long size) {
        mapping.update(i, 0, 0, null, old -> Math.max(old, size), true, true); // after the pages written back before it
    }

    /**
     * {@link #write}, the I/O lock held; false, with nothing done, if {@code mayRefuse} and the write
     * starts past the end of a file whose speculative blocks lie there: it would split them into written
     * and unwritten pieces between holes (a sparse writer would soon run out of extents), so the caller
     * trims them first, under the I/O lock exclusively. The size becomes at least {@code newSize}. An
     * overwrite in place records the modification time in the inode ({@link InodeRecords#markModified})
     * unless it is a {@code writeBack} of cached pages, whose buffered write recorded it. A write extending
     * the file allocates speculatively past its end only if {@code speculate}.
     */
    private boolean writeLocked(Inode i, long offset, MemorySegment src, boolean mayRefuse, long newSize, boolean writeBack, boolean speculate) {
        long len = src.byteSize();
        long first = offset / blockSize, end = first + len / blockSize;
        long dev = len == 0 ? -1 : writeBack ? records.readLong(i.ino, first, end, recordWrittenBlock)
                : writtenBlock(i, first, end); // inside the size: newSize is too
        boolean tree = dev == ExtentFormat.IN_TREE;
        if (tree) {
            dev = map.mappedBlock(i, first, end, false);
        }
        if (dev >= 0) { // the fast path: written blocks inside the size, overwritten in place
            device.write(dev, src);
            dataWritten(i);
            if (!writeBack) {
                records.markModified(i); // no transaction logs the time now: it waits in the inode
            }
            return true;
        }
        if (tree && (dev = map.foundBlock(first, end, true)) >= 0) {
            // one unwritten extent of a tree holds the range, inside the size: no window to load (nor the
            // inode's lock that takes), nothing to allocate, and a tree holds the extents after; its
            // conversion may split the extent and refill the tree's reserve, promised first (a write-back's
            // pages promised theirs)
            long claimed = writeBack ? 0 : claim(i, 0, first, end, true);
            try {
                device.write(dev, src);
                dataWritten(i);
                finish(i, first, end, newSize, writeBack, true);
            } finally {
                volume.counters().release(claimed);
            }
            return true;
        }
        FileMapping.Snapshot s = mapping.file(i, first, end);
        if (len == 0) {
            return true;
        }
        if (mayRefuse && splitsSpeculative(i, s, offset)) {
            return false;
        }
        if ((s.flags() & FLAG_SHARED) != 0) { // the in-place path refused it above: its blocks may be shared
            writeShared(i, offset, src, newSize, writeBack);
            return true;
        }
        writeMapped(i, s, offset, src, newSize, writeBack, speculate);
        return true;
    }

    /** Whether a write at {@code offset} of a file {@code s} shows would split its speculative blocks past its end (see {@link #writeLocked}). */
    private boolean splitsSpeculative(Inode i, FileMapping.Snapshot s, long offset) {
        return offset > s.size() && (s.flags() & (FLAG_SPECULATIVE | FLAG_PREALLOC)) == FLAG_SPECULATIVE
                && mapping.lastEnd(i, s.extents()) > (s.size() + blockSize - 1) / blockSize;
    }

    /**
     * {@link #writeLocked} past its in-place path for a file that shares no block: holes filled (unwritten,
     * written, converted), written blocks overwritten in place.
     */
    private void writeMapped(Inode i, FileMapping.Snapshot s, long offset, MemorySegment src, long newSize, boolean writeBack, boolean speculate) {
        long len = src.byteSize();
        long first = offset / blockSize, end = first + len / blockSize;
        ExtentList x = s.extents();
        boolean convert = x.firstGap(first, end, true) != null;
        boolean grows = convert && !FileMapping.fits(x, first, end, end), holes = convert && x.firstGap(first, end, false) != null;
        // a write-back's pages reserved their blocks and their tree's; anything else promises its own first:
        // the holes' blocks until they are allocated, the tree's (made, or refilled by the allocation or the
        // conversion after the data) until the conversion is made; a tree needed only when another writer's
        // change came between (or the holes are taken in more pieces) is promised when found
        boolean tree = grows || convert && x.inTree();
        long claimed = writeBack || !tree && !holes ? 0 : claimHoles(i, x, first, end, tree);
        long treeClaim = claimed != 0 && tree ? PageCache.FILE_META_BLOCKS : 0;
        FileMapping.TreePromise promise = FileMapping.TreePromise.of(writeBack || tree);
        try {
            try {
                while (grows && !FileMapping.fits(x, first, end, end)) { // a tree before any block (a written one too) is overwritten: its ENOSPC changes nothing
                    map.makeRoom(i);
                    x = mapping.file(i, first, end).extents();
                }
                if (x.firstGap(first, end, false) != null) {
                    x = speculate && offset <= s.size() && newSize > s.size() ? mapping.allocateExtending(i, s.flags(), x, first, end, promise)
                            : mapping.allocate(i, first, end, end, FLAG_SPECULATIVE, true, promise);
                }
            } finally {
                volume.counters().release(claimed - treeClaim);
            }
            for (long fb = first; fb < end; ) {
                int k = x.find(fb);
                long runEnd = Math.min(end, x.end(k));
                device.write(x.deviceBlock(k) + (fb - x.fileBlock(k)), src.asSlice((fb - first) * blockSize, (runEnd - fb) * blockSize));
                fb = runEnd;
            }
            dataWritten(i);
            if (convert || newSize > s.size()) {
                finish(i, first, end, newSize, writeBack, promise.held());
            }
        } finally {
            volume.counters().release(treeClaim);
            mapping.releaseTree(promise);
        }
    }

    /**
     * {@link #writeLocked} for a file flagged {@link InodeFormat#FLAG_SHARED}, the I/O lock held: in pieces
     * of one extent and one reference count each (holes alone), the shared ones copied on write
     * ({@link CopyOnWrite}), the others as any file's ({@link #writeMapped}); each piece moves the size up to
     * its end, in file order. The range's blocks are held exclusively ({@link BlockRanges}) from looking
     * them up to the last remap, so that writes of disjoint ranges copy side by side under a shared hold.
     */
    private void writeShared(Inode i, long offset, MemorySegment src, long newSize, boolean writeBack) {
        long first = offset / blockSize, end = first + src.byteSize() / blockSize;
        BlockRanges r = BlockRanges.of(i);
        r.lock(first, end, true);
        try {
            writeSharedLocked(i, first, end, src, newSize, writeBack);
        } finally {
            r.unlock(first, end, true);
        }
    }

    private void writeSharedLocked(Inode i, long first, long end, MemorySegment src, long newSize, boolean writeBack) {
        for (long fb = first; fb < end; ) {
            FileMapping.Snapshot s = mapping.file(i, fb, end);
            ExtentList x = s.extents();
            int k = x.find(fb);
            long stop, dev = -1;
            if (k < 0) {
                stop = -k - 1 < x.count() ? Math.min(end, x.fileBlock(-k - 1)) : end;
            } else {
                dev = x.deviceBlock(k) + (fb - x.fileBlock(k));
                long run = cow.run(dev, (int) (Math.min(end, x.end(k)) - fb));
                stop = fb + Refcounts.runLength(run);
                if (Refcounts.runCount(run) == 1) {
                    dev = -1; // this file's own blocks: written in place
                }
            }
            long pieceSize = stop == end ? newSize : Math.min(newSize, stop * blockSize);
            MemorySegment part = src.asSlice((fb - first) * blockSize, (stop - fb) * blockSize);
            if (dev >= 0) {
                // the copies and a tree for the remaps' splits (a write-back's pages reserved them: a shared file's reserve overwrites too)
                long claimed = writeBack ? 0 : claim(i, stop - fb, fb, stop, true);
                try {
                    cow.write(i, fb, dev, part, pieceSize, writeBack);
                } finally {
                    volume.counters().release(claimed);
                }
                dataWritten(i);
            } else {
                writeMapped(i, s, fb * blockSize, part, pieceSize, writeBack, true);
            }
            fb = stop;
        }
    }

    /**
     * {@link FileMapping#finish} for a write whose data is on the device: a direct write's batched with other
     * writers' of the file, which holds a tree's blocks promised until it returns if {@code treePromised}.
     */
    private void finish(Inode i, long first, long end, long newSize, boolean writeBack, boolean treePromised) {
        if (writeBack) {
            mapping.finish(i, first, end, newSize, true);
        } else {
            conversions.convert(i, first, end, newSize, treePromised);
        }
    }

    void truncate(Handle h, long size) {
        Inode i = h.requireOpen();
        if (!h.isWritable()) { // as ftruncate(2)
            throw new NamespaceException(Errno.EINVAL, "truncate of inode " + i.ino + " through a handle not open for writing");
        }
        if (size < 0) {
            throw new NamespaceException(Errno.EINVAL, "truncate of inode " + i.ino + " to negative size " + size);
        }
        mapping.file(i, 0, 0);
        if (size > MAX_FILE_SIZE) {
            throw new NamespaceException(Errno.EFBIG, "truncate of inode " + i.ino + " to " + size + " bytes, past the largest file, "
                    + MAX_FILE_SIZE + " bytes");
        }
        IoLock l = lockExclusive(h, i);
        try {
            long old = buffered.size(i), tail = size % blockSize;
            boolean zeroed = tail != 0 && size < old;
            if (zeroed) {
                // the cut block's bytes past the end read zeros, now and after a later extension: zeroed in
                // the cache and written back at once, so that the device holds no bytes past the new end either
                buffered.zeroLocked(i, size, Math.min(old, size - tail + blockSize) - size);
                buffered.writeBackLocked(i.pages, size / blockSize, size / blockSize + 1);
            }
            freeFrom(i, (size + blockSize - 1) / blockSize);
            mapping.update(i, 0, 0, null, any -> size, zeroed); // the zeros reach stable storage before the smaller size does
            buffered.clearPending(i);
        } finally {
            l.unlock();
        }
    }

    /**
     * Frees every block {@code i} maps at or past file block {@code from}, an extent (or the tail of one)
     * per transaction, the last first: each step leaves written extents inside the size, so a crash part
     * way leaves a sound, shorter mapping.
     */
    void freeFrom(Inode i, long from) {
        IoLock l = io(i.ino);
        l.lock();
        try {
            buffered.drop(i, from, Long.MAX_VALUE);
            if (from == 0) {
                buffered.clearPending(i);
            }
            mapping.release(i, from, FileMapping.TAIL, x -> FileMapping.lastPieceFrom(x, from), true);
        } finally {
            l.unlock();
        }
    }

    /**
     * For an orphan's freeing ({@link Orphans#inactivate}): drops {@code i}'s cached pages, dirty ones too,
     * and its pending size; if its blocks are one extent of an inline list, shared with no other file,
     * returns it as {@code {device block, length}}, left mapped for the transaction that frees the inode to
     * free with it; else frees them as {@link #freeFrom} does (a piece per transaction) and returns null.
     * Nobody else changes an orphan, so the extent stays as read.
     */
    long[] freeAllButOneExtent(Inode i) {
        IoLock l = io(i.ino);
        l.lock();
        try {
            buffered.drop(i, 0, Long.MAX_VALUE);
            buffered.clearPending(i);
            FileMapping.Snapshot s = mapping.file(i, 0, 0);
            ExtentList x = s.extents();
            if (!x.inTree() && x.count() == 1 && (s.flags() & FLAG_SHARED) == 0) {
                return new long[] {x.deviceBlock(0), x.length(0)};
            }
            mapping.release(i, 0, FileMapping.TAIL, y -> FileMapping.lastPieceFrom(y, 0), true);
            return null;
        } finally {
            l.unlock();
        }
    }

    /** Forgets {@code i}'s cached pages, dirty ones too, and its pending size. */
    void dropCache(Inode i) {
        IoLock l = io(i.ino);
        l.lock();
        try {
            buffered.dropAll(i);
        } finally {
            l.unlock();
        }
    }

    /** {@code fallocate(2)}: see {@link Namespace#fallocate}. */
    void fallocate(Handle h, int mode, long offset, long length) {
        Inode i = h.requireOpen();
        if ((mode & ~(Namespace.FALLOC_FL_KEEP_SIZE | Namespace.FALLOC_FL_PUNCH_HOLE | Namespace.FALLOC_FL_ZERO_RANGE)) != 0) {
            throw new NamespaceException(Errno.EOPNOTSUPP, "fallocate mode 0x" + Integer.toHexString(mode) + " of inode " + i.ino
                    + ": only KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE are supported");
        }
        boolean keep = (mode & Namespace.FALLOC_FL_KEEP_SIZE) != 0, punch = (mode & Namespace.FALLOC_FL_PUNCH_HOLE) != 0;
        boolean zero = (mode & Namespace.FALLOC_FL_ZERO_RANGE) != 0;
        if (punch && (!keep || zero)) {
            throw new NamespaceException(Errno.EINVAL, "fallocate of inode " + i.ino + ": PUNCH_HOLE goes with KEEP_SIZE and"
                    + " without ZERO_RANGE (mode 0x" + Integer.toHexString(mode) + ")");
        }
        if (offset < 0 || length <= 0) {
            throw new NamespaceException(Errno.EINVAL, "fallocate of " + length + " bytes at offset " + offset + " of inode "
                    + i.ino + ": the offset must not be negative and the length must be positive");
        }
        mapping.file(i, 0, 0);
        if (!h.isWritable()) {
            throw new NamespaceException(Errno.EBADF, "fallocate of inode " + i.ino + " through a handle not open for writing");
        }
        if (offset > MAX_FILE_SIZE - length) {
            throw new NamespaceException(Errno.EFBIG, "fallocate of " + length + " bytes at offset " + offset + " of inode "
                    + i.ino + " ends past the largest file, " + MAX_FILE_SIZE + " bytes");
        }
        long stop = offset + length;
        // the blocks the range touches, and the ones it covers whole: partial blocks are zeroed through the cache
        long first = offset / blockSize, end = (stop + blockSize - 1) / blockSize;
        long wholeFirst = (offset + blockSize - 1) / blockSize, wholeEnd = Math.max(wholeFirst, stop / blockSize);
        IoLock l = lockExclusive(h, i);
        try {
            FileMapping.Snapshot s = mapping.file(i, first, end);
            long size = Math.max(s.size(), i.pendingSize);
            ExtentList sim = s.extents().copy();
            boolean whole = wholeEnd > wholeFirst;
            if (punch && whole) {
                long[] piece; // only a range inside one extent splits it: the count after is the most any step needs
                do {
                    piece = sim.punch(wholeFirst, wholeEnd);
                } while (piece != null);
            } else if (!punch) {
                if (zero && whole) {
                    sim.setState(wholeFirst, wholeEnd, true);
                }
                FileMapping.fillHoles(sim, first, end);
            }
            boolean shared = (s.flags() & FLAG_SHARED) != 0;
            // what it maps (a zeroed range of shared blocks is let go and mapped again) and a tree, promised
            // first: one made, or one whose reserve the new extents or a punch's or zero range's splits may refill
            long holes = punch ? 0 : holes(s.extents(), first, end) + (zero && whole && shared ? wholeEnd - wholeFirst : 0);
            boolean tree = !sim.fits() || s.extents().inTree() && (holes > 0 || sim.count() > s.extents().count());
            long claimed = holes == 0 && !tree ? 0 : claim(i, holes, first, end, tree);
            FileMapping.TreePromise promise = FileMapping.TreePromise.of(tree); // more pieces than sim's may need one
            // the partial blocks a punch or zero range zeroes over shared blocks: their pages' reservations
            // (a copy each, and their share of the map) promised too, so that the second cannot fail after the first
            long prepaid = 0;
            try {
                if (shared && (punch || zero) && (offset % blockSize != 0 || stop % blockSize != 0)) {
                    prepaid = 2 + PageCache.FILE_META_BLOCKS + 1;
                    if (!volume.counters().claim(prepaid)) {
                        prepaid = 0;
                        throw new NoSpaceException("inode " + i.ino + " needs a block for each partial block of [" + offset + ", "
                                + stop + ") it zeroes over shared blocks, and its map's share; they are promised to buffered"
                                + " writes or other allocations");
                    }
                    buffered.prepay(i, prepaid);
                }
                if (!sim.fits()) { // a tree first: its ENOSPC changes nothing
                    map.makeRoom(i);
                }
                if (punch || zero) {
                    if (whole) {
                        zeroPartial(i, offset, wholeFirst * blockSize, size);
                        zeroPartial(i, wholeEnd * blockSize, stop, size);
                    } else {
                        zeroPartial(i, offset, stop, size);
                    }
                    buffered.drop(i, wholeFirst, wholeEnd);
                }
                if (punch) {
                    if (whole) {
                        mapping.release(i, wholeFirst, wholeFirst + 1, x -> x.punch(wholeFirst, wholeEnd), true);
                    }
                    return;
                }
                if (zero && whole && shared) {
                    // a shared block stays the others': the range's blocks let go (freed if no other file maps them), then
                    // mapped to blocks of its own below, so that a later write there has its space and copies nothing
                    mapping.release(i, wholeFirst, wholeFirst + 1, x -> x.punch(wholeFirst, wholeEnd), true);
                } else if (zero && whole) { // before the holes are mapped: the extents stay within sim's count all along
                    mapping.update(i, wholeFirst, wholeEnd, (y, from, to) -> y.setState(from, to, true), old -> old, false);
                }
                if (keep && stop > s.size()) {
                    mapping.trimSpeculative(i); // what the file keeps past its end from now on is what fallocate asks for, flagged so
                }
                mapping.allocate(i, first, end, first, keep ? FLAG_PREALLOC : FLAG_SPECULATIVE, true, promise);
                if (!shared) { // a shared block under a page still copies on write
                    buffered.backed(i, first, end);
                }
                if (!keep && stop > size) {
                    mapping.update(i, 0, 0, null, old -> Math.max(old, stop), false);
                }
            } finally {
                volume.counters().release(claimed + (prepaid == 0 ? 0 : buffered.unprepay(i)));
                mapping.releaseTree(promise);
            }
        } finally {
            l.unlock();
        }
    }

    /** Zeros the bytes of {@code [from, to)} inside the file's {@code size} through the cache (the I/O lock held exclusively). */
    private void zeroPartial(Inode i, long from, long to, long size) {
        long stop = Math.min(to, size);
        if (stop > from) {
            buffered.zeroLocked(i, from, stop - from);
        }
    }

    /**
     * Writes {@code src} at the end of {@code h}'s file, the I/O lock held exclusively so that no other
     * append, write or truncate moves the end meanwhile; returns the offset written. Direct if the
     * end, the length and the buffer are aligned, else buffered (EINVAL then for an O_DIRECT handle).
     */
    long append(Handle h, MemorySegment src) {
        Inode i = h.requireWritable();
        boolean aligned = direct(h, i, "append", 0, src);
        if (!aligned) {
            buffered.throttle();
        }
        IoLock l = lockExclusive(h, i);
        try {
            long at = buffered.size(i);
            requireBelowMax(i, at, src.byteSize());
            if (aligned && at % blockSize == 0) {
                writeDirect(h, i, at, src, at + src.byteSize(), true); // its shared lock is reentrant under the exclusive one
            } else if (h.isDirect()) {
                throw new NamespaceException(Errno.EINVAL, "append through an O_DIRECT handle to inode " + i.ino + " at its size, "
                        + at + " bytes, not a multiple of " + blockSize);
            } else {
                buffered.writeLocked(i, at, src);
            }
            return at;
        } finally {
            l.unlock();
        }
    }

    /** {@link Namespace#extents}: the extents of {@code h}'s file that overlap {@code [offset, offset + length)}. */
    List<FileExtent> extents(Handle h, long offset, long length) {
        Inode i = h.requireOpen();
        if (offset < 0 || length < 0) {
            throw new NamespaceException(Errno.EINVAL, "extents of " + length + " bytes at offset " + offset + " of inode " + i.ino
                    + ": neither may be negative");
        }
        long first = offset / blockSize, end = length > MAX_FILE_SIZE - offset ? ExtentFormat.MAX_FILE_BLOCKS
                : (offset + length + blockSize - 1) / blockSize;
        IoLock l = lockShared(h, i);
        try {
            ExtentList x = mapping.file(i, first, end).extents();
            List<FileExtent> out = new ArrayList<>();
            int k = x.find(first);
            for (k = k >= 0 ? k : -k - 1; k < x.count() && x.fileBlock(k) < end; k++) {
                out.add(new FileExtent(x.fileBlock(k) * blockSize, (long) x.length(k) * blockSize, x.deviceBlock(k) * blockSize,
                        x.unwritten(k)));
            }
            return out;
        } finally {
            l.unlockShared();
        }
    }

    /**
     * {@link Namespace#seekData} ({@code data}) or {@link Namespace#seekHole}: the first offset at or past
     * {@code offset} in a written extent, or in a hole or unwritten extent (the end of the file is one). The
     * file's dirty cached pages from {@code offset} on are written back first: written back, they lie in
     * written extents, so buffered data counts as data wherever it went.
     */
    long seek(Handle h, long offset, boolean data) {
        Inode i = h.requireOpen();
        if (offset >= 0) {
            buffered.writeBack(i, offset / blockSize, Long.MAX_VALUE);
        }
        IoLock l = lockShared(h, i);
        try {
            long size = buffered.size(i); // EISDIR or EINVAL for what is not a regular file
            if (offset < 0 || offset >= size) {
                throw new NamespaceException(Errno.ENXIO, (data ? "no data" : "no hole") + " at offset " + offset + " of inode "
                        + i.ino + ", " + size + " bytes long");
            }
            long first = offset / blockSize, end = (size + blockSize - 1) / blockSize;
            ExtentList x = mapping.file(i, first, end).extents();
            if (!data) {
                long[] gap = x.firstGap(first, end, true);
                return gap == null ? size : Math.max(offset, gap[0] * blockSize);
            }
            int k = x.find(first);
            for (k = k >= 0 ? k : -k - 1; k < x.count() && x.fileBlock(k) < end; k++) {
                if (!x.unwritten(k)) {
                    return Math.max(offset, x.fileBlock(k) * blockSize);
                }
            }
            throw new NamespaceException(Errno.ENXIO, "no data at or past offset " + offset + " of inode " + i.ino + ", " + size
                    + " bytes long");
        } finally {
            l.unlockShared();
        }
    }

    /**
     * Writes back {@code h}'s dirty cached pages and commits what they allocate and the size they reach,
     * forcing nothing: a commit after this that is ordered after data ({@code Txn#orderAfterData}) cannot
     * be durable before the data is (table blobs).
     */
    void writeBack(Handle h) {
        Inode i = h.requireOpen();
        buffered.writeBack(i, 0, Long.MAX_VALUE);
        buffered.takeError(i);
    }

    /**
     * fsync ({@code dataOnly} false) or fdatasync: writes back the file's dirty cached pages, forces the
     * journal to the file's last change, or with {@code dataOnly} to its last change of size or extents
     * (skipped if that is durable already: an overwrite in place changes neither), then makes the data
     * written through {@code h}'s inode durable: by the flush of the checkpoint the force wrote, if one
     * began after the data was written, else by a device flush of its own (shared with concurrent fsyncs).
     */
    void sync(Handle h, boolean dataOnly) {
        writeBack(h);
        Inode i = h.requireOpen();
        if (!dataOnly) {
            logModified(i);
        }
        boolean data = i.takeDataSync();
        boolean done = false;
        try {
            long mark = cache.journal().flushMark(); // the file's data writes have completed
            long seq = dataOnly ? i.lastDataSeq : i.lastSeq;
            if (seq < 0) {
                cache.journal().forceAll();
            } else {
                cache.journal().force(seq); // returns at once if that is durable
            }
            if (data && !cache.journal().flushedSince(mark)) { // no checkpoint's flush came after the data: one of its own
                flushes.flush();
            }
            done = true;
        } finally {
            if (data) {
                i.endDataSync(done);
            }
        }
    }

    /**
     * Logs {@code i}'s modification time that a data write recorded without a transaction
     * ({@link Inode#modified}), if any is later than the logged one: a transaction of its own, not forced.
     */
    void logModified(Inode i) {
        if (i.modified() == 0) {
            return;
        }
        int rec = records.rec(i.ino);
        long t;
        try (Txn txn = Txn.begin(cache, 2)) {
            i.lock();
            try {
                Buffer b = records.lockRecord(txn, i.ino);
                // read again holding the record: a setattr that set the time meanwhile forgot the write's
                t = i.modified();
                if (t == 0) {
                    return;
                }
                MemorySegment m = b.data();
                if (InodeFormat.mode(m, rec) != 0 && t > InodeFormat.mtime(m, rec)) {
                    InodeFormat.touch(m, rec, t, true);
                    txn.log(b, rec, InodeFormat.INLINE);
                    i.lastSeq = txn.commit(); // times only: fdatasync does not wait for it
                }
            } finally {
                i.unlock();
            }
        }
        records.clearModified(i, t);
    }

    /** A data write to {@code i} that may log nothing now: see {@link InodeRecords#markModified}. */
    void markModified(Inode i) {
        records.markModified(i);
    }

    /** {@link #logModified} for every cached inode with a modification time to log (a volume sync, the unmount). */
    void logAllModified() {
        if (records.modifiedTimes.get() != 0) {
            inodes.forEachReferenced(i -> {
                if (i.modified() != 0) {
                    logModified(i);
                }
            });
        }
    }

    /** A data write to {@code i} reached the device: marks it and the volume for their next flush. */
    private void dataWritten(Inode i) {
        i.markDataDirty();
        WRITTEN_MARK.set(this);
    }

    /**
     * Writes back every file's cached pages, then makes the data written to any file so far durable on the
     * device. {@link #written} is taken as an fsync takes a file's mark ({@link DataMark}): a sync that finds
     * it clear while another is between taking it and the end of its flush flushes too (shared), so that
     * it never returns before the writes the other took it for are durable.
     */
    void flushAll() {
        logAllModified();
        buffered.writeBackAll();
        if (!WRITTEN_MARK.take(this)) {
            return;
        }
        boolean done = false;
        try {
            flushes.flush();
            done = true;
        } finally {
            WRITTEN_MARK.end(this, done);
        }
    }
}
