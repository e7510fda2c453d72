package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeRecords.RETRIES;

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
 * old blocks when the remap lets go of them. Writers of disjoint ranges stage and write side by side,
 * and their remaps are batched ({@link Remaps}): whoever holds the file's remap turn commits the others'
 * with its own, few transactions for many writers, each checking under the inode's lock that the mapping
 * is the one it planned from (else it plans again) and that the inline list still holds it (else a tree
 * first). Another file sharing the blocks, or this file's other writers where it maps them twice, may
 * change their counts, which each transaction reads again under the groups' AGFs (in group order, after
 * the inode's lock, before its record): a count another let go of meanwhile frees the old blocks instead.
 */
final class CopyOnWrite {
    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final ExtentMap map;
    private final FileMapping mapping;
    private final BlockDevice device;
    private final int blockSize;
    /** The second transactions, batched across the file's writers. */
    final Remaps remaps;
    /** The group the last staging took its blocks from, where the next one looks first. */
    private volatile int stageGroup;

    CopyOnWrite(Volume volume, BufferCache cache, Geometry geometry, InodeRecords records, ExtentMap map, FileMapping mapping) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.map = map;
        this.mapping = mapping;
        this.device = cache.device();
        this.blockSize = geometry.blockSize();
        this.remaps = new Remaps(volume, cache, geometry, records, map, mapping);
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
            remaps.remap(i, fb + done, dev + done, staged[0], got, done + got == n ? newSize : 0, writeBack);
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
     * A group whose free blocks there are all busy is passed over for the next before any is waited for
     * (a log force): with batched remaps few transactions wait for log space, so checkpoints, which end
     * busy states, come seldom, and a group that the file fills had every copy force the log (31 forces
     * in a 5 s phase of 32 writers, 13.7 s of their time). The search starts in the group the last staging
     * used, so that copies do not each search the busy group again first (a scan of its largest free
     * extent, a block at a time: a third of a single writer's CPU).
     */
    private long[] stage(int n) {
        for (int most = n; ; most = Math.max(1, most / 2)) {
            for (int pass = 0; pass < 2; pass++) { // busy blocks waited for on the second pass only
                for (int k = 0, from = stageGroup; k < geometry.agCount(); k++) {
                    int g = (from + k) % geometry.agCount();
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
                                stageGroup = g;
                                return new long[] {at, most};
                            }
                        }
                        if (r == AllocOutcome.BUSY && pass == 0 || (used = ag.recover(r, busy)) < 0) {
                            break;
                        }
                    }
                }
            }
            if (most == 1) {
                throw new NoSpaceException("no allocation group has a free block for a copy-on-write");
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
