package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeRecords.SYMLINK_BLOCK;
import static dev.ferrite.dir.InodeRecords.nowNanos;
import static dev.ferrite.dir.InodeRecords.requireFixable;

/**
 * Handles and orphans: opening a handle on an inode and its last close; an inode's loss of a link in
 * the unlinking transaction ({@link #dropLink}: its last link makes it an orphan, or frees it); and
 * freeing an orphan (at its last close, after the unlinking operation, or at mount for those a crash
 * left) a step at a time, each step reserving its log space before it takes the orphan's lock.
 */
final class Orphans {
    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    private final InodeRecords records;
    private final DirContents dirs;
    private final FileData files;
    /** Frees what a table's values hold outside its tree ({@link Tables}), before an orphaned table is freed; null before tables are set up. */
    volatile Consumer<Inode> tableRelease;

    Orphans(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes, InodeRecords records, DirContents dirs,
            FileData files) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
        this.records = records;
        this.dirs = dirs;
        this.files = files;
    }

    /**
     * After {@link #openIno} missed {@code ino}, which {@code name} named: returns it, to pass in after the
     * next lookup. A name that names the same unopenable inode twice running is not a race with an unlink
     * (which takes the name away) but a name for an inode without links: corruption.
     */
    long requireNotMissedTwice(long missed, long ino, String name) {
        if (ino == missed) {
            throw new CorruptionException(records.block(ino), InodeFormat.STRUCTURE, name + " names inode " + ino
                    + ", which has no links or is free");
        }
        return ino;
    }

    /**
     * Frees orphan {@code c} (no handle open, no links; its lock not held: each step reserves its log
     * space before taking it): its directory tree and reserve a block per transaction, then the inode and
     * its orphan record in one. Each step leaves a consistent volume, so a crash part way through is
     * finished by the next mount. Nobody else changes an orphan meanwhile: with no links and no handles
     * it cannot be reached.
     */
    void inactivate(Inode c) {
        long ino = c.ino;
        AllocationGroup ag = volume.group(geometry.agOfInode(ino));
        long[] extent = null; // a file's one extent, freed with the inode
        if ((records.modeOf(ino) & InodeFormat.S_IFMT) == InodeFormat.S_IFREG) {
            // drops its cached pages, dirty ones too, unwritten; frees its blocks unless one extent, its extent tree once it maps nothing
            extent = files.freeAllButOneExtent(c);
            files.buffered.forget(c);
        } else {
            if ((records.modeOf(ino) & InodeFormat.S_IFMT) == InodeFormat.S_IFTABLE) {
                Consumer<Inode> release = tableRelease;
                if (release != null) {
                    release.accept(c); // the blobs its keys name, before the keys go
                }
                dirs.emptyTree(c); // a table's tree may be of any size: emptied a key per transaction first
            }
            dirs.takeDown(c);
        }
        freeRemoteBlock(c);
        Inode[] touched = {c};
        long[] free = extent;
        AllocationGroup eg = free == null ? null : volume.group(geometry.agOfBlock(free[0])); // the extent's group
        BusyExtents.Entry[] busy = {null};
        for (int fails = 0, refills = 0; ; ) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            if (eg != null && eg != ag && eg.needsRefill()) {
                eg.refillFreeList();
            }
            boolean refill = false;
            try (Txn txn = Txn.begin(cache, dirs.changeItems(ag, touched) + (eg == null ? 0 : eg.blockItems() + 2))) {
                c.lock();
                try {
                    // the extent's free takes its group's AGF after this group's AGI and before the inode's
                    // block: no transaction takes an AGI after an AGF (a free-list refill takes its group's
                    // AGI, then its AGF), nor an AGF after a record (an allocation takes the AGF, then the
                    // record of the file it maps into)
                    if (eg != null) {
                        txn.lock(ag.agi);
                        refill = !eg.lockForRelease(txn);
                    }
                    if (!refill && records.applyChange(txn, ag, touched, t -> {
                        if (eg != null) {
                            if (eg.releaseData(t, free[0], (int) free[1]) != AllocOutcome.DONE) {
                                throw new IllegalStateException("group " + eg.agno + " refused a free under its AGF");
                            }
                            busy[0] = eg.freedData(t);
                        }
                        if (ag.freeInode(t, geometry.agInode(ino)) != AllocOutcome.DONE) {
                            throw new IllegalStateException("group " + ag.agno + " ran short of its inode free list under its AGI");
                        }
                        ag.removeOrphan(t, geometry.agInode(ino));
                    })) {
                        if (busy[0] != null) {
                            busy[0].settle(c.lastSeq); // busy until the free is durable: no other data lands there before
                        }
                        break;
                    }
                } finally {
                    c.unlock();
                }
            }
            if (refill) { // the extent group's free list short: refilled with no lock held
                if (refills++ == InodeRecords.RETRIES) {
                    throw new NoSpaceException("allocation group " + eg.agno + " cannot refill the free list of its free-space trees");
                }
                eg.refillFreeList();
                continue;
            }
            fails = requireFixable(ag, fails);
        }
        ag.reclaimEmptyChunks();
    }

    /** Frees the block of orphan {@code c}'s remote fork (a long symlink's target), if it has one. */
    private void freeRemoteBlock(Inode c) {
        long ino = c.ino;
        int rec = records.rec(ino);
        long blk = records.readRecord(ino, (b, r) -> InodeFormat.fork(b, r) == InodeFormat.FORK_REMOTE ? InodeFormat.remoteBlock(b, r) : 0L);
        if (blk == 0) {
            return;
        }
        records.requireDataBlock(ino, blk, "symlink target block");
        dirs.freeBlock(c, blk, 3, () -> records.readRecord(ino, (b, r) -> InodeFormat.fork(b, r) == InodeFormat.FORK_REMOTE
                && InodeFormat.remoteBlock(b, r) == blk), txn -> {
            Buffer tb;
            do {
                tb = cache.get(blk, SymlinkFormat.MAGIC, ino, SYMLINK_BLOCK);
            } while (!txn.lock(tb));
            cache.free(txn, tb, SymlinkFormat.FREED_MAGIC);
            Buffer b = records.lockRecord(txn, ino);
            MemorySegment m = b.data();
            InodeFormat.setFork(m, rec, InodeFormat.FORK_EMPTY);
            InodeFormat.setRemoteBlock(m, rec, 0);
            InodeFormat.setInlineUsed(m, rec, 0);
            InodeFormat.setBlocks(m, rec, 0);
            txn.log(b, rec, InodeFormat.INLINE + 8);
        });
    }

    /** Frees every orphan left by a crash (or by an unmount with handles open); at mount. */
    int recoverOrphans() {
        int n = 0;
        for (int g = 0; g < geometry.agCount(); g++) {
            for (long ino : volume.group(g).orphanInodes()) {
                Inode c = inodes.acquire(ino);
                try {
                    inactivate(c);
                    n++;
                } finally {
                    inodes.release(c);
                }
            }
        }
        return n;
    }

    /**
     * A handle on {@code ino}; null if it lost its last link, was freed or was reused meanwhile (look it up again).
     * The first open of a file whose blocks past its end a crash left (or an unmount with it open) trims them.
     */
    Handle openIno(long ino) {
        return openIno(ino, Namespace.O_RDWR);
    }

    /** Each thread's record as an open reads it (twice, nothing else between): an open allocates no attributes. */
    private static final ThreadLocal<StatBuffer> OPENING = ThreadLocal.withInitial(StatBuffer::new);

    /** {@link #openIno(long)} with {@code open} flags. */
    Handle openIno(long ino, int flags) {
        StatBuffer s = OPENING.get();
        records.readRecord(ino, s.reader);
        if (s.mode() == 0) {
            return null; // freed since its name was read
        }
        int gen = s.generation();
        Inode i = inodes.acquire(ino);
        boolean trim;
        i.lock();
        try {
            records.readRecord(ino, s.reader);
            if (s.mode() == 0 || s.generation() != gen || s.nlink() == 0) {
                inodes.release(i);
                return null;
            }
            trim = i.opens++ == 0 && speculative(s.mode(), s.flags());
        } finally {
            i.unlock();
        }
        Handle h = new Handle(this, i, flags);
        if (trim) {
            try {
                files.mapping.trimSpeculative(i);
            } catch (RuntimeException e) {
                try {
                    h.close();
                } catch (RuntimeException again) {
                    e.addSuppressed(again);
                }
                throw e;
            }
        }
        return h;
    }

    /** A regular file with blocks past its end for {@link FileMapping#trimSpeculative} to free. */
    private static boolean speculative(int mode, int flags) {
        return (mode & InodeFormat.S_IFMT) == InodeFormat.S_IFREG
                && (flags & (InodeFormat.FLAG_SPECULATIVE | InodeFormat.FLAG_PREALLOC)) == InodeFormat.FLAG_SPECULATIVE;
    }

    Handle openCreated(long ino) {
        return openCreated(ino, Namespace.O_RDWR);
    }

    Handle openCreated(long ino, int flags) {
        Handle h = openIno(ino, flags);
        if (h == null) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " was removed as it was created");
        }
        return h;
    }

    /**
     * The last close of an unlinked inode frees it (its cached pages dropped unwritten); of a file with
     * dirty cached pages or a pending size, hands it to the page cache's thread with this reference, which
     * writes it back and then trims it ({@link BufferedIo#deferClose}); of any other file, trims what
     * writes mapped past its end (after the lock is dropped: that reserves log space first). A write-back
     * error no fsync reported yet is thrown, once. After the unmount it does nothing but throw
     * VolumeShutdownException: the cache is gone, and the next mount frees an orphan the unmount left.
     */
    void closeHandle(Inode i) {
        volume.requireOpen();
        int last = -1; // 0: only write back, 1: free the orphan, 2: also trim the file
        i.lock();
        try {
            i.opens--;
            if (i.opens == 0) {
                last = records.readRecord(i.ino, (b, rec) -> InodeFormat.mode(b, rec) == 0 ? 0 : InodeFormat.nlink(b, rec) == 0 ? 1
                        : speculative(InodeFormat.mode(b, rec), InodeFormat.flags(b, rec)) ? 2 : 0);
            }
        } finally {
            i.unlock();
        }
        boolean handedOver = false;
        try {
            if (last == 1) {
                inactivate(i);
            } else if (last >= 0) {
                files.logModified(i); // a write's time not yet logged: the inode may leave the cache after this
                handedOver = files.buffered.deferClose(i);
                if (!handedOver) { // nothing to write back, or unmounting
                    try {
                        files.buffered.writeBack(i, 0, Long.MAX_VALUE);
                    } catch (RuntimeException e) { // no handle is left to report it through fsync: the pages go, the error to the closer
                        files.dropCache(i);
                        throw e;
                    }
                    if (last == 2) {
                        files.mapping.trimSpeculative(i);
                    }
                }
                files.buffered.takeError(i);
            }
        } finally {
            if (!handedOver) {
                inodes.release(i);
            }
        }
    }

    /**
     * After a change that took {@code c}'s {@code last} link (in group {@code ag}), its locks dropped:
     * gives back empty inode chunks, and frees {@code c} if it is an orphan no handle holds ({@code free}),
     * a step at a time, each step reserved before it takes the orphan's lock.
     */
    void afterUnlink(AllocationGroup ag, Inode c, boolean last, boolean free) {
        if (last) {
            ag.reclaimEmptyChunks();
        }
        if (free) {
            inactivate(c);
        }
    }

    /**
     * In {@code txn}: inode {@code c} loses a name; a directory loses all its links. With {@code last}, it
     * goes to its group's orphans ({@code orphan}) or is freed.
     */
    void dropLink(Txn txn, Inode c, boolean isDir, boolean last, boolean orphan) {
        Buffer b = records.lockRecord(txn, c.ino);
        int rec = records.rec(c.ino);
        MemorySegment m = b.data();
        InodeFormat.setNlink(m, rec, isDir ? 0 : InodeFormat.nlink(m, rec) - 1);
        InodeFormat.touch(m, rec, nowNanos(), false);
        txn.log(b, rec + InodeFormat.NLINK, 4);
        InodeRecords.logTimes(txn, b, rec, false);
        if (!last) {
            return;
        }
        AllocationGroup ag = volume.group(geometry.agOfInode(c.ino));
        if (orphan) {
            ag.addOrphan(txn, geometry.agInode(c.ino));
        } else {
            if (ag.freeInode(txn, geometry.agInode(c.ino)) != AllocOutcome.DONE) {
                throw new IllegalStateException("group " + ag.agno + " ran short of its inode free list under its AGI");
            }
            c.dirTree = null;
        }
    }
}
