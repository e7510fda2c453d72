package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeFormat.FLAG_SHARED;
import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * Clones, the sharing half of the xfs_reflink role ({@link Namespace#cloneRange}, Linux's FICLONERANGE):
 * the destination's range maps the source's blocks, whose reference counts ({@link Refcounts}) go up;
 * no data moves. Writes to either file then copy on write ({@link CopyOnWrite}), and frees take a
 * reference off before they free ({@link FileMapping#release}).
 *
 * <h2>Steps</h2>
 * Under both files' I/O locks held exclusively (taken in stripe order), after their dirty cached pages
 * are written back: one transaction flags both inodes {@link InodeFormat#FLAG_SHARED} and moves the
 * destination's size up to the range's end; the destination's old blocks in the range are let go as a
 * punch lets them go; then a transaction per piece (a run of one extent of the source with one count)
 * maps it in the destination and counts it once more, ordered after the data written so far (as a
 * conversion is: the source's overwrites in place are on stable storage before the destination maps their
 * blocks). A crash part way leaves the destination's range
 * partly cloned and the rest a hole (zeros, where the old blocks were let go): each block holds its old
 * contents, zeros, or the source's, and every count matches the extents that map the block.
 */
final class FileClone {
    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeRecords records;
    private final ExtentMap map;
    private final FileData files;
    private final FileMapping mapping;
    private final int blockSize;

    FileClone(Volume volume, BufferCache cache, Geometry geometry, InodeRecords records, ExtentMap map, FileData files) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.records = records;
        this.map = map;
        this.files = files;
        this.mapping = files.mapping;
        this.blockSize = geometry.blockSize();
    }

    /** {@link Namespace#cloneRange}; the handles are the namespace's (EXDEV is the caller's). */
    void cloneRange(Handle src, long srcOffset, Handle dst, long dstOffset, long length) {
        Inode si = src.requireReadable(), di = dst.requireWritable();
        if (dst.isAppend()) {
            throw new NamespaceException(Errno.EBADF, "clone into inode " + di.ino + " through an O_APPEND handle");
        }
        mapping.file(si, 0, 0); // EISDIR, EINVAL for what is not a regular file
        mapping.file(di, 0, 0);
        if (srcOffset < 0 || dstOffset < 0 || length < 0) {
            throw new NamespaceException(Errno.EINVAL, "clone of " + length + " bytes from offset " + srcOffset + " of inode " + si.ino
                    + " to offset " + dstOffset + " of inode " + di.ino + ": none may be negative");
        }
        if (srcOffset % blockSize != 0 || dstOffset % blockSize != 0) {
            throw new NamespaceException(Errno.EINVAL, "clone from offset " + srcOffset + " of inode " + si.ino + " to offset "
                    + dstOffset + " of inode " + di.ino + ": offsets must be multiples of " + blockSize);
        }
        IoLock first = files.io(si.ino), second = files.io(di.ino);
        boolean swap = FileMapping.stripe(di.ino) < FileMapping.stripe(si.ino);
        IoLock a = swap ? files.lockExclusive(dst, di) : files.lockExclusive(src, si);
        IoLock b = null;
        try {
            if (first != second) {
                b = swap ? files.lockExclusive(src, si) : files.lockExclusive(dst, di);
            }
            files.buffered.writeBack(si, 0, Long.MAX_VALUE); // the clone shares what the device holds
            files.buffered.writeBack(di, 0, Long.MAX_VALUE);
            files.buffered.takeError(si);
            files.buffered.takeError(di);
            long srcSize = mapping.file(si, 0, 0).size(), dstSize = mapping.file(di, 0, 0).size();
            if (srcOffset > srcSize) {
                throw new NamespaceException(Errno.EINVAL, "clone from offset " + srcOffset + " of inode " + si.ino
                        + ", past its end (" + srcSize + " bytes)");
            }
            long len = length == 0 ? srcSize - srcOffset : length; // 0: to the end of the source, as FICLONERANGE
            if (len > srcSize - srcOffset) {
                throw new NamespaceException(Errno.EINVAL, "clone of " + len + " bytes from offset " + srcOffset + " of inode " + si.ino
                        + " reaches past its end (" + srcSize + " bytes)");
            }
            boolean partial = len % blockSize != 0; // only at the source's end, and not before the destination's
            if (partial && (srcOffset + len != srcSize || dstOffset + len < dstSize)) {
                throw new NamespaceException(Errno.EINVAL, "clone of " + len + " bytes, not a multiple of " + blockSize
                        + ", must reach the end of source inode " + si.ino + " and not end inside destination inode " + di.ino);
            }
            long blocks = (len + blockSize - 1) / blockSize;
            if (dstOffset > FileData.MAX_FILE_SIZE - blocks * blockSize) {
                throw new NamespaceException(Errno.EFBIG, "clone to offset " + dstOffset + " of inode " + di.ino + " ends past the"
                        + " largest file, " + FileData.MAX_FILE_SIZE + " bytes");
            }
            long sfb = srcOffset / blockSize, dfb = dstOffset / blockSize;
            if (si == di && sfb < dfb + blocks && dfb < sfb + blocks) {
                throw new NamespaceException(Errno.EINVAL, "clone of blocks [" + sfb + ", +" + blocks + ") of inode " + si.ino
                        + " onto blocks [" + dfb + ", +" + blocks + ") of itself: the ranges overlap");
            }
            if (blocks == 0) {
                return;
            }
            volume.requireIncompatFeature(SuperblockFormat.INCOMPAT_REFLINK);
            // the destination's map, promised first: its remaps and the punch before them may make a tree or
            // refill its reserve, a block more for every 32 extents mapped (as pages reserve for theirs); an
            // inline list that keeps room for all of them and a split takes nothing
            long extents = mapping.file(si, sfb, sfb + blocks).extents().count();
            ExtentList dx = mapping.file(di, dfb, dfb + blocks).extents();
            long claimed = !dx.inTree() && dx.fits(extents + 1) ? 0
                    : files.claim(di, extents / PageCache.PAGES_PER_META_BLOCK, dfb, dfb + blocks, true);
            try {
                flag(si, di, dstOffset + len);
                files.buffered.drop(di, dfb, dfb + blocks);
                mapping.release(di, dfb, dfb + 1, x -> x.punch(dfb, dfb + blocks), true);
                share(si, sfb, di, dfb, blocks);
            } finally {
                volume.counters().release(claimed);
            }
        } finally {
            if (b != null) {
                b.unlock();
            }
            a.unlock();
        }
    }

    /** {@link Namespace#cloneFile}: checked as {@link #cloneRange} before the destination is truncated. */
    void cloneFile(Handle src, Handle dst) {
        Inode si = src.requireReadable(), di = dst.requireWritable();
        if (dst.isAppend()) {
            throw new NamespaceException(Errno.EBADF, "clone into inode " + di.ino + " through an O_APPEND handle");
        }
        mapping.file(si, 0, 0);
        mapping.file(di, 0, 0);
        files.truncate(dst, 0);
        cloneRange(src, 0, dst, 0, 0);
    }

    /** One transaction: both inodes flagged {@link InodeFormat#FLAG_SHARED}, the destination's size at least {@code dstEnd}. */
    private void flag(Inode si, Inode di, long dstEnd) {
        Inode lo = si.ino <= di.ino ? si : di, hi = lo == si ? di : si;
        long loBlock = records.block(lo.ino), hiBlock = records.block(hi.ino);
        try (Txn txn = Txn.begin(cache, 4)) {
            lo.lock();
            try {
                if (hi != lo) {
                    hi.lock();
                }
                try {
                    Buffer first = records.lockRecord(txn, loBlock <= hiBlock ? lo.ino : hi.ino); // blocks in order
                    Buffer second = records.lockRecord(txn, loBlock <= hiBlock ? hi.ino : lo.ino);
                    for (Inode i : hi == lo ? new Inode[] {lo} : new Inode[] {lo, hi}) {
                        Buffer b = records.block(i.ino) == first.block() ? first : second;
                        MemorySegment m = b.data();
                        int rec = records.rec(i.ino);
                        InodeFormat.setFlags(m, rec, InodeFormat.flags(m, rec) | FLAG_SHARED);
                        if (i == di && dstEnd > InodeFormat.size(m, rec)) {
                            InodeFormat.setSize(m, rec, dstEnd);
                            InodeFormat.touch(m, rec, nowNanos(), true);
                        }
                        txn.log(b, rec, InodeFormat.INLINE);
                    }
                    long seq = txn.commit();
                    for (Inode i : new Inode[] {si, di}) {
                        i.lastSeq = seq;
                        i.lastDataSeq = seq;
                    }
                } finally {
                    if (hi != lo) {
                        hi.unlock();
                    }
                }
            } finally {
                lo.unlock();
            }
        }
    }

    /**
     * Maps source blocks {@code [sfb, sfb + n)} at destination blocks from {@code dfb} (a hole now), a
     * piece per transaction: a run of one source extent with one count, counted once more.
     */
    private void share(Inode si, long sfb, Inode di, long dfb, long n) {
        int rec = records.rec(di.ino);
        for (long fb = sfb, fails = 0; fb < sfb + n; ) {
            ExtentList sx = mapping.file(si, fb, sfb + n).extents();
            int k = sx.find(fb);
            if (k < 0) { // a hole stays one
                fb = -k - 1 < sx.count() ? Math.min(sfb + n, sx.fileBlock(-k - 1)) : sfb + n;
                continue;
            }
            long dev = sx.deviceBlock(k) + (fb - sx.fileBlock(k));
            boolean unwritten = sx.unwritten(k);
            int want = (int) (Math.min(sfb + n, sx.end(k)) - fb);
            long at = dfb + (fb - sfb);
            AllocationGroup ag = volume.group(geometry.agOfBlock(dev));
            map.prepare(di);
            ExtentList plan = mapping.file(di, at, at + want).extents();
            ExtentList sim = plan.copy();
            sim.insert(at, dev, want, unwritten);
            if (!sim.fits()) {
                map.makeRoom(di);
                continue;
            }
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(cache, 2 + map.items(di, plan) + ag.refcounts.items(1))) {
                di.lock();
                try {
                    ExtentList y = mapping.file(di, at, at + want).extents();
                    if (!FileMapping.sameMap(plan, y) || !map.ready(di, y)) {
                        continue;
                    }
                    if (!ag.refcounts.lockForChange(txn)) {
                        if (fails++ == RETRIES) {
                            throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its trees");
                        }
                        ag.refillFreeList();
                        continue;
                    }
                    long run = ag.refcounts.run(txn, dev, want);
                    int len = Refcounts.runLength(run), count = Refcounts.runCount(run);
                    ag.refcounts.set(txn, dev, len, count, count + 1);
                    y.insert(at, dev, len, unwritten);
                    Buffer b = records.lockRecord(txn, di.ino);
                    MemorySegment m = b.data();
                    int span = Math.max(InodeFormat.INLINE, map.store(txn, di, b, y));
                    InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) + len);
                    InodeFormat.touch(m, rec, nowNanos(), true);
                    txn.log(b, rec, span);
                    // after the source's data: an overwrite in place not yet flushed must not show through the
                    // destination as the bytes it replaced, once the destination maps the block
                    txn.orderAfterData();
                    FileMapping.commitData(di, txn);
                    fb += len;
                    fails = 0;
                } finally {
                    di.unlock();
                }
            }
        }
    }
}
