package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;

import dev.ferrite.io.NoSpaceException;

/**
 * Buffered file I/O through the {@link PageCache}: reads and writes of any offset and length copy
 * between the caller's memory and the file's cached pages; a partial block missing from the cache is
 * read first (from the device where it is written, zeros for a hole, an unwritten extent or past the
 * end). A write marks its pages dirty and, when it ends past the size, moves the inode's
 * {@link Inode#pendingSize}: reads, stat and appends see the new size at once; write-back commits it.
 *
 * <h2>Space</h2>
 * A write that dirties a page whose write-back will need a block or may grow its file's map
 * ({@link FileData#reservation}) reserves them first ({@link PageCache#reserve}); when none is left it
 * writes back every dirty file and trims other files' speculative blocks (what reservations counted
 * twice goes back), tries once more, and then stops with {@link NoSpaceException} after the pages it
 * copied: a short write, whose bytes the size shows and write-back keeps. So a write-back's allocation finds the blocks its pages reserved.
 *
 * <h2>Write-back</h2>
 * A run of consecutive dirty pages is copied into a staging buffer and written through
 * {@link FileData#writeBackRun}, the direct path's write: in place over written blocks, through
 * unwritten extents (allocated, data written and flushed, then converted) into holes, so a crash
 * never shows blocks the file did not write. The size a run commits is at most the pending size, so a
 * last partial block does not round the size up. Write-back happens on fsync and fdatasync, on volume
 * sync and unmount, under pressure (a writer finding half the frames dirty writes back before it dirties
 * more), by age and after the last close (both on the page cache's thread).
 *
 * <h2>The last close</h2>
 * The last close of a file with dirty pages or a pending size does no I/O ({@link #deferClose}): the
 * page cache queues the file with the closer's inode reference, so that the inode, its pending size and
 * pages stay cached, and its thread writes it back a short delay later, then trims the speculative
 * preallocation if no handle is open by then ({@link #closed}). A file unlinked meanwhile is freed with
 * its pages dropped unwritten. A deferred write-back that fails keeps its error with the file (and the
 * inode cached) until the next fsync or last close on it reports it, as Linux's errseq does.
 *
 * <h2>Locks</h2>
 * Buffered reads and writes hold the file's I/O lock shared, then its {@link FilePages#lock} for the
 * copy (and any miss's device read). Write-back holds the I/O lock shared too, and the file's
 * {@link FilePages#writeBack} lock throughout: it copies a run of dirty pages under the pages' lock, lets
 * go of it for the device write, and then marks clean the pages not written again meanwhile (a page
 * written again stays dirty for the next write-back). Its pages stay cached and dirty while the copy is
 * on its way, so readers hit them (no miss reads a block it has not written yet) and eviction passes
 * them; what would drop them (a direct write over them, truncate, punch) takes the write-back lock
 * first. So readers and writers of the file go on during its write-back instead of waiting for the
 * device (under {@code bench dbench}, up to hundreds of milliseconds). Only a run past the end of a
 * file with a speculative tail takes the I/O lock exclusively, to trim the tail first, as a direct
 * write does. Truncate, fallocate and append already hold the I/O lock exclusively when they come here. An
 * operation that finds no frame (all dirty, or their files busy) gives its locks up and writes a file
 * back before going on; one holding the I/O lock exclusively writes its own file back in place, or
 * another whose I/O lock it can take without waiting.
 */
final class BufferedIo implements PageCache.Writer {
    /** Blocks a sequential buffered reader's miss fills at once (128 KiB of 4 KiB blocks). */
    static final int READ_AHEAD = 32;
    private final FileData files;
    private final PageCache cache;
    private final int blockSize;
    /** Inodes with a {@link Inode#pendingSize} ({@link InodeRecords#pendingSizes}). */
    private final AtomicInteger pendingSizes;
    private final InodeCache inodes;

    BufferedIo(FileData files, PageCache cache, int blockSize, AtomicInteger pendingSizes, InodeCache inodes) {
        this.files = files;
        this.inodes = inodes;
        this.pendingSizes = pendingSizes;
        this.cache = cache;
        this.blockSize = blockSize;
        cache.setWriter(this);
    }

    /** {@code i}'s pages, made at its first buffered access. */
    private static FilePages pages(Inode i) {
        FilePages p = i.pages;
        if (p == null) {
            synchronized (i) {
                p = i.pages;
                if (p == null) {
                    i.pages = p = new FilePages(i);
                }
            }
        }
        return p;
    }

