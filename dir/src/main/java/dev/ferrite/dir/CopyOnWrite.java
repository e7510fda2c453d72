package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * Writes into blocks a file shares with others, the copy-on-write half of the xfs_reflink role: the data
 * goes to new blocks and the file is remapped to them; the shared blocks are never written in place.
 *
 * <h2>Ordering</h2>
 * As XFS's CoW staging extents: a first transaction takes the new blocks from a group's free space and
 * records them in its refcount tree as <em>staging</em> ({@link RefcountFormat#STAGING}: allocated, mapped
 * by nobody); the data is written there; a second transaction, {@linkplain Txn#orderAfterData ordered after
 * the data} as a write's conversion is, maps the file's range to them (written), drops their staging
 * record, and takes one reference off the old blocks, freeing them if that was the last. A crash before
 * the second leaves the file on its old blocks and the new ones staging: the mount frees those
 * ({@link #freeStaging}). A crash after it leaves the file on the new blocks, whose data was on the device
 * before the remap could be. So each block of the file reads its old or its new bytes.
 *
 * <h2>Locks</h2>
 * The caller holds the file's I/O lock, shared, and the written range's blocks exclusively
 * ({@link BlockRanges}), so nothing else remaps the range meanwhile, and no read of it is looking at the
 * old blocks when the remap lets go of them. Writers of disjoint ranges stage, write and remap side by
 * side; their remaps serialize on the inode's lock only, each checking under it that the mapping is the
 * one it planned from (else it plans again) and that the inline list still holds it (else a tree first).
 * Another file sharing the blocks, or this file's other writers where it maps them twice, may change
 * their counts, which each transaction reads again under the groups' AGFs (in group order, after the
 * inode's lock, before its record): a count another let go of meanwhile frees the old blocks instead.
 */
final class CopyOnWrite {
    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeRecords records;
    private final ExtentMap map;
    private final FileMapping mapping;
    private final BlockDevice device;
    private final int blockSize;

    CopyOnWrite(Volume volume, BufferCache cache, Geometry geometry, InodeRecords records, ExtentMap map, FileMapping mapping) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.records = records;
        this.map = map;
        this.mapping = mapping;
        this.device = cache.device();
        this.blockSize = geometry.blockSize();
    }

    /**
     * The run of one reference count at {@code dev}, of at most {@code len} blocks (a snapshot: see
     * {@link Refcounts#run}), as a write sees it: a run of count 1 counts as shared while a transaction
     * that took some of its blocks to 1 may not be durable yet ({@link Refcounts#recentlyLowered}), so that
     * the write copies it rather than overwrite in place blocks a crash could give back to another file.
     */
    long run(long dev, int len) {
        Refcounts r = volume.group(geometry.agOfBlock(dev)).refcounts;
        long run = r.run(null, dev, len);
        return Refcounts.runCount(run) == 1 && r.recentlyLowered(dev, Refcounts.runLength(run), cache.journal().durableSeq())
                ? Refcounts.pack(Refcounts.runLength(run), 2) : run;
    }

    /**
     * Writes {@code src} (whole blocks) to file blocks from {@code fb} of {@code i}, which map shared blocks
     * from {@code dev} on, through new blocks: staged, written, remapped. The size becomes at least
     * {@code newSize} in the last remap; with {@code writeBack} the times are the buffered write's.
     *
     * @throws NoSpaceException if no group has a free block for the copy (nothing changed for the blocks not copied yet)
     */
    void write(Inode i, long fb, long dev, MemorySegment src, long newSize, boolean writeBack) {
        int n = (int) (src.byteSize() / blockSize);
        makeRoom(i, fb, n);
        for (int done = 0; done < n; ) {
            long[] staged = stage(n - done);
            int got = (int) staged[1];
            MemorySegment part = src.asSlice((long) done * blockSize, (long) got * blockSize);
            device.write(staged[0], part);
            remap(i, fb + done, dev + done, staged[0], got, done + got == n ? newSize : 0, writeBack);
            done += got;
        }
    }

    /** A tree first if remapping {@code [fb, fb + n)} might split an extent past what the inline list holds: its ENOSPC changes nothing. */
    private void makeRoom(Inode i, long fb, int n) {
        ExtentList sim = mapping.file(i, fb, fb + n).extents().copy();
        while (sim.punch(fb, fb + n) != null) {
            // every piece of the range unmapped
        }
        FileMapping.fillHoles(sim, fb, fb + n);
        if (!sim.fits()) {
            map.makeRoom(i);
        }
    }

    /**
     * Takes up to {@code n} contiguous blocks from some group (fewer when none holds that many: halves,
     * quarters...) and records them staging, in one transaction; returns {@code {device block, length}}.
     */
    private long[] stage(int n) {
        for (int most = n; ; most = Math.max(1, most / 2)) {
            for (int g = 0; g < geometry.agCount(); g++) {
                AllocationGroup ag = volume.group(g);
                int[] busy = {0};
                for (int attempt = 0, used; attempt < RETRIES; attempt += used) {
                    if (ag.needsRefill()) {
                        ag.refillFreeList();
                    }
                    AllocOutcome r;
                    try (Txn txn = Txn.begin(cache, ag.blockItems() + ag.refcounts.items(1))) {
                        r = ag.allocBlocks(txn, most);
                        if (r == AllocOutcome.DONE) {
                            long at = ag.allocatedBlock(txn);
                            // the list held its reserve before the allocation: enough for it and this record
                            ag.refcounts.set(txn, at, most, 1, RefcountFormat.STAGING);
                            txn.commit();
                            return new long[] {at, most};
                        }
                    }
                    if ((used = ag.recover(r, busy)) < 0) {
                        break;
                    }
                }
            }
            if (most == 1) {
                throw new NoSpaceException("no allocation group has a free block for a copy-on-write");
            }
        }
    }

    /**
     * Maps file blocks {@code [fb, fb + n)} of {@code i}, now on the shared blocks from {@code old}, to the
     * staged blocks from {@code fresh}, whose data is written: a run of one count of the old blocks per
     * transaction, each ordered after the data. {@code newSize} (0: none) moves in the last.
     */
    private void remap(Inode i, long fb, long old, long fresh, int n, long newSize, boolean writeBack) {
        int rec = records.rec(i.ino);
        AllocationGroup og = volume.group(geometry.agOfBlock(old)), ng = volume.group(geometry.agOfBlock(fresh));
        AllocationGroup first = og.agno <= ng.agno ? og : ng, second = first == og ? ng : og;
        Refcounts.Lowered lowered = null;
        boolean room = false, refill = false;
        for (int done = 0, fails = 0; done < n; ) {
            if (room) { // another writer's remap split extents since makeRoom: a tree first, holding no lock
                map.makeRoom(i);
                room = false;
            }
            map.prepare(i);
            ExtentList plan = mapping.file(i, 0, 0).extents();
            for (AllocationGroup ag : new AllocationGroup[] {og, ng}) {
                if (refill || ag.needsRefill()) {
                    ag.refillFreeList();
                }
            }
            refill = false;
            int items = 2 + map.items(i, plan) + og.blockItems() + og.refcounts.items(1) + ng.refcounts.items(1);
            try (Txn txn = Txn.begin(cache, items)) {
                i.lock();
                try {
                    long at = fb + done;
                    ExtentList y = mapping.file(i, at, fb + n).extents();
                    if (!FileMapping.sameMap(plan, y) || !map.ready(i, y)) {
                        continue;
                    }
                    if (!first.refcounts.lockForChange(txn) || second != first && !second.refcounts.lockForChange(txn)) {
                        if (fails++ == RETRIES) {
                            throw new NoSpaceException("allocation group " + og.agno + " or " + ng.agno
                                    + " cannot refill the free list of its trees");
                        }
                        // refilled holding nothing: this transaction may hold the first group's AGF, which a refill takes
                        refill = true;
                        continue;
                    }
                    int k = y.find(at);
                    if (k < 0 || y.deviceBlock(k) + (at - y.fileBlock(k)) != old + done) {
                        throw new IllegalStateException("inode " + i.ino + " no longer maps file block " + at + " to device block "
                                + (old + done) + " under its I/O lock: " + y);
                    }
                    long run = og.refcounts.run(txn, old + done, (int) Math.min(n - done, y.end(k) - at));
                    int len = Refcounts.runLength(run), count = Refcounts.runCount(run);
                    long staging = ng.refcounts.run(txn, fresh + done, len);
                    if (Refcounts.runCount(staging) != RefcountFormat.STAGING || Refcounts.runLength(staging) != len) {
                        throw new CorruptionException(fresh + done, Refcounts.TREE, "copy-on-write blocks [" + (fresh + done) + ", +"
                                + len + ") of inode " + i.ino + " are not all staging in group " + ng.agno);
                    }
                    y.punch(at, at + len);
                    y.insert(at, fresh + done, len, false);
                    if (!y.fits()) {
                        room = true;
                        continue; // nothing changed yet
                    }
                    ng.refcounts.set(txn, fresh + done, len, RefcountFormat.STAGING, 1);
                    BusyExtents.Entry busy = null;
                    if (count > 1) { // another file still maps the old blocks
                        if (count == 2) {
                            lowered = og.refcounts.lowering(old + done, len, cache.journal().durableSeq());
                        }
                        og.refcounts.set(txn, old + done, len, count, count - 1);
                    } else if (og.releaseData(txn, old + done, len) == AllocOutcome.DONE) { // the others let go meanwhile
                        busy = og.freedData(txn);
                    } else {
                        throw new IllegalStateException("group " + og.agno + " refused a free with its free list held");
                    }
                    Buffer b = records.lockRecord(txn, i.ino);
                    MemorySegment m = b.data();
                    int span = Math.max(InodeFormat.INLINE, map.store(txn, i, b, y));
                    boolean last = done + len == n;
                    if (last && newSize > InodeFormat.size(m, rec)) {
                        InodeFormat.setSize(m, rec, newSize);
                    }
                    long now = writeBack ? i.modified() : nowNanos();
                    if (now != 0) {
                        InodeFormat.touch(m, rec, now, true);
                    }
                    txn.log(b, rec, span);
                    txn.orderAfterData();
                    long seq = FileMapping.commitData(i, txn);
                    if (lowered != null) {
                        og.refcounts.lowered(lowered, seq);
                        lowered = null;
                    }
                    if (busy != null) {
                        busy.settle(seq);
                    }
                    if (now != 0) {
                        records.clearModified(i, now);
                    }
                    done += len;
                    fails = 0;
                } finally {
                    i.unlock();
                    if (lowered != null) { // the transaction failed
                        og.refcounts.lowered(lowered, 0);
                        lowered = null;
                    }
                }
            }
        }
    }

    /**
     * Frees the staging blocks a crash left between a copy-on-write's two transactions (mount, before
     * anything else runs): each a transaction dropping its record and returning it to free space.
     * Returns how many blocks.
     */
    long freeStaging() {
        long freed = 0;
        for (int g = 0; g < geometry.agCount(); g++) {
            AllocationGroup ag = volume.group(g);
            for (Refcounts.Entry e : ag.refcounts.all()) {
                if (e.count() != RefcountFormat.STAGING) {
                    continue;
                }
                long dev = ag.start + e.start();
                for (int fails = 0; ; fails++) {
                    if (ag.needsRefill()) {
                        ag.refillFreeList();
                    }
                    try (Txn txn = Txn.begin(cache, ag.blockItems() + ag.refcounts.items(1))) {
                        if (ag.refcounts.lockForChange(txn)) {
                            ag.refcounts.set(txn, dev, e.length(), RefcountFormat.STAGING, 1);
                            if (ag.releaseBlocks(txn, dev, e.length()) != AllocOutcome.DONE) {
                                throw new IllegalStateException("group " + ag.agno + " refused a free with its free list held");
                            }
                            txn.commit();
                            break;
                        }
                    }
                    if (fails == RETRIES) {
                        throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its trees");
                    }
                    ag.refillFreeList();
                }
                freed += e.length();
            }
        }
        return freed;
    }
}
