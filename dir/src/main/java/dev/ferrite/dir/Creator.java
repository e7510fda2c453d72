package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.DirContents.READY;
import static dev.ferrite.dir.DirContents.RESERVE_FILL;
import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFLNK;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.logUsed;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * The transaction that makes a new inode and its name together (XFS's {@code xfs_create} below the name
 * checks): picks a group (directories spread by a rotor, the rest near their parent), reserves log space
 * and frames before the parent's lock, then under it allocates the inode from the group's AGI, adds the
 * entry and writes the new record, retrying on the group's answers with no lock held. It takes the locks
 * in {@link Namespace}'s order: the parent's inode lock, the group's AGI (and AGF), inode blocks by number,
 * then the parent's tree nodes.
 */
final class Creator {
    /** What {@link #allocAndInsert} came to; only {@link Created} changed anything. */
    sealed interface Outcome permits Created, Refused {
    }

    /** What one {@link #tryCreate} came to; only {@link Created} changed anything. */
    sealed interface Attempt permits Created, Refused, Retry {
    }

    /** The new inode, its entry added: its number in the key's {@link EntryKey#made}. */
    enum Created implements Outcome, Attempt {
        DONE
    }

    /** Nothing was created, and nothing changed. */
    enum Refused implements Outcome, Attempt {
        /** The name is there already. */
        EXISTS,
        /** Under its lock the directory turned out to need {@link DirContents#prepare} again, or more log space than was reserved. */
        AGAIN
    }

    /** The group's answer, other than {@link AllocOutcome#DONE}, that says how to retry. */
    record Retry(AllocOutcome why) implements Attempt {
    }

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    private final InodeRecords records;
    private final DirContents dirs;
    private final AtomicInteger rotor = new AtomicInteger();