    /** Pressure, for a writer about to dirty pages that holds no file's locks: see {@link PageCache#throttle}. */
    void throttle() {
        cache.throttle();
    }

    /** The size the API shows: the committed one, or a buffered write's past it. */
    long size(Inode i) {
        return Math.max(files.committedSize(i), i.pendingSize);
    }

    private void setPending(Inode i, long size) {
        if (i.pendingSize == 0) {
            pendingSizes.incrementAndGet();
        }
        i.pendingSize = size;
    }

    /** Forgets {@code i}'s pending size: the committed size is the file's (write-back committed it, or truncate set it). */
    void clearPending(Inode i) {
        if (i.pendingSize != 0) {
            i.pendingSize = 0;
            pendingSizes.decrementAndGet();
        }
    }

    int read(Handle h, Inode i, long offset, MemorySegment dst) {
        long len = dst.byteSize(), done = 0;
        FilePages p = null;
        for (;;) {
            IoLock l = files.lockShared(h, i);
            try {
                long size = size(i);
                if (offset >= size || len == 0) {
                    return 0;
                }
                long n = Math.min(len, size - offset);
                if (p == null) {
                    p = pages(i);
                }
                p.lock.lock();
                try {
                    done = copy(p, i, offset, dst, done, n, size, false);
                } finally {
                    p.lock.unlock();
                }
                if (done >= n) {
                    return (int) done; // more than n only if a truncate cut the file meanwhile
                }
            } finally {
                l.unlockShared();
            }
            reclaim(p);
        }
    }

    /**
     * Caches {@code src}, just written to the device at the start of a file that has no page cached (a
     * table blob's direct write), as clean pages, so that reads find them as a buffered write would have
     * left them; stops at the first block no frame is found for. Whole blocks.
     */
    void keepClean(Handle h, Inode i, MemorySegment src) {
        FilePages p = pages(i);
        IoLock l = files.lockShared(h, i);
        try {
            p.lock.lock();
            try {
                long blocks = src.byteSize() / blockSize;
                for (long b = 0; b < blocks && p.get(b) < 0; b++) {
                    int f = cache.allocate(p, b);
                    if (f < 0) {
                        return;
                    }
                    MemorySegment.copy(src, b * blockSize, cache.slab(f), cache.offset(f), blockSize);
                    p.put(b, f);
                }
            } finally {
                p.lock.unlock();
            }
        } finally {
            l.unlockShared();
        }
    }

    /**
     * Frames side by side for the first {@code blocks} blocks of {@code i}, a file nobody else reads or
     * writes yet, unmapped: the first, or -1 if the cache has no such run free. The caller fills them,
     * writes them to the device as one direct write ({@link #frames}) and then {@link #mapRun}s them, or
     * {@link #releaseRun}s them on failure: the bytes are copied once, where a bounce buffer and
     * {@link #keepClean} copy them twice.
     */
    int frameRun(Inode i, int blocks) {
        return cache.allocateRun(pages(i), 0, blocks, true);
    }

    /** Run {@code f}'s {@code bytes} of memory. */
    MemorySegment frames(int f, long bytes) {
        return cache.slab(f).asSlice(cache.offset(f), bytes);
    }

    /**
     * Maps run {@code f} of {@code blocks} frames, now on the device as {@code i}'s first blocks, as its
     * clean pages; frees it instead if the file has pages cached already.
     */
    void mapRun(Handle h, Inode i, int f, int blocks) {
        FilePages p = pages(i);
        IoLock l = files.lockShared(h, i);
        try {
            p.lock.lock();
            try {
                if (p.size() > 0) {
                    cache.releaseRun(f, blocks);
                    return;
                }
                p.reserve(blocks);
                for (int b = 0; b < blocks; b++) {
                    p.put(b, f + b);
                }
            } finally {
                p.lock.unlock();
            }
        } finally {
            l.unlockShared();
        }
    }

    /** Frees run {@code f} of {@code blocks} frames, never mapped. */
    void releaseRun(int f, int blocks) {
        cache.releaseRun(f, blocks);
    }

