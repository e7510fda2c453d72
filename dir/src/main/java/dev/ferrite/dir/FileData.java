package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongUnaryOperator;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.internal.SharedFlush;

import static dev.ferrite.dir.InodeFormat.FLAG_PREALLOC;
import static dev.ferrite.dir.InodeFormat.FLAG_SPECULATIVE;
import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;
import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * Regular files' data, the xfs_bmap and direct-I/O role: the extents (inline in the inode record or
 * in the inode's tree, through {@link ExtentMap}), reads, writes and appends straight between the caller's aligned buffer and the
 * device, fallocate, fsync and fdatasync, and freeing a file's blocks (truncate, punch hole, and an
 * orphan's destruction). A call not aligned for the direct path goes to {@link BufferedIo} (the data page
 * cache), whose write-back comes back here as direct writes ({@link #writeBackRun}).
 *
 * <h2>Ordering</h2>
 * Data reaches the device before any extent that points at it says written. Overwriting written blocks
 * is a plain device write (no transaction, no allocation). Filling a hole takes two transactions, as
 * XFS's unwritten extents do: the first allocates the blocks and maps them <em>unwritten</em> (read as
 * zeros); then the data is written; the second marks them written and moves the size, ordered after
 * the data ({@link Txn#orderAfterData}: its checkpoint is written after a device flush, which every
 * conversion in that checkpoint shares, as XFS's log writes carry REQ_PREFLUSH), so no crash leaves it
 * durable without the data, and concurrent writers pay for one flush per checkpoint, not one each. A
 * crash in between leaves an unwritten extent: accounted, reading zeros, freed by truncate or unlink.
 * An fsync's data is made durable by the flush of the checkpoint its force wrote when that flush began
 * after the data was written, else by a flush of its own, shared by concurrent callers
 * ({@link SharedFlush}). Blocks freed from a file stay {@linkplain BusyExtents busy} until the free is
 * durable, and no allocation hands them out meanwhile: a crash can then not give them back to their old
 * file with another file's data in them, and no write waits on a force for that.
 *
 * <h2>Speculative preallocation</h2>
 * A write extending the file from inside it or at its end maps unwritten blocks past the new end as well
 * ({@link #allocateExtending}), flagging the inode {@link InodeFormat#FLAG_SPECULATIVE}; later appends
 * only convert them. The last close, or the first open after a crash, frees what is left past the end
 * ({@link #trimSpeculative}); fallocate's KEEP_SIZE flags the inode {@link InodeFormat#FLAG_PREALLOC}
 * instead, and such a file is neither preallocated for nor trimmed.
 *
 * <h2>Locks</h2>
 * A striped I/O lock per inode, taken before the log reservation (XFS's i_rwsem): shared by reads and
 * writes (buffered ones too), exclusive by truncate, fallocate, append (which so owns the end of the file
 * while it writes there), a write-back of cached pages, a trim and by freeing an orphan, so that no read
 * or write uses a mapping whose blocks are being freed or unwritten. Each extent change is a transaction
 * reserved before the inode's lock (2), then a group's AGF (3), then the record's block (4), then the
 * nodes of the inode's extent tree (whose allocator is the record's block, held already). Concurrent
 * writes to disjoint ranges run their device I/O in parallel. An operation on a handle checks again that
 * the handle is open once it holds the I/O lock ({@link #lockIo}), so that a last close racing it cannot
 * free the inode under it.
 */
final class FileData {
    /** The largest file: 2^63 - 1 bytes rounded down to 4 KiB, the limit of {@link ExtentFormat#MAX_FILE_BLOCKS}. */
    static final long MAX_FILE_SIZE = ExtentFormat.MAX_FILE_BLOCKS * 4096;
    /** The longest single transfer: what a read's int result can count, in whole 4 KiB blocks (as Linux's 0x7ffff000). */
    static final int MAX_TRANSFER = Integer.MAX_VALUE & -4096;
    private static final int IO_STRIPES = 64;
    /** The least speculative preallocation, in bytes: a file written by 4 KiB appends starts with room for 64. */
    private static final long PREALLOC_MIN_BYTES = 256 << 10;

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeRecords records;
    private final InodeCache inodes;
    /**
     * Files this mount gave speculative blocks past their end, until trimmed: what a write that finds no
     * free block reclaims before it gives up (XFS's eofblocks scan on ENOSPC).
     */
    private final Set<Long> speculative = ConcurrentHashMap.newKeySet();
    private final BlockDevice device;
    private final ExtentMap map;
    private final int blockSize;
    private final ReentrantReadWriteLock[] ioLocks = new ReentrantReadWriteLock[IO_STRIPES];
    /** Speculative preallocation's bounds, in blocks. */
    private final long preallocMin, preallocCap;
    /** File data was written to the device since the last {@link #flushAll}. */
    private volatile boolean written;
    /** Device flushes for file data, shared by concurrent fsyncs. */
    private final SharedFlush flushes;
    /** The buffered path: what a call not aligned for the direct one goes through. */
    final BufferedIo buffered;

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
        for (int i = 0; i < IO_STRIPES; i++) {
            ioLocks[i] = new ReentrantReadWriteLock();
        }
        // the most: an eighth of a group (XFS goes up to its longest extent), so that a file written by
        // appends beside another ends in a handful of extents, yet a few growing files cannot fill a group
        this.preallocCap = Math.min(ExtentFormat.MAX_LENGTH, geometry.agBlocks() / 8);
        this.preallocMin = Math.min(PREALLOC_MIN_BYTES / blockSize, preallocCap);
        this.buffered = new BufferedIo(this, pages, blockSize, records.pendingSizes, inodes);
    }

    ReentrantReadWriteLock io(long ino) {
        return ioLocks[(int) (ino * 0x9E37_79B9_7F4A_7C15L >>> 58)];
    }

    /** Test seam: run by an operation on a handle between its EBADF check and taking the I/O lock; null outside tests. */
    volatile Runnable beforeIoLock;

    /**
     * Takes {@code l}, the I/O lock of {@code h}'s inode, for an operation on {@code h}, then checks again
     * that {@code h} is open (EBADF if not). A last close marks its handle closed before it frees an
     * orphan, and freeing takes this lock exclusively: an operation that finds the handle open here holds
     * the freeing off until it unlocks; one that finds it closed never touches the inode, whose slot a new
     * file may hold by now. One volatile read, no count of operations in flight to update.
     */
    Lock lockIo(Handle h, Lock l) {
        Runnable hook = beforeIoLock;
        if (hook != null) {
            hook.run();
        }
        l.lock();
        if (!h.isOpen()) {
            l.unlock();
            h.requireOpen();
        }
        return l;
    }

    /** A file's size, flags and extents (all of an inline list, a window of a tree), read together. */
    private record Snapshot(long size, int flags, ExtentList extents) {
    }

    /**
     * Inode {@code i}'s size and extents, of a tree those for {@code [from, to)} ({@link ExtentMap#window});
     * EISDIR for a directory, EINVAL for anything else not a regular file.
     */
    private Snapshot file(Inode i, long from, long to) {
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

    /** The size {@code i} has committed (buffered writes may show a larger one); EISDIR or EINVAL as {@link #file}. */
    long committedSize(Inode i) {
        long size = records.readRecord(i.ino, (b, rec) -> (InodeFormat.mode(b, rec) & S_IFMT) == S_IFREG ? InodeFormat.size(b, rec) : -1L);
        return size >= 0 ? size : file(i, 0, 0).size();
    }

    /** The device block of file block {@code first} if one written extent holds {@code [first, end)} inside the size; else -1. */
    private long inPlace(Inode i, long first, long end) {
        long dev = records.readRecord(i.ino, (b, rec) -> ExtentFormat.writtenBlock(b, rec, first, end, geometry));
        return dev == ExtentFormat.IN_TREE ? map.writtenBlock(i, first, end) : dev;
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
        Lock l = lockIo(h, io(i.ino).readLock());
        try {
            long blocks = dst.byteSize() / blockSize;
            long dev = blocks == 0 ? -1 : inPlace(i, first, first + blocks);
            if (dev >= 0) {
                device.read(dev, dst);
                return (int) dst.byteSize();
            }
            Snapshot s = file(i, first, first + blocks);
            long size = Math.max(s.size(), i.pendingSize);
            if (offset >= size || dst.byteSize() == 0) {
                return 0;
            }
            long n = Math.min(dst.byteSize(), size - offset);
            readRuns(s.extents(), first, first + (n + blockSize - 1) / blockSize, dst); // whole blocks: the buffer holds them
            return (int) n;
        } finally {
            l.unlock();
        }
    }

    /** Reads file blocks {@code [first, end)} as {@code x} maps them into {@code dst}: holes and unwritten blocks as zeros. */
    private void readRuns(ExtentList x, long first, long end, MemorySegment dst) {
        for (long fb = first; fb < end; ) {
            int k = x.find(fb);
            long runEnd = Math.min(end, k >= 0 ? x.end(k) : -k - 1 < x.count() ? x.fileBlock(-k - 1) : end);
            MemorySegment part = dst.asSlice((fb - first) * blockSize, (runEnd - fb) * blockSize);
            if (k < 0 || x.unwritten(k)) {
                part.fill((byte) 0);
            } else {
                device.read(x.deviceBlock(k) + (fb - x.fileBlock(k)), part);
            }
            fb = runEnd;
        }
    }

    /** Reads file blocks from {@code fb} of {@code i} into {@code dst} as mapped, whatever the size; the caller holds its I/O lock. */
    void readBlocks(Inode i, long fb, MemorySegment dst) {
        long end = fb + dst.byteSize() / blockSize;
        readRuns(file(i, fb, end).extents(), fb, end, dst);
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
        writeDirect(h, i, offset, src);
    }

    /** The direct path's write; the I/O lock is taken here (reentrant under an append's exclusive one). */
    private void writeDirect(Handle h, Inode i, long offset, MemorySegment src) {
        long len = src.byteSize();
        Lock l = lockIo(h, io(i.ino).readLock());
        boolean sparse;
        try {
            sparse = !writeLocked(i, offset, src, true, offset + len, false);
            if (!sparse) { // under the I/O lock: no write-back puts an older cached block over this write
                buffered.drop(i, offset / blockSize, (offset + len) / blockSize);
            }
        } finally {
            l.unlock();
        }
        if (sparse) {
            l = lockIo(h, io(i.ino).writeLock());
            try {
                trimSpeculative(i);
                writeLocked(i, offset, src, false, offset + len, false);
                buffered.drop(i, offset / blockSize, (offset + len) / blockSize);
            } finally {
                l.unlock();
            }
        }
    }

    /** EFBIG if {@code len} bytes at {@code offset} end past the largest file (EISDIR or EINVAL first). */
    private void requireBelowMax(Inode i, long offset, long len) {
        if (offset > MAX_FILE_SIZE - len) {
            file(i, 0, 0); // EISDIR or EINVAL before EFBIG
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
        if (!writeLocked(i, offset, src, true, newSize, true)) {
            trimSpeculative(i);
            writeLocked(i, offset, src, false, newSize, true);
        }
    }

    /** Commits a size of at least {@code size} for {@code i} (a buffered write's, whose pages were written or dropped). */
    void commitSize(Inode i, long size) {
        update(i, 0, 0, null, old -> Math.max(old, size), true); // after the pages written back before it
    }

    /**
     * {@link #write}, the I/O lock held; false, with nothing done, if {@code mayRefuse} and the write
     * starts past the end of a file whose speculative blocks lie there: it would split them into written
     * and unwritten pieces between holes (a sparse writer would soon run out of extents), so the caller
     * trims them first, under the I/O lock exclusively. The size becomes at least {@code newSize}. An
     * overwrite in place records the modification time in the inode ({@link InodeRecords#markModified})
     * unless it is a {@code writeBack} of cached pages, whose buffered write recorded it.
     */
    private boolean writeLocked(Inode i, long offset, MemorySegment src, boolean mayRefuse, long newSize, boolean writeBack) {
        long len = src.byteSize();
        long first = offset / blockSize, end = first + len / blockSize;
        long dev = len == 0 ? -1 : inPlace(i, first, end); // inside the size: newSize is too
        if (dev >= 0) { // the fast path: written blocks inside the size, overwritten in place
            device.write(dev, src);
            i.dataDirty = true;
            written = true;
            if (!writeBack) {
                records.markModified(i); // no transaction logs the time now: it waits in the inode
            }
            return true;
        }
        Snapshot s = file(i, first, end);
        if (len == 0) {
            return true;
        }
        ExtentList x = s.extents();
        long eof = (s.size() + blockSize - 1) / blockSize;
        if (mayRefuse && offset > s.size() && (s.flags() & (FLAG_SPECULATIVE | FLAG_PREALLOC)) == FLAG_SPECULATIVE
                && lastEnd(i, x) > eof) {
            return false;
        }
        boolean convert = x.firstGap(first, end, true) != null;
        while (convert && !fits(x, first, end, end)) { // a tree before any block (a written one too) is overwritten: its ENOSPC changes nothing
            map.makeRoom(i);
            x = file(i, first, end).extents();
        }
        if (x.firstGap(first, end, false) != null) {
            x = offset <= s.size() && newSize > s.size() ? allocateExtending(i, s.flags(), x, first, end)
                    : allocate(i, first, end, end, FLAG_SPECULATIVE, true);
        }
        for (long fb = first; fb < end; ) {
            int k = x.find(fb);
            long runEnd = Math.min(end, x.end(k));
            device.write(x.deviceBlock(k) + (fb - x.fileBlock(k)), src.asSlice((fb - first) * blockSize, (runEnd - fb) * blockSize));
            fb = runEnd;
        }
        i.dataDirty = true;
        written = true;
        if (convert || newSize > s.size()) {
            finish(i, first, end, newSize);
        }
        return true;
    }

    /** The end of the last extent of {@code i}, whose extents for some range are {@code x}; 0 if it maps nothing. */
    private long lastEnd(Inode i, ExtentList x) {
        ExtentList t = map.tail(i, x);
        return t.count() == 0 ? 0 : t.end(t.count() - 1);
    }

    /**
     * True if the extents of {@code x} and the ones filling the holes of {@code [first, end)} fit where
     * they are (an inline list in the record; a tree always) while they are unwritten and once
     * {@code [first, writtenEnd)} is written; if not, {@link ExtentMap#makeRoom} comes first.
     */
    private static boolean fits(ExtentList x, long first, long end, long writtenEnd) {
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
    private ExtentList allocateExtending(Inode i, int flags, ExtentList x, long first, long end) {
        int k = x.find(end);
        if ((flags & FLAG_PREALLOC) == 0 && k < 0) {
            long next = -k - 1 < x.count() ? x.fileBlock(-k - 1) : ExtentFormat.MAX_FILE_BLOCKS;
            long room = volume.statfs().freeBlocks() / 16; // as XFS, less as the volume fills: others need space too
            long spec = Math.min(next, end + Math.min(room, Math.clamp(end, preallocMin, preallocCap)));
            try {
                return allocate(i, first, spec, end, FLAG_SPECULATIVE, false);
            } catch (NoSpaceException e) {
                // no free block is left for the speculative ones: the write's own holes, filled first, are all mapped
            }
        }
        return allocate(i, first, end, end, FLAG_SPECULATIVE, true);
    }

    /** Maps the holes of {@code [first, end)} in {@code sim} to device blocks no extent has, so they merge with nothing. */
    private static void fillHoles(ExtentList sim, long first, long end) {
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
     * if that gave any back; the speculative allocations themselves never take others' that way.
     *
     * @throws NoSpaceException if no group has a free block left (the holes filled so far stay mapped unwritten)
     */
    private ExtentList allocate(Inode i, long first, long end, long writtenEnd, int pastEofFlag, boolean mayReclaim) {
        long ino = i.ino;
        int rec = records.rec(ino);
        int most = ExtentFormat.MAX_LENGTH; // halved each time no group has that many blocks contiguous
        for (;;) {
            map.prepare(i);
            ExtentList x = file(i, first, end).extents();
            long[] gap = x.firstGap(first, end, false);
            if (gap == null) {
                return x;
            }
            if (!fits(x, first, end, writtenEnd)) {
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
            for (int g = 0; g < geometry.agCount() && !done; g++) {
                AllocationGroup ag = volume.group((start + g) % geometry.agCount());
                int[] busy = {0};
                for (int attempt = 0, used; attempt < RETRIES; attempt += used) {
                    if (ag.needsRefill()) {
                        ag.refillFreeList();
                    }
                    AllocOutcome r;
                    try (Txn txn = Txn.begin(cache, ag.blockItems() + 2 + map.items(i, x))) {
                        i.lock.lock();
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
                            i.lock.unlock();
                        }
                    }
                    if ((used = ag.recover(r, busy)) < 0) {
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

    /** True if {@code x} and {@code y} come from the same place (the record, or the same tree): a transaction reserved for one suits the other. */
    private static boolean sameMap(ExtentList x, ExtentList y) {
        return x.inTree() == y.inTree() && x.header == y.header;
    }

    /**
     * The second transaction of a write: {@code [first, end)} written, the size at least {@code newSize};
     * ordered after the data just written (a flush before its checkpoint, shared with every other in it).
     */
    private void finish(Inode i, long first, long end, long newSize) {
        update(i, first, end, (y, from, to) -> y.setWritten(from, to), size -> Math.max(size, newSize), true);
    }

    /** A change of the extents in a range, for {@link #update}. */
    private interface RangeChange {
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
    private void update(Inode i, long from, long to, RangeChange change, LongUnaryOperator size, boolean afterData) {
        int rec = records.rec(i.ino);
        for (long at = from; ; ) {
            ExtentList plan = null;
            if (change != null) {
                map.prepare(i);
                plan = file(i, 0, 0).extents(); // where the extents are is all the reservation needs
            }
            boolean grow = false;
            try (Txn txn = Txn.begin(cache, 2 + (plan == null ? 0 : map.items(i, plan)))) {
                i.lock.lock();
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
                    long now = nowNanos();
                    InodeFormat.touch(m, rec, now, true);
                    txn.log(b, rec, span);
                    if (afterData) {
                        txn.orderAfterData();
                    }
                    commitData(i, txn);
                    records.clearModified(i, now);
                    if (stop >= to) {
                        return;
                    }
                    at = stop;
                } finally {
                    i.lock.unlock();
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
    private static long stepEnd(ExtentList y, long from, long to) {
        int k = y.find(from);
        if (k < 0) {
            k = -k - 1;
            if (k == y.count() || y.fileBlock(k) >= to) {
                return to;
            }
        }
        return Math.min(to, y.end(k));
    }

    void truncate(Handle h, long size) {
        Inode i = h.requireOpen();
        if (!h.isWritable()) { // as ftruncate(2)
            throw new NamespaceException(Errno.EINVAL, "truncate of inode " + i.ino + " through a handle not open for writing");
        }
        if (size < 0) {
            throw new NamespaceException(Errno.EINVAL, "truncate of inode " + i.ino + " to negative size " + size);
        }
        file(i, 0, 0);
        if (size > MAX_FILE_SIZE) {
            throw new NamespaceException(Errno.EFBIG, "truncate of inode " + i.ino + " to " + size + " bytes, past the largest file, "
                    + MAX_FILE_SIZE + " bytes");
        }
        Lock l = lockIo(h, io(i.ino).writeLock());
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
            update(i, 0, 0, null, any -> size, zeroed); // the zeros reach stable storage before the smaller size does
            buffered.clearPending(i);
        } finally {
            l.unlock();
        }
    }

    /** Commits {@code txn}, a change to {@code i}'s size or extents (what {@link #sync} with dataOnly waits for). */
    private static long commitData(Inode i, Txn txn) {
        long seq = txn.commit();
        i.lastSeq = seq;
        i.lastDataSeq = seq;
        return seq;
    }

    /**
     * Frees every block {@code i} maps at or past file block {@code from}, an extent (or the tail of one)
     * per transaction, the last first: each step leaves written extents inside the size, so a crash part
     * way leaves a sound, shorter mapping.
     */
    void freeFrom(Inode i, long from) {
        Lock l = io(i.ino).writeLock();
        l.lock();
        try {
            buffered.drop(i, from, Long.MAX_VALUE);
            if (from == 0) {
                buffered.clearPending(i);
            }
            release(i, from, TAIL, x -> lastPieceFrom(x, from), true);
        } finally {
            l.unlock();
        }
    }

    /** Forgets {@code i}'s cached pages, dirty ones too, and its pending size. */
    void dropCache(Inode i) {
        Lock l = io(i.ino).writeLock();
        l.lock();
        try {
            buffered.dropAll(i);
        } finally {
            l.unlock();
        }
    }

    private static long[] lastPieceFrom(ExtentList x, long from) {
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
        Lock l = io(ino).writeLock();
        l.lock();
        try {
            long eof = records.readRecord(ino, (b, r) -> (InodeFormat.mode(b, r) & S_IFMT) != S_IFREG
                    || (InodeFormat.flags(b, r) & (FLAG_SPECULATIVE | FLAG_PREALLOC)) != FLAG_SPECULATIVE
                    ? -1 : (InodeFormat.size(b, r) + blockSize - 1) / blockSize);
            if (eof < 0) {
                speculative.remove(ino);
                return;
            }
            release(i, eof, TAIL, x -> lastPieceFrom(x, eof), false);
            try (Txn txn = Txn.begin(cache, 2)) {
                i.lock.lock();
                try {
                    Buffer b = records.lockRecord(txn, ino);
                    MemorySegment m = b.data();
                    InodeFormat.setFlags(m, rec, InodeFormat.flags(m, rec) & ~FLAG_SPECULATIVE);
                    txn.log(b, rec, InodeFormat.INLINE);
                    i.lastSeq = txn.commit();
                    speculative.remove(ino);
                } finally {
                    i.lock.unlock();
                }
            }
        } finally {
            l.unlock();
        }
    }

    /** What {@link #release} loads of a tree for a change at its end: its last extent. */
    private static final long TAIL = -1;

    /**
     * Trims the speculative blocks of every file but {@code self} that this mount preallocated for and
     * whose I/O lock is free at this moment (a file being written keeps its own; so does one sharing a
     * lock stripe with a write in progress here); returns whether any block came back. Open files lose
     * nothing but room to grow: their next append preallocates again.
     */
    private boolean reclaimSpeculative(long self) {
        long before = volume.statfs().freeBlocks();
        for (Long ino : speculative) {
            if (ino == self) {
                continue;
            }
            Lock l = io(ino).writeLock();
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
    private void release(Inode i, long from, long to, Function<ExtentList, long[]> unmap, boolean touch) {
        long ino = i.ino;
        int rec = records.rec(ino);
        ReentrantReadWriteLock.WriteLock l = io(ino).writeLock();
        l.lock();
        try {
            for (int fails = 0; ; ) {
                map.prepare(i);
                ExtentList plan = unmapped(i, from, to);
                ExtentList sim = plan.copy();
                long[] next = unmap.apply(sim);
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
                try (Txn txn = Txn.begin(cache, ag.blockItems() + 2 + map.items(i, plan))) {
                    i.lock.lock();
                    try {
                        ExtentList y = unmapped(i, from, to);
                        if (!sameMap(plan, y) || !map.ready(i, y)) {
                            continue;
                        }
                        long[] piece = unmap.apply(y);
                        if (piece == null || geometry.agOfBlock(piece[0]) != ag.agno || !y.fits()) {
                            continue;
                        }
                        if (ag.releaseData(txn, piece[0], (int) piece[1]) == AllocOutcome.DONE) {
                            BusyExtents.Entry busy = ag.freedData(txn);
                            Buffer b = records.lockRecord(txn, ino);
                            MemorySegment m = b.data();
                            int span = map.store(txn, i, b, y);
                            InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) - piece[1]);
                            long now = nowNanos();
                            if (touch) {
                                InodeFormat.touch(m, rec, now, true);
                            }
                            txn.log(b, rec, Math.max(InodeFormat.INLINE, span));
                            busy.settle(commitData(i, txn));
                            if (touch) {
                                records.clearModified(i, now);
                            }
                            fails = 0;
                            continue;
                        }
                    } finally {
                        i.lock.unlock();
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

    /** {@code i}'s extents for {@link #release}: of {@code [from, to)}, or the last one. */
    private ExtentList unmapped(Inode i, long from, long to) {
        ExtentList x = file(i, 0, 0).extents();
        return to == TAIL ? map.tail(i, x) : map.window(i, x, from, to);
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
        file(i, 0, 0);
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
        Lock l = lockIo(h, io(i.ino).writeLock());
        try {
            Snapshot s = file(i, first, end);
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
                fillHoles(sim, first, end);
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
                    release(i, wholeFirst, wholeFirst + 1, x -> x.punch(wholeFirst, wholeEnd), true);
                }
                return;
            }
            if (zero && whole) { // before the holes are mapped: the extents stay within sim's count all along
                update(i, wholeFirst, wholeEnd, (y, from, to) -> y.setState(from, to, true), old -> old, false);
            }
            if (keep && stop > s.size()) {
                trimSpeculative(i); // what the file keeps past its end from now on is what fallocate asks for, flagged so
            }
            allocate(i, first, end, first, keep ? FLAG_PREALLOC : FLAG_SPECULATIVE, true);
            if (!keep && stop > size) {
                update(i, 0, 0, null, old -> Math.max(old, stop), false);
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
        Lock l = lockIo(h, io(i.ino).writeLock());
        try {
            long at = buffered.size(i);
            requireBelowMax(i, at, src.byteSize());
            if (aligned && at % blockSize == 0) {
                writeDirect(h, i, at, src); // its shared lock is reentrant under the exclusive one
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
        Lock l = lockIo(h, io(i.ino).readLock());
        try {
            ExtentList x = file(i, first, end).extents();
            List<FileExtent> out = new ArrayList<>();
            int k = x.find(first);
            for (k = k >= 0 ? k : -k - 1; k < x.count() && x.fileBlock(k) < end; k++) {
                out.add(new FileExtent(x.fileBlock(k) * blockSize, (long) x.length(k) * blockSize, x.deviceBlock(k) * blockSize,
                        x.unwritten(k)));
            }
            return out;
        } finally {
            l.unlock();
        }
    }

    /**
     * fsync ({@code dataOnly} false) or fdatasync: writes back the file's dirty cached pages, forces the
     * journal to the file's last change, or with {@code dataOnly} to its last change of size or extents
     * (skipped if that is durable already: an overwrite in place changes neither), then makes the data
     * written through {@code h}'s inode durable: by the flush of the checkpoint the force wrote, if one
     * began after the data was written, else by a device flush of its own (shared with concurrent fsyncs).
     */
    void sync(Handle h, boolean dataOnly) {
        Inode i = h.requireOpen();
        buffered.writeBack(i, 0, Long.MAX_VALUE);
        buffered.takeError(i);
        if (!dataOnly) {
            logModified(i);
        }
        boolean data = i.dataDirty;
        i.dataDirty = false; // before the flush: a write after it sets it again
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
            if (data && !done) {
                i.dataDirty = true;
            }
        }
    }

    /**
     * Logs {@code i}'s modification time that a data write recorded without a transaction
     * ({@link Inode#modified}), if any is later than the logged one: a transaction of its own, not forced.
     */
    void logModified(Inode i) {
        long t = i.modified();
        if (t == 0) {
            return;
        }
        int rec = records.rec(i.ino);
        try (Txn txn = Txn.begin(cache, 2)) {
            i.lock.lock();
            try {
                Buffer b = records.lockRecord(txn, i.ino);
                MemorySegment m = b.data();
                if (InodeFormat.mode(m, rec) != 0 && t > InodeFormat.mtime(m, rec)) {
                    InodeFormat.touch(m, rec, t, true);
                    txn.log(b, rec, InodeFormat.INLINE);
                    i.lastSeq = txn.commit(); // times only: fdatasync does not wait for it
                }
            } finally {
                i.lock.unlock();
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

    /** Writes back every file's cached pages, then makes the data written to any file so far durable on the device. */
    void flushAll() {
        logAllModified();
        buffered.writeBackAll();
        if (written) {
            written = false; // before the flush: a write after it sets it again
            flushes.flush();
        }
    }
}
