package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.BTree;
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
import static dev.ferrite.dir.InodeRecords.addEntries;
import static dev.ferrite.dir.InodeRecords.logTimes;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * The transaction that makes a new inode and its name together (XFS's {@code xfs_create} below the name
 * checks): picks a group (directories spread by a rotor, the rest near their parent), reserves log space
 * and frames before the parent's lock, then under it allocates the inode from the group's AGI, adds the
 * entry and writes the new record, retrying on the group's answers with no lock held. It takes the locks
 * in {@link Namespace}'s order: the parent's inode lock, the group's AGI (and AGF), inode blocks by number,
 * then the parent's tree nodes.
 *
 * <p>A file or an inline symlink made in a tree directory does not take the parent's inode lock
 * ({@link #sharedCreate}): it enters the directory beside the other such creates
 * ({@link DirContents#enter}, with a claim on the tree's block reserve only if its insert splits a
 * leaf), which whatever else changes the
 * directory keeps out ({@link Inode#lockExclusive}), and holds its name's stripe, so that two creates of
 * one name are ordered.
 * Its transaction takes a group's AGI (the parent's, or when a create holds that, another's), the new
 * inode's block if it lies below the parent's, the directory tree's nodes (and the parent's record block
 * if a split takes a block), the group's inode trees (the inode taken), then the parent's record block
 * and the new inode's if above, and writes both records: the parent's record, which every create
 * changes and every create reads, is held only from after the insert to the commit. Whoever else holds
 * a record block waits for no tree node and takes inode blocks in ascending order, and a group's inode
 * trees are taken only under its AGI, so the blocks taken out of order here close no cycle.
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
        AGAIN,
        /** A shared create's insert would split the tree, and its claim did not cover that ({@link #sharedCreate} only). */
        SPLITS
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
    /** Name stripes: see {@link #stripes}. */
    private static final int NAME_STRIPES = 1 << 16;
    /**
     * Stripes of (directory, name) for {@link #sharedCreate} and a shared unlink: many ({@value #NAME_STRIPES}
     * words), since a create or unlink holds its stripe to its commit, and with more threads than CPUs a
     * holder is often descheduled, so a waiter waits a time slice. On 1024 stripes 16 threads met about
     * once in 68 operations and spent more time parked on stripes than anywhere else (issue 21).
     */
    private final KeyStripes stripes = new KeyStripes(NAME_STRIPES);
    /** Tests: runs inside each shared create, its directory entered and its group's AGI held, before its insert (null: nothing). */
    volatile Runnable onSharedInsert;

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
     * back for its free lists and refcount tree. Creates racing for the last inodes can still pass this together.
     *
     * <p>The second pass reads every group's counts again, whatever its headers' locks say now: a group
     * passed over in the first because someone held its AGF may have let it go since. When it read the
     * free blocks only of a group whose AGF was still held, such a group went unchecked, and a create that
     * came just after the last free inode was taken failed with ENOSPC on a nearly empty volume (issue 21:
     * 16 threads creating in one directory of a one-group volume, 10 creates in 720,000).
     */
    void requireInodeRoom() {
        long chunkRoom = Geometry.CHUNK_BLOCKS + RESERVE_FILL;
        int n = geometry.agCount();
        for (int g = 0; g < n; g++) { // first without reading an AGI or AGF someone holds: that read waits for its commit
            AllocationGroup ag = volume.group(g);
            if (!ag.agf.isLocked() && ag.freeBlockCount() >= chunkRoom + ag.heldBack() || !ag.agi.isLocked() && ag.freeInodes() > 0) {
                return;
            }
        }
        for (int g = 0; g < n; g++) { // then waiting for those reads: a group held may qualify
            AllocationGroup ag = volume.group(g);
            if (ag.freeInodes() > 0 || ag.freeBlockCount() >= chunkRoom + ag.heldBack()) {
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
        if (!searched && type != S_IFDIR && !remote) { // a tree directory (a directory's link count, a remote target's block: below)
            Outcome o = sharedCreate(d, key, mode, linkTarget, open);
            if (o != null) {
                return o;
            }
        }
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
                        d.lockExclusive();
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
                                    return commit(txn, d, key, open);
                                }
                            }
                        } finally {
                            d.unlockExclusive();
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

    /**
     * Commits a create and opens its inode as {@link #allocAndInsert} says, {@code d} held (exclusively or
     * entered) so that nobody can unlink the new name meanwhile.
     */
    private Created commit(Txn txn, Inode d, EntryKey key, boolean open) {
        long seq = txn.commit();
        d.noteSeq(seq);
        Inode c = inodes.acquire(key.made);
        c.lastSeq = seq;
        c.lastDataSeq = seq;
        c.dirTree = null;
        key.opened = null;
        if (open && c.tryLock()) {
            c.opens++; // keeps the reference for the handle
            c.unlock();
            key.opened = c;
        } else {
            inodes.release(c);
        }
        return Created.DONE;
    }

    /**
     * {@link #allocAndInsert} of a file or inline symlink in tree directory {@code d}, beside the other
     * such creates there (see the class comment); null, with nothing changed, if the exclusive path must
     * do it: {@code d} is inline, the group chosen has no free inode and cannot make a chunk now, or the
     * log has no space for the create now. A chunk is made with {@code d} left, and the create enters again.
     *
     * <p>Nothing here waits for log space while {@code d} is entered: writers that reserved theirs wait in
     * {@link Inode#lockExclusive} for this create to leave, so a wait entered could last forever. The
     * create's own transaction only tries to reserve; a group's chunk or free-list refill, which reserves
     * in transactions of its own (and may force the log), runs with {@code d} left, and the create enters
     * again after it.
     */
    private Outcome sharedCreate(Inode d, EntryKey key, int mode, byte[] linkTarget, boolean open) {
        boolean splitting = false; // the last attempt found that its insert splits
        for (int attempt = 0; attempt < RETRIES; attempt++) {
            BTree tree = dirs.treeOrNull(d);
            if (tree == null) {
                return null;
            }
            int claim = dirs.enter(d, splitting ? tree.height() + 2 : 0, false);
            if (claim < 0) {
                return null;
            }
            AllocationGroup fix; // a group to refill, or with makeChunk to make a chunk in, once d is left
            boolean makeChunk = false;
            try {
                int stripe = lockStripe(d.ino, key); // after entering: held only while this create runs
                try {
                    records.requireDir(d.ino); // removed before we entered (an rmdir holds it exclusively)
                    boolean alone = (d.writers() & Inode.CLAIMS) == claim;
                    AllocationGroup ag = quietGroup(d, alone);
                    if (ag.freeInodes() == 0) {
                        if (dirs.findEntry(d, key, true) != null) {
                            return Refused.EXISTS; // no chunk made for a create that fails (the stripe keeps the name as it is)
                        }
                        // the chunk is made in a transaction of its own with d left, alone or not: "alone" is
                        // a moment's count, and a create that took d exclusively for its chunk (the exclusive
                        // path makes it in the create's transaction) kept every create arriving out while it
                        // made it, and first waited for those inside, often descheduled ones (issue 21)
                        fix = ag;
                        makeChunk = true;
                    } else if (ag.needsRefill()) {
                        fix = ag;
                    } else {
                        int items = 5 + ag.allocInodeItems(false) + tree.reservation(); // the exclusive path's: dirItems is 1 + the reservation
                        try (Txn txn = Txn.tryBegin(cache, items)) {
                            if (txn == null) {
                                return null; // the exclusive path reserves, then locks
                            }
                            switch (sharedInsert(txn, ag, tree, d, key, mode, linkTarget, splitting)) {
                                case Created created -> {
                                    return commit(txn, d, key, open);
                                }
                                case Refused refused when refused == Refused.SPLITS -> {
                                    splitting = true;
                                    continue; // enter again, claiming what a split may take
                                }
                                case Refused refused -> {
                                    return refused;
                                }
                                case Retry retry -> {
                                    if (retry.why() != AllocOutcome.NEEDS_REFILL) {
                                        continue; // its free inodes went meanwhile: choose again
                                    }
                                    fix = ag;
                                }
                            }
                        }
                    }
                } finally {
                    unlockStripe(stripe);
                }
            } finally {
                d.leave(claim);
            }
            AllocOutcome made = makeChunk ? ensureFreeInode(fix) : AllocOutcome.NEEDS_REFILL;
            if (made == AllocOutcome.NEEDS_REFILL) {
                fix.refillFreeList();
            } else if (made != AllocOutcome.DONE) {
                return null;
            }
        }
        return null;
    }

    /**
     * One attempt of {@link #sharedCreate} in {@code txn}, in the lock order of the class comment: the new
     * inode in {@code key}'s {@link EntryKey#made}; or, with nothing changed, {@link Refused#EXISTS}, or the
     * group's NEEDS_REFILL (its inode free list is short) or NEEDS_CHUNK (it lists no free inode: its count
     * was stale), or {@link Refused#SPLITS} unless {@code splitting} (the claim covers only an insert
     * into a leaf with room). The insert, first, is the lookup (one descent); once it is in, nothing after
     * it can fail (a listed inode, taken under the AGI).
     */
    private Attempt sharedInsert(Txn txn, AllocationGroup ag, BTree tree, Inode d, EntryKey key, int mode, byte[] linkTarget,
                                 boolean splitting) {
        txn.lock(ag.agi);
        if (ag.inodeListLow()) {
            return new Retry(AllocOutcome.NEEDS_REFILL);
        }
        if (!ag.hasFreeInode(txn)) {
            return new Retry(AllocOutcome.NEEDS_CHUNK);
        }
        long ino = geometry.inodeNumber(ag.agno, ag.nextFreeInode(txn));
        if (records.block(ino) < records.block(d.ino)) {
            records.lockRecord(txn, ino);
        }
        Runnable hook = onSharedInsert;
        if (hook != null) {
            hook.run();
        }
        int type = mode & S_IFMT;
        int put = splitting ? (tree.putIfAbsent(txn, key.segment(), key.value(ino, type)) ? -1 : 0)
                : tree.putIfAbsentUnlessSplitting(txn, key.segment(), key.value(ino, type));
        if (put == BTree.WOULD_SPLIT) {
            return Refused.SPLITS;
        }
        if (put >= 0) {
            return Refused.EXISTS;
        }
        int agIno = ag.takeListedInode(txn);
        records.lockRecords(txn, d.ino, ino);
        ag.initInode(txn, agIno, mode, 0, 0, 1, nowNanos());
        initRecord(txn, d, ino, type, linkTarget, false, 0, null, key.inodeFlags);
        Buffer pb = records.lockRecord(txn, d.ino);
        int prec = records.rec(d.ino);
        addEntries(txn, pb, prec, 1); // as a tree insert through DirContents counts it
        parentGains(txn, pb, prec, type);
        key.made = ino;
        return Created.DONE;
    }

    /**
     * The group a shared create in {@code d} takes its inode from: {@code d}'s own if nobody holds its AGI
     * and it has a free inode, or room for a chunk and the create is {@code alone} in {@code d}; else (busy
     * or full) the next from there whose AGI nobody holds and that has a free inode, else room for a chunk;
     * else the first from {@code d}'s whose AGI is held (to wait for); else {@code d}'s. A held AGI's counts
     * are not read: that read would wait.
     */
    private AllocationGroup quietGroup(Inode d, boolean alone) {
        int n = geometry.agCount();
        int home = geometry.agOfInode(d.ino);
        AllocationGroup wait = null, roomy = null;
        for (int k = 0; k < n; k++) {
            AllocationGroup ag = volume.group((home + k) % n);
            if (ag.agi.isLocked()) {
                if (wait == null) {
                    wait = ag;
                }
            } else if (ag.freeInodes() > 0 || k == 0 && alone && ag.mayAddChunk()) {
                return ag;
            } else if (roomy == null && ag.mayAddChunk()) {
                roomy = ag;
            }
        }
        return roomy != null ? roomy : wait != null ? wait : volume.group(home);
    }

    /** Takes name {@code key}'s stripe in directory {@code dir} (a shared unlink's too): returns it for {@link #unlockStripe}. */
    int lockStripe(long dir, EntryKey key) {
        int s = stripe(dir, key);
        stripes.lock(s);
        return s;
    }

    /** Name stripe waits and their nanoseconds ({@link StripeStats}). */
    long[] stripeWaits() {
        return new long[] {stripes.waits(), stripes.waitNanos()};
    }

    /** Lets go of stripe {@code s}, taken by {@link #lockStripe}. */
    void unlockStripe(int s) {
        stripes.unlock(s);
    }

    /** The stripe of name {@code key} in directory {@code dir}, from the name's hash that begins the key. */
    static int stripe(long dir, EntryKey key) {
        long h = (dir ^ DirEntryFormat.keyHash(key.bytes())) * 0x9E3779B97F4A7C15L;
        return (int) (h >>> 32) & (NAME_STRIPES - 1);
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
            AllocOutcome block = ag.allocClaiming(txn, 1);
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
        initRecord(txn, d, ino, type, linkTarget, remote, targetBlock, frames, key.inodeFlags);
        if (!first) {
            dirs.insertAbsent(txn, d, key, ino, type);
        }
        Buffer pb = records.lockRecord(txn, d.ino);
        parentGains(txn, pb, records.rec(d.ino), type);
        key.made = ino;
        return Created.DONE;
    }

    /**
     * In {@code txn}: fills the new record of {@code ino} (in {@code d}) past what allocating it wrote: a
     * directory's parent, a symlink's target, a regular file's {@code flags} (the create's
     * {@link EntryKey#inodeFlags}: in the record from the transaction that makes it, so no crash finds the
     * file without them).
     */
    private void initRecord(Txn txn, Inode d, long ino, int type, byte[] linkTarget, boolean remote, long targetBlock, int[] frames,
                            int flags) {
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
        } else if (flags != 0) {
            InodeFormat.setFlags(m, rec, flags);
            txn.log(nb, rec + InodeFormat.FLAGS, 4);
            return;
        } else {
            return; // allocating the inode wrote and logged all of its record
        }
        // the record was zeroed past what allocating it logged: past its last non-zero byte nothing changed
        txn.log(nb, rec, InodeFormat.usedLength(m, rec, InodeFormat.recordSize(cache.blockSize())));
    }

    /** In {@code txn}: the parent's record {@code prec} in held block {@code pb} gains a child of {@code type} (a directory's link) and moves its times. */
    private static void parentGains(Txn txn, Buffer pb, int prec, int type) {
        if (type == S_IFDIR) {
            InodeFormat.setNlink(pb.data(), prec, InodeFormat.nlink(pb.data(), prec) + 1);
        }
        InodeFormat.touch(pb.data(), prec, nowNanos(), true);
        if (type == S_IFDIR) {
            txn.log(pb, prec + InodeFormat.NLINK, 4);
        }
        logTimes(txn, pb, prec, true);
    }
}