    void write(Handle h, Inode i, long offset, MemorySegment src) {
        FilePages p = pages(i);
        long len = src.byteSize();
        boolean full = false, madeRoom = false;
        for (long done = 0; done < len || len == 0; ) {
            cache.throttle();
            IoLock l = files.lockShared(h, i);
            try {
                long size = size(i);
                if (len == 0) {
                    return;
                }
                long before = done;
                p.lock.lock();
                try {
                    done = copy(p, i, offset, src, done, len, size, true);
                    full = p.outOfSpace;
                    p.outOfSpace = false;
                } finally {
                    p.lock.unlock();
                }
                if (done >= len || full && done > before) { // under the I/O lock: a last close racing this write logs the time or waits
                    files.markModified(i); // logged by the write-back's transaction, or earlier (fsync, last close, sync)
                }
            } finally {
                l.unlockShared();
            }
            if (full) {
                if (madeRoom) {
                    throw noSpace(i, offset, len, done);
                }
                madeRoom = true;
                makeRoom(i);
            } else if (done < len) {
                reclaim(p);
            }
        }
    }

    /**
     * For a writer holding no lock that found no block to reserve: writes back every dirty file, whose
     * pages over speculative blocks and files' metadata estimates go back, and frees other files'
     * speculative blocks, as XFS flushes and trims before it reports a delayed allocation's ENOSPC.
     */
    private void makeRoom(Inode i) {
        writeBackAll();
        files.mapping.reclaimSpeculative(i.ino);
    }

    private NoSpaceException noSpace(Inode i, long offset, long len, long done) {
        return new NoSpaceException("buffered write of " + len + " bytes at offset " + offset + " of inode " + i.ino
                + ": no free block to reserve for file block " + (offset + done) / blockSize + "; the first "
                + done + " bytes were written (a short write)");
    }

    /** Writes {@code src} at {@code offset} of {@code i} through the cache; the caller holds the I/O lock exclusively. */
    void writeLocked(Inode i, long offset, MemorySegment src) {
        modifyLocked(i, offset, src, src.byteSize());
    }

    /** Zeros {@code [offset, offset + len)} of {@code i} through the cache; the caller holds the I/O lock exclusively. */
    void zeroLocked(Inode i, long offset, long len) {
        modifyLocked(i, offset, null, len);
    }

    /**
     * {@link #writeLocked} and {@link #zeroLocked}. A write short of a block's reservation writes the file
     * back (its pages over speculative blocks give theirs back) and tries once more before it stops with
     * NoSpaceException. Zeros reserve as a write does (only over a shared block do they need a block: the
     * page's write-back copies on write), and leave a block that reads zeros on the device (a hole, an
     * unwritten block) alone unless its page is dirty.
     */
    private void modifyLocked(Inode i, long offset, MemorySegment src, long len) {
        FilePages p = pages(i);
        boolean full, madeRoom = false;
        for (long done = 0; done < len; ) {
            p.lock.lock();
            try {
                done = copy(p, i, offset, src, done, len, size(i), true);
                full = p.outOfSpace;
                p.outOfSpace = false;
            } finally {
                p.lock.unlock();
            }
            if (full) {
                if (madeRoom) {
                    throw noSpace(i, offset, len, done);
                }
                madeRoom = true;
                writeBackLocked(p, 0, Long.MAX_VALUE);
            } else if (done < len) {
                reclaimHolding(p);
            }
        }
    }

    /** For a caller holding no lock that found no frame: writes a file back, or lets the files' holders get on. */
    private void reclaim(FilePages p) {
        if (!cache.writeBackOne(p)) {
            Thread.yield(); // no page is dirty: the clean ones are busy in other operations
        }
    }

    /**
     * For a caller holding {@code p}'s I/O lock exclusively that found no frame: writes back {@code p}
     * (its lock is the caller's) or another dirty file whose I/O lock is free now.
     */
    private void reclaimHolding(FilePages p) {
        if (p.dirty > 0) {
            writeBackLocked(p, 0, Long.MAX_VALUE);
            return;
        }
        for (FilePages o : cache.dirtyFiles()) {
            IoLock l = files.io(o.inode.ino);
            if (l.tryLock()) {
                try {
                    writeBackLocked(o, 0, Long.MAX_VALUE);
                    return;
                } finally {
                    l.unlock();
                }
            }
        }
        Thread.yield(); // every dirty file is busy: its holder frees frames when it gets on
    }