    Creator(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes, InodeRecords records, DirContents dirs) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
        this.records = records;
        this.dirs = dirs;
    }

    /**
     * Refuses a create before {@link DirContents#prepare} when no group could then give it an inode: prepare's
     * conversion and refill commit in transactions of their own, so a create failing after them for want
     * of an inode would leave its directory's layout (not its entries) changed. A group qualifies with a
     * free inode, or with room for a chunk beyond the blocks prepare may take and those every group holds
     * back for its free lists. Creates racing for the last inodes can still pass this together.
     */
    void requireInodeRoom() {
        long chunkRoom = Geometry.CHUNK_BLOCKS + AllocationGroup.HELD_BACK + RESERVE_FILL;
        for (int g = 0, n = geometry.agCount(); g < n; g++) {
            AllocationGroup ag = volume.group(g);
            if (ag.freeInodes() > 0 || ag.freeBlockCount() >= chunkRoom) {
                return;
            }
        }
        throw new NoSpaceException("no allocation group has a free inode or room for an inode chunk");
    }

    /**
     * Allocates the inode (into {@code key}'s {@link EntryKey#made}) and adds its entry, or says why not
     * ({@link Refused}) with nothing changed. Each attempt reserves its log space before it takes {@code d}'s
     * lock; a group's fixes and waits run with no lock held. With {@code open}, also opens the new inode for
     * a handle into {@code key}'s {@link EntryKey#opened} if its lock is free (while {@code d}'s lock is held
     * nobody can unlink it; only trying keeps the lock order when its number is below {@code d}'s); else
     * leaves that null. {@code searched}: the caller has looked the name up already (and found it absent).
     */
    Outcome allocAndInsert(Inode d, EntryKey key, int mode, byte[] linkTarget, boolean open, boolean searched) {
        int type = mode & S_IFMT;
        boolean remote = isRemote(linkTarget);
        int n = geometry.agCount();
        int first = type == S_IFDIR ? Math.floorMod(rotor.getAndIncrement(), n) : geometry.agOfInode(d.ino);
        boolean skipFull = false; // pass over groups that look full, unless all do (the hint may be stale)
        for (int k = 0; k < n && !skipFull; k++) {
            AllocationGroup ag = volume.group((first + k) % n);
            skipFull = ag.freeInodes() > 0 || ag.mayAddChunk();
        }
        for (int k = 0; k < n; k++) {
            AllocationGroup ag = volume.group((first + k) % n);
            boolean chunk = ag.freeInodes() == 0;
            if (chunk && skipFull && !ag.mayAddChunk()) {
                continue;
            }
            for (int attempt = 0, busy = 0; attempt < RETRIES; attempt++) {
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                AllocOutcome r = remote && chunk ? ensureFreeInode(ag) : AllocOutcome.DONE;
                if (r == AllocOutcome.DONE) {
                    chunk &= !remote;
                    int[] frames = remote ? volume.reserveFrames(1) : chunk ? volume.reserveFrames(Geometry.CHUNK_BLOCKS) : null;
                    int dirItems = dirs.dirItems(d);
                    int items = 4 + ag.allocInodeItems(chunk) + dirItems + (remote ? ag.blockItems() + 1 : 0);
                    try (Txn txn = Txn.begin(cache, items)) {
                        d.lock.lock();
                        try {
                            records.requireDir(d.ino);
                            if (searched && dirs.find(d, key, true) != null) {
                                return Refused.EXISTS;
                            }
                            if (type == S_IFDIR && records.statIno(d.ino).nlink() >= Namespace.MAX_LINKS) {
                                if (dirs.find(d, key, true) != null) {
                                    return Refused.EXISTS;
                                }
                                throw new NamespaceException(Errno.EMLINK, "directory " + d.ino + " has " + Namespace.MAX_LINKS + " links");
                            }
                            if (dirs.step(d, key.length()) != READY || dirs.dirItems(d) > dirItems) {
                                return Refused.AGAIN;
                            }
                            switch (tryCreate(txn, ag, frames, d, key, mode, linkTarget, searched)) {
                                case Refused refused -> {
                                    return refused;
                                }
                                case Retry retry -> r = retry.why();
                                case Created created -> {
                                    long seq = txn.commit();
                                    d.lastSeq = seq;
                                    Inode c = inodes.acquire(key.made);
                                    c.lastSeq = seq;
                                    c.lastDataSeq = seq;
                                    c.dirTree = null;
                                    key.opened = null;
                                    if (open && c.lock.tryLock()) {
                                        c.opens++; // keeps the reference for the handle
                                        c.lock.unlock();
                                        key.opened = c;
                                    } else {
                                        inodes.release(c);
                                    }
                                    return created;
                                }
                            }
                        } finally {
                            d.lock.unlock();
                        }
                    } finally {
                        volume.unreserveFrames(frames);
                    }
                }
                if (r == AllocOutcome.NO_SPACE) {
                    break;
                }
                if (r == AllocOutcome.NEEDS_CHUNK) {
                    chunk = true;
                } else if (r == AllocOutcome.BUSY && busy < AllocationGroup.BUSY_RETRIES) {
                    ag.awaitBusy(busy++);
                    attempt--;
                } else {
                    ag.refillFreeList();
                }
            }
        }
        throw new NoSpaceException("no allocation group has a free inode or room for an inode chunk");
    }

    /** True for a symlink target too long for the inline area: it gets a block of its own. */
    boolean isRemote(byte[] linkTarget) {
        return linkTarget != null && linkTarget.length > dirs.inlineCapacity;
    }

    /**
     * Before a create that takes a block besides its inode: a free inode in {@code ag}, made in a
     * transaction of its own if needed ({@link AllocationGroup#ensureFreeInode}).
     */
    private AllocOutcome ensureFreeInode(AllocationGroup ag) {
        int[] frames = volume.reserveFrames(Geometry.CHUNK_BLOCKS);
        try {
            return ag.ensureFreeInode(frames);
        } finally {
            volume.unreserveFrames(frames);
        }
    }

    /**
     * One attempt: the new inode (into {@code key}'s {@link EntryKey#made}); or, with nothing changed, {@link Refused#EXISTS} or the group's answer
     * ({@link AllocationGroup#allocInode}) to retry on. Unless the caller has {@code searched} the directory
     * for the name already (an inline one), the entry goes in first when the inode number is known (a free
     * one is listed): the tree's putIfAbsent is the existence check, and allocating a listed inode cannot
     * fail after it. A new chunk's first inode is not known until the chunk is made, so then the name is
     * looked up first.
     */
    private Attempt tryCreate(Txn txn, AllocationGroup ag, int[] frames, Inode d, EntryKey key, int mode, byte[] linkTarget,
                              boolean searched) {
        int type = mode & S_IFMT;
        boolean remote = isRemote(linkTarget);
        txn.lock(ag.agi);
        if (ag.inodeListLow()) {
            return new Retry(AllocOutcome.NEEDS_REFILL);
        }
        boolean listed = ag.hasFreeInode(txn);
        if (!listed && (frames == null || remote)) {
            return new Retry(AllocOutcome.NEEDS_CHUNK);
        }
        long targetBlock = 0;
        if (remote) {
            // the first change: it may fail, and then nothing has changed; with a listed inode and the
            // name known absent (searched), nothing after it can fail
            AllocOutcome block = ag.allocBlocks(txn, 1);
            if (block != AllocOutcome.DONE) {
                return new Retry(block);
            }
            targetBlock = ag.allocatedBlock(txn);
        } else if (!listed) {
            txn.lock(ag.agf);
        }
        if (!searched && !listed && dirs.find(d, key, true) != null) {
            return Refused.EXISTS; // looked up before the records are held: reading a record waits for its lock
        }
        long expected = listed ? geometry.inodeNumber(ag.agno, ag.nextFreeInode(txn)) : 0;
        records.lockRecords(txn, d.ino, expected);
        boolean first = !searched && listed; // a directory not searched is a tree (under its lock it stays one)
        if (first && !dirs.insertEntry(txn, d, key, expected, type)) {
            return Refused.EXISTS;
        }
        AllocOutcome made = ag.allocInode(txn, remote ? null : frames, mode, 0, 0, type == S_IFDIR ? 2 : 1, nowNanos());
        if (made != AllocOutcome.DONE) {
            return new Retry(made);
        }
        long ino = ag.allocatedInode(txn);
        if (listed && ino != expected) {
            throw new IllegalStateException("group " + ag.agno + " allocated inode " + ino + ", not " + expected);
        }
        Buffer nb = records.lockRecord(txn, ino);
        MemorySegment m = nb.data();
        int rec = records.rec(ino);
        if (type == S_IFDIR) {
            InodeFormat.setParent(m, rec, d.ino);
            InodeFormat.setFork(m, rec, InodeFormat.FORK_INLINE);
        } else if (remote) {
            Buffer tb = cache.createEmpty(txn, targetBlock, SymlinkFormat.MAGIC, ino, frames[0]);
            frames[0] = -1;
            txn.log(tb, SymlinkFormat.LENGTH, SymlinkFormat.write(tb.data(), linkTarget));
            InodeFormat.setFork(m, rec, InodeFormat.FORK_REMOTE);
            InodeFormat.setRemoteBlock(m, rec, targetBlock);
            InodeFormat.setInlineUsed(m, rec, 8);
            InodeFormat.setSize(m, rec, linkTarget.length);
            InodeFormat.setBlocks(m, rec, 1);
        } else if (type == S_IFLNK) {
            InodeFormat.setFork(m, rec, InodeFormat.FORK_INLINE);
            MemorySegment.copy(linkTarget, 0, m, java.lang.foreign.ValueLayout.JAVA_BYTE, rec + InodeFormat.INLINE, linkTarget.length);
            InodeFormat.setInlineUsed(m, rec, linkTarget.length);
            InodeFormat.setSize(m, rec, linkTarget.length);
        }
        logUsed(txn, nb, rec);
        if (!first) {
            dirs.insertAbsent(txn, d, key, ino, type);
        }
        Buffer pb = records.lockRecord(txn, d.ino);
        int prec = records.rec(d.ino);
        if (type == S_IFDIR) {
            InodeFormat.setNlink(pb.data(), prec, InodeFormat.nlink(pb.data(), prec) + 1);
        }
        InodeFormat.touch(pb.data(), prec, nowNanos(), true);
        txn.log(pb, prec, InodeFormat.INLINE);
        key.made = ino;
        return Created.DONE;
    }
}