    /**
     * Lends bytes {@code [0, length)} of {@code i}'s file to {@code pieces} straight from its cached pages,
     * in order, a piece per run of consecutive frames (read-only views), if every page is cached and their
     * CRC32C is {@code crc}; false, having lent nothing, otherwise. The CRC is computed over the frames (a
     * page read from the device is as unchecked as a copy of it), once per state of the pages: a later
     * lend of the same bytes skips it while no page has been mapped, unmapped or written since
     * ({@link FilePages#changes}). Holds the I/O lock shared and the pages' lock throughout, as a read's
     * copy does, so no write, truncate, drop or eviction changes a page meanwhile: {@code pieces} must be
     * quick and must not use the volume.
     */
    boolean lend(Handle h, Inode i, long length, int crc, TableCursor.Pieces pieces) {
        FilePages p = i.pages;
        if (p == null) {
            return false;
        }
        IoLock l = files.lockShared(h, i);
        try {
            if (size(i) < length) {
                return false;
            }
            long blocks = (length + blockSize - 1) / blockSize;
            p.lock.lock();
            try {
                if (p.checkedAt != p.changes || p.checkedLength != length || p.checkedCrc != crc) {
                    CRC32C sum = new CRC32C(); // a run at a time: CRC32C's per-call cost is most of it for 4 KiB
                    for (long b = 0; b < blocks; ) {
                        int f = p.get(b);
                        if (f < 0) {
                            return false;
                        }
                        int n = run(p, f, b, blocks);
                        sum.update(cache.readOnlySlab(f).asSlice(cache.offset(f), Math.min((long) n * blockSize, length - b * blockSize)).asByteBuffer());
                        b += n;
                    }
                    if ((int) sum.getValue() != crc) {
                        return false;
                    }
                    p.checkedAt = p.changes;
                    p.checkedLength = length;
                    p.checkedCrc = crc;
                }
                for (long b = 0; b < blocks; ) { // every page cached: checked so, and none unmapped since
                    int f = p.get(b), n = run(p, f, b, blocks);
                    for (int k = 0; k < n; k++) {
                        cache.touch(f + k);
                    }
                    pieces.accept(cache.readOnlySlab(f), cache.offset(f), Math.min((long) n * blockSize, length - b * blockSize));
                    b += n;
                }
                return true;
            } finally {
                p.lock.unlock();
            }
        } finally {
            l.unlockShared();
        }
    }

    /** How many of the file's blocks from {@code b} (before {@code end}) lie in consecutive frames from {@code f}, which holds {@code b}; {@code p}'s lock held. */
    private int run(FilePages p, int f, long b, long end) {
        int n = 1;
        while (b + n < end && n < Integer.MAX_VALUE / blockSize && p.get(b + n) == f + n) {
            n++;
        }
        return n;
    }

    /**
     * Copies bytes {@code [from, len)} of {@code m} to ({@code in}) or from the file's pages at
     * {@code offset + from}..., a block at a time; with {@code in} and a null {@code m}, zeros. Returns
     * how far it got: {@code len}, or less where no frame was left or, setting {@link FilePages#outOfSpace},
     * no block to reserve for a page {@code m} dirties. {@code p}'s lock held; a write moves the pending
     * size past {@code size}.
     */
    private long copy(FilePages p, Inode i, long offset, MemorySegment m, long from, long len, long size, boolean in) {
        long pos = from;
        while (pos < len) {
            long at = offset + pos;
            long fb = at / blockSize;
            int within = (int) (at % blockSize);
            int k = (int) Math.min(blockSize - within, len - pos);
            int f = p.get(fb);
            if (m == null && in && (f < 0 || !cache.isDirty(f)) && files.readsZeros(i, fb)) {
                // zeros over zeros: dirtied, the page's write-back would fill its hole or convert its unwritten
                // block (splitting extents) with no block reserved for either
                pos += k;
                continue;
            }
            // looked up before a frame is mapped: a lookup that throws leaves no unfilled frame behind; zeros too
            // (over a shared block the page's write-back copies on write)
            byte reserve = in && (f < 0 || !cache.isDirty(f)) ? files.reservation(i, fb) : PageCache.NONE;
            boolean whole = false;
            if (f < 0) {
                whole = in && k == blockSize;
                f = whole ? cache.allocate(p, fb)
                        : fill(p, i, fb, size, in ? 1 : readAhead(p, fb, (offset + len - 1) / blockSize + 1));
                if (f < 0) {
                    break;
                }
                if (whole) {
                    p.put(fb, f);
                }
            }
            if (reserve != PageCache.NONE && !cache.reserve(p, f, reserve)) {
                if (whole) {
                    cache.drop(p, f); // its contents are no one's
                }
                p.outOfSpace = true;
                break;
            }
            cache.touch(f);
            if (!in) {
                MemorySegment.copy(cache.slab(f), cache.offset(f) + within, m, pos, k);
            } else {
                p.changes++;
                if (m != null) {
                    MemorySegment.copy(m, pos, cache.slab(f), cache.offset(f) + within, k);
                } else {
                    cache.slab(f).asSlice(cache.offset(f) + within, k).fill((byte) 0);
                }
                cache.dirtied(p, f);
                if (at + k > size) {
                    size = at + k;
                    setPending(i, size);
                }
            }
            pos += k;
        }
        return pos;
    }

    /**
     * How many blocks a read that misses block {@code fb} and wants up to block {@code end} fills: the
     * rest of the request, or more if it goes on from where the file's last fill stopped (a sequential
     * reader); at most {@link #READ_AHEAD}, and a quarter of the cache.
     */
    private int readAhead(FilePages p, long fb, long end) {
        long want = Math.max(end - fb, fb == p.readNext ? READ_AHEAD : 1);
        return (int) Math.min(want, Math.clamp(cache.capacity() / 4, 1, READ_AHEAD));
    }

    /**
     * A frame holding file block {@code fb} as the file has it (zeros past {@code size}), mapped; -1 if no
     * frame is free. Up to {@code want} blocks from {@code fb} that are not cached and lie before the end
     * are filled with it, from one read of the file's mapping through a staging buffer (none if they all
     * lie past the end).
     */
    private int fill(FilePages p, Inode i, long fb, long size, int want) {
        long eof = Math.max(fb + 1, (size + blockSize - 1) / blockSize);
        int n = 1;
        while (n < want && fb + n < eof && p.get(fb + n) < 0) {
            n++;
        }
        int[] frames = p.filling;
        int got = 0;
        for (; got < n; got++) {
            int f = cache.allocate(p, fb + got);
            if (f < 0) {
                break;
            }
            frames[got] = f;
        }
        if (got == 0) {
            return -1;
        }
        MemorySegment stage = got == 1 ? cache.frame(frames[0]) : cache.staging();
        // blocks wholly past the end read as zeros whatever the device holds: no read for them (an appender's partial block)
        int inside = (int) Math.clamp((size + blockSize - 1) / blockSize - fb, 0, got);
        try {
            if (inside > 0) {
                files.readBlocks(i, fb, stage.asSlice(0, (long) inside * blockSize));
            }
            for (int k = 0; k < got; k++) {
                int f = frames[k];
                if (got > 1) {
                    MemorySegment.copy(stage, (long) k * blockSize, cache.slab(f), cache.offset(f), blockSize);
                }
                long tail = size - (fb + k) * blockSize;
                if (tail < blockSize) {
                    cache.slab(f).asSlice(cache.offset(f) + Math.max(0, tail), blockSize - Math.max(0, tail)).fill((byte) 0);
                }
                p.put(fb + k, f);
            }
        } catch (RuntimeException e) {
            for (int k = 0; k < got; k++) {
                cache.unused(frames[k]);
            }
            throw e;
        } finally {
            if (got > 1) {
                cache.release(stage);
            }
        }
        p.readNext = fb + got;
        if (inside > 0) {
            cache.filled(got);
        }
        return frames[0];
    }

    /**
     * Drops {@code i}'s pages of file blocks {@code [from, to)}, dirty ones too; the caller holds its I/O
     * lock. After any write-back in flight: its copies land before, not over what replaces the pages.
     */
    void drop(Inode i, long from, long to) {
        FilePages p = i.pages;
        if (p == null || p.size() == 0) {
            return;
        }
        p.writeBack.lock();
        p.lock.lock();
        try {
            if (from == 0 && to == Long.MAX_VALUE) {
                cache.dropAll(p); // a file being freed or truncated to nothing: no per-page lookups
                return;
            }
            for (long b : p.blocks(from, to)) {
                cache.drop(p, p.get(b));
            }
        } finally {
            p.lock.unlock();
            p.writeBack.unlock();
        }
    }

    /**
     * Gives back the blocks {@code i}'s dirty pages in file blocks {@code [from, to)} hold reserved: fallocate
     * mapped unwritten blocks under them, of the file's own ({@link PageCache#backed}; the caller holds its I/O
     * lock exclusively).
     */
    void backed(Inode i, long from, long to) {
        FilePages p = i.pages;
        if (p == null || p.reserved == 0) {
            return;
        }
        p.lock.lock();
        try {
            for (long b : p.blocks(from, to)) {
                cache.backed(p.get(b));
            }
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * Hands {@code blocks} the caller promised ({@link Counters#claim}) to {@code i}'s pages for the
     * reservations of those it dirties next ({@link FilePages#prepaid}); {@link #unprepay} takes back what
     * they did not use. The caller holds the I/O lock exclusively.
     */
    void prepay(Inode i, long blocks) {
        pages(i).prepaid = blocks;
    }

    /** What is left of {@link #prepay}'s blocks, now the caller's again (to {@link Counters#release}). */
    long unprepay(Inode i) {
        FilePages p = pages(i);
        long left = p.prepaid;
        p.prepaid = 0;
        return left;
    }

    /** How many of {@code i}'s pages in file blocks {@code [from, to)} hold a block reserved now. */
    long reservedIn(Inode i, long from, long to) {
        FilePages p = i.pages;
        if (p == null || p.reserved == 0) {
            return 0;
        }
        long n = 0;
        p.lock.lock();
        try {
            for (long b : p.blocks(from, to)) {
                if (cache.holdsBlock(p.get(b))) {
                    n++;
                }
            }
        } finally {
            p.lock.unlock();
        }
        return n;
    }

    /** Drops every page of {@code i} and its pending size: its blocks are being freed. The caller holds its I/O lock exclusively. */
    void dropAll(Inode i) {
        drop(i, 0, Long.MAX_VALUE);
        clearPending(i);
    }

    /** Whether {@code i} has dirty pages now. */
    static boolean hasDirty(Inode i) {
        FilePages p = i.pages;
        return p != null && p.dirty > 0;
    }

    /**
     * Writes back {@code i}'s dirty pages of file blocks {@code [from, to)} under its I/O lock shared, so
     * that the file's readers and writers go on during the device writes; under the lock exclusively only
     * if a run must first trim a speculative tail it would split ({@link FileData#writeBackRunShared}).
     * The caller holds no I/O lock but one it holds exclusively.
     */
    void writeBack(Inode i, long from, long to) {
        FilePages p = i.pages;
        if (p == null || p.dirty == 0 && i.pendingSize == 0) {
            return;
        }
        IoLock l = files.io(i.ino);
        boolean done;
        l.lockShared();
        try {
            done = writeBackPages(p, from, to, true);
        } finally {
            l.unlockShared();
        }
        if (!done) {
            l.lock();
            try {
                writeBackLocked(p, from, to);
            } finally {
                l.unlock();
            }
        }
    }

    @Override
    public void writeBack(FilePages p) {
        writeBack(p.inode, 0, Long.MAX_VALUE);
    }

    /**
     * Throws, once, the error of a write-back of {@code i}'s pages that failed since the last call (fsync
     * and the last close report it, as Linux reports a write-back error at fsync).
     */
    void takeError(Inode i) {
        FilePages p = i.pages;
        if (p == null) {
            return;
        }
        RuntimeException e;
        boolean pinned;
        p.lock.lock();
        try {
            e = p.error;
            p.error = null;
            pinned = p.errorPinned;
            p.errorPinned = false;
        } finally {
            p.lock.unlock();
        }
        if (pinned) {
            inodes.release(i);
        }
        if (e != null) {
            throw e;
        }
    }

    /**
     * Forgets {@code i}'s write-back error, if any, and takes it off the queue of closed files: its file
     * is being freed (its pages dropped), so nothing is left to write back or trim.
     */
    void forget(Inode i) {
        FilePages p = i.pages;
        if (p != null && cache.unqueue(p)) {
            inodes.release(i); // the queue's reference: the freeing caller holds one of its own
        }
        try {
            takeError(i);
        } catch (RuntimeException dead) { // the data it lost died with the file
        }
    }

    /** Whether {@code i}'s file has cached pages, a pending size or a write-back error: freeing it goes through {@link #forget}. */
    static boolean holdsCache(Inode i) {
        FilePages p = i.pages;
        return i.pendingSize != 0 || p != null && (p.size() > 0 || p.error != null);
    }

    /**
     * The last close of {@code i}'s (linked) file, with the closer's inode reference: if it has dirty pages
     * or a pending size, hands the file to the page cache's thread, with the reference (or lets go of it if
     * the file is queued already), and returns true. False, with the reference still the caller's, if there
     * is nothing to write back or the thread is stopped: the caller writes back and trims itself.
     */
    boolean deferClose(Inode i) {
        FilePages p = i.pages;
        if (p == null || p.dirty == 0 && i.pendingSize == 0) {
            return false;
        }
        switch (cache.defer(p)) {
            case PageCache.QUEUED -> {
                return true;
            }
            case PageCache.ALREADY_QUEUED -> {
                inodes.release(i);
                return true;
            }
            default -> {
                return false;
            }
        }
    }

    /**
     * Finishes a last close {@link #deferClose} queued, on the page cache's thread (or at sync or unmount):
     * writes the file back, trims its speculative blocks if no handle is open now, and lets go of the
     * inode, unless a write-back error keeps it for the next fsync.
     */
    @Override
    public void closed(FilePages p) {
        Inode i = p.inode;
        boolean keep = false;
        IoLock l = files.io(i.ino);
        try {
            writeBack(i, 0, Long.MAX_VALUE); // under the I/O lock shared: a new open's reads and writes go on meanwhile
            // then one hold of the lock exclusively: an unlink freeing the file meanwhile frees its blocks (under this lock) after the trim
            l.lock();
            try {
                writeBackLocked(p, 0, Long.MAX_VALUE); // what was written since
                boolean open;
                i.lock();
                try {
                    open = i.opens > 0;
                } finally {
                    i.unlock();
                }
                if (!open) {
                    files.mapping.trimSpeculative(i);
                }
            } finally {
                l.unlock();
            }
        } finally {
            p.lock.lock();
            try {
                keep = p.error != null && !p.errorPinned;
                p.errorPinned |= keep;
            } finally {
                p.lock.unlock();
            }
            if (!keep) {
                inodes.release(i);
            }
        }
    }

    /** Finishes every deferred last close now ({@link #closed}), and waits for those the write-back thread is finishing. */
    void finishClosed() {
        for (FilePages p; (p = cache.takeClosed()) != null; ) {
            try {
                closed(p);
            } finally {
                cache.finished();
            }
        }
        cache.awaitFinishing();
    }

    /** Finishes every closed file and writes back every dirty file (volume sync and unmount). */
    void writeBackAll() {
        finishClosed();
        for (FilePages p : cache.dirtyFiles()) {
            writeBack(p);
        }
    }

    /** What a write-back ({@link #writeBackLocked}) works in: the file's dirty blocks and a run's frames. */
    private static final class WriteBackScratch {
        /** The most blocks a thread's list keeps between write-backs: a file with more cached gets a list of its own. */
        static final int KEPT_BLOCKS = 4096;
        final int[] run = new int[PageCache.RUN_BLOCKS];
        long[] blocks = new long[64];

        long[] blocks(int n) {
            if (n > KEPT_BLOCKS) {
                return new long[n];
            }
            if (blocks.length < n) {
                blocks = new long[Math.min(KEPT_BLOCKS, Math.max(n, 2 * blocks.length))];
            }
            return blocks;
        }
    }

    /** A thread's {@link WriteBackScratch}, there while not in use. */
    private static final ThreadLocal<WriteBackScratch> SCRATCH = new ThreadLocal<>();

    /** {@link #writeBackPages} for a caller holding the file's I/O lock exclusively. */
    void writeBackLocked(FilePages p, long from, long to) {
        writeBackPages(p, from, to, false);
    }

    /**
     * Writes back the dirty pages of {@code p} in file blocks {@code [from, to)}, in runs of consecutive
     * ones; over the whole file, then commits a pending size no page carried (its pages were dropped).
     * The caller holds the file's I/O lock, {@code shared} or exclusively. Each run is copied under the
     * pages' lock, written with it let go (readers and buffered writers use the pages meanwhile), and its
     * pages cleaned unless written again since; {@link FilePages#writeBack} is held throughout. False,
     * with the run left dirty, if a {@code shared} run needs the lock exclusively (see
     * {@link FileData#writeBackRunShared}). A run that fails (no space, EFBIG) is dropped and its error
     * kept for {@link #takeError}: whoever wrote it back (pressure from another file's writer, the
     * write-back thread) does not get another file's error, and a page that cannot be written does not
     * stay dirty for ever.
     */
    private boolean writeBackPages(FilePages p, long from, long to, boolean shared) {
        Inode i = p.inode;
        p.writeBack.lock();
        try {
            if (p.dirty > 0 && !writeBackRuns(p, from, to, shared)) {
                return false;
            }
            if (from == 0 && to == Long.MAX_VALUE && i.pendingSize != 0) {
                p.lock.lock();
                try {
                    if (p.dirty == 0 && i.pendingSize != 0) { // no buffered write dirtied a page meanwhile
                        long pending = i.pendingSize;
                        if (pending > files.committedSize(i)) {
                            files.commitSize(i, pending);
                        }
                        clearPending(i);
                    }
                } finally {
                    p.lock.unlock();
                }
            }
            return true;
        } finally {
            p.writeBack.unlock();
        }
    }

    /** The runs of {@link #writeBackPages}; the caller holds {@link FilePages#writeBack}. */
    private boolean writeBackRuns(FilePages p, long from, long to, boolean shared) {
        Inode i = p.inode;
        WriteBackScratch scratch = SCRATCH.get();
        if (scratch == null) {
            scratch = new WriteBackScratch();
        } else {
            SCRATCH.set(null); // taken: a write-back nested on this thread makes its own
        }
        int[] run = scratch.run;
        MemorySegment stage = cache.staging();
        try {
            long[] blocks;
            int count;
            p.lock.lock();
            try {
                blocks = scratch.blocks(p.blocksBound(from, to));
                count = p.blocks(from, to, blocks);
            } finally {
                p.lock.unlock();
            }
            for (int k = 0; k < count; ) {
                long first, size;
                int n = 0;
                p.lock.lock();
                try {
                    // pages listed may have been evicted since (clean ones) or added (not listed: a later write-back's)
                    while (k < count && !dirtyAt(p, blocks[k])) {
                        k++;
                    }
                    if (k == count) {
                        break;
                    }
                    first = blocks[k];
                    for (; k < count && n < run.length && blocks[k] == first + n && dirtyAt(p, blocks[k]); k++, n++) {
                        int f = p.get(blocks[k]);
                        MemorySegment.copy(cache.slab(f), cache.offset(f), stage, (long) n * blockSize, blockSize);
                        cache.copiedForWriteBack(f);
                        run[n] = f;
                    }
                    size = size(i); // the size these copies belong to
                    if (first * blockSize >= size) { // past the end (a truncate cut them off): nothing to keep
                        for (int r = 0; r < n; r++) {
                            cache.drop(p, run[r]);
                        }
                        continue;
                    }
                } finally {
                    p.lock.unlock();
                }
                long offset = first * blockSize;
                MemorySegment src = stage.asSlice(0, (long) n * blockSize);
                long newSize = Math.min(offset + (long) n * blockSize, size);
                RuntimeException failed = null;
                try {
                    if (!shared) {
                        files.writeBackRun(i, offset, src, newSize);
                    } else if (!files.writeBackRunShared(i, offset, src, newSize)) {
                        return false;
                    }
                } catch (RuntimeException e) { // as Linux: the pages go, the error waits for the file's next fsync
                    failed = e;
                }
                if (failed == null) {
                    cache.wroteBack(n);
                }
                p.lock.lock();
                try {
                    for (int r = 0; r < n; r++) {
                        int f = run[r];
                        if (failed == null) {
                            cache.cleanedIfUnchanged(p, f);
                        } else if (!cache.redirtied(f)) {
                            cache.drop(p, f);
                        }
                    }
                    if (failed != null && p.error == null) {
                        p.error = failed;
                    }
                } finally {
                    p.lock.unlock();
                }
            }
            return true;
        } finally {
            cache.release(stage);
            SCRATCH.set(scratch);
        }
    }

    /** Whether file block {@code b} of {@code p} is cached and dirty ({@code p}'s lock held). */
    private boolean dirtyAt(FilePages p, long b) {
        int f = p.get(b);
        return f >= 0 && cache.isDirty(f);
    }
}
