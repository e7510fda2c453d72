package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Comparator;
import java.util.zip.CRC32C;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeRecords.RETRIES;

/**
 * Medium table values kept in data blocks ({@link TableValueFormat#EXTENT}): one contiguous extent per
 * value, owned by the stub in its key's cell (no inode or extent map names it), on a volume with the
 * superblock's {@link SuperblockFormat#INCOMPAT_TABLE_EXTENTS} (set before the first one is written).
 *
 * <h2>Ordering</h2>
 * As a file's hole is filled ({@link FileMapping}): inside a commit's journal group, the blocks are
 * allocated in a transaction, the value goes into its frames of the data page cache, pinned, and its
 * device write is left to the log ({@link TableExtentWriteBack}: written, in runs of adjacent values,
 * before the checkpoint that names it, or by a put that finds the write-back's budget spent), and the
 * transaction that makes the key name them is {@linkplain Txn#orderAfterData ordered after} that write
 * (its checkpoint is written after a device flush, shared by every such change in it): no fsync per
 * value, and the group recovers the allocation and the stub together or neither, so a crash leaks
 * nothing. A single put over an absent or inline value makes the allocation, the pinned copy and the
 * key's change one transaction of no group instead ({@link #writeSingle}). A replaced or deleted value's
 * blocks are freed in the group after the key changed, {@linkplain BusyExtents busy} until that is
 * durable, so a crash that gives the key its old stub back finds its bytes there. A group that fails
 * part way frees what it allocated and takes back what it freed ({@link FreeSpace#retakeData}).
 *
 * <h2>Reads</h2>
 * Lock-free: the blocks a read needs, into a thread's aligned buffer, then copied out. A whole value read
 * from the device is checked by its CRC; a read of part of one is valid if the key still names the same
 * stub afterwards ({@link Tables#copy}): its blocks were not freed before the read ended, as a key's change
 * comes before the free, and freed blocks are not written again before the free is durable. The blocks
 * come from the {@link TableExtentCache} when it holds them as the stub's, unchecked (the tag is the
 * identity; the bytes were checked, or written, when they went in); a whole value read from the device
 * whose CRC matches goes into it, as does a value as it is written (pinned until the log wrote it, so a
 * read never finds its blocks on the device before its bytes), and a free drops it.
 */
final class TableExtents {
    /** A thread's aligned buffer for a value's blocks. */
    private static final ThreadLocal<MemorySegment> BUFFERS = ThreadLocal.withInitial(
            () -> Arena.ofAuto().allocate(TableValueFormat.MAX_MEDIUM + BlockDevice.BUFFER_ALIGNMENT, BlockDevice.BUFFER_ALIGNMENT));

    private final Volume volume;
    private final BufferCache cache;
    private final BlockDevice device;
    private final Geometry geometry;
    private final int blockSize;
    final TableExtentCache cached;
    final TableExtentWriteBack writeBack;
    /** The superblock has the feature (read at mount, set with the first value): keys may name extents. */
    private volatile boolean featured;
    /** The superblock has {@link SuperblockFormat#INCOMPAT_PENDING_FREES} (read at mount, set before the first entry). */
    private volatile boolean defers;
    /** False to keep medium values in the overflow tree, as code from before extents did (for tests of such volumes). */
    volatile boolean enabled = true;
    /** Test seam: run by a read after it has the stub, before it reads the blocks; null outside tests. */
    volatile Runnable beforeRead;

    TableExtents(Volume volume, BufferCache cache, Geometry geometry, PageCache pages) {
        this.volume = volume;
        this.cached = new TableExtentCache(pages, geometry.blockSize());
        this.cache = cache;
        this.device = cache.device();
        this.writeBack = new TableExtentWriteBack(cached, device, volume.journal(), pages.capacity());
        this.geometry = geometry;
        this.blockSize = geometry.blockSize();
        this.featured = volume.hasIncompatFeature(SuperblockFormat.INCOMPAT_TABLE_EXTENTS);
        this.defers = volume.hasIncompatFeature(SuperblockFormat.INCOMPAT_PENDING_FREES);
    }

    /** Whether some key may name an extent: a change must then look at the value it replaces. */
    boolean inUse() {
        return featured;
    }

    /**
     * Writes medium {@code value} to new blocks, near table inode {@code table}'s group, inside a commit's
     * group, the table's lock held; returns its stub's fields, or null if no group has the blocks
     * contiguous (the value then goes to the overflow tree). The blocks come off the front of the group's
     * {@code run}, allocated first if it has too few: for the {@code want} blocks of the group's medium
     * values still to come (this one's among them), in one transaction ({@link #allocateRun}), so that a
     * batch of puts pays for few allocations, and its values mostly lie side by side for the write-back.
     * The key's change that names them
     * must be {@linkplain Txn#orderAfterData ordered after} this write, and commit after it: the write is
     * left to the log ({@link TableExtentWriteBack#defer}) when the budget allows.
     */
    TableValueFormat.Extent write(MemorySegment value, long table, Run run, long want) {
        if (!enabled) {
            return null;
        }
        feature();
        int n = (int) value.byteSize();
        int len = blocks(n);
        long block = run.take(len);
        if (block < 0) {
            block = allocateRun(run, len, want, geometry.agOfInode(table));
        }
        if (block < 0) {
            return null;
        }
        TableValueFormat.Extent x = new TableValueFormat.Extent(block, n, crc(value));
        if (!writeBack.defer(x, value)) {
            writeThrough(x, value);
        }
        return x;
    }

    /** Blocks one {@link Run} takes at most: a batch's values past it allocate another. */
    static final int RUN_MOST = 2048;

    /**
     * The blocks a group commit allocated for its medium values and has not handed out yet: up to {@link
     * #SEGMENTS} extents, carved front to back; the commit frees what is left when it ends ({@link
     * #freeRest}), in the group, so a crash recovers the run's allocation with the keys that name its
     * values, or none of it.
     */
    static final class Run {
        /** Extents one run allocation takes at most (each a few tree changes in its transaction). */
        static final int SEGMENTS = 32;

        /** The run's extents (first block, length); those before {@link #at}, what was left of them. */
        private final long[] segments = new long[2 * SEGMENTS];
        private int count, at;
        /** What is left of extent {@link #at}. */
        private long next, end;
        /** No group had a run for this commit: its later values allocate one by one. */
        private boolean failed;

        /** The first of {@code len} blocks off the front of the extent being carved or a later one, or -1 if none has them. */
        long take(int len) {
            while (end - next < len) {
                if (at + 1 >= count) {
                    return -1;
                }
                segments[2 * at] = next; // what is left of it, freed with the rest
                segments[2 * at + 1] = end - next;
                at++;
                next = segments[2 * at];
                end = next + segments[2 * at + 1];
            }
            long b = next;
            next += len;
            return b;
        }

        /** Starts carving the {@code n} extents just allocated into {@link #segments}. */
        private void carve(int n) {
            count = n;
            at = 0;
            next = segments[0];
            end = next + segments[1];
        }

        /** A new commit's: nothing left (a failed group's undo freed it). */
        void reset() {
            empty();
            failed = false;
        }

        /** Holds no blocks: {@link #freeRest} gave them back. */
        private void empty() {
            count = at = 0;
            next = end = 0;
        }
    }

    /**
     * {@link #write}'s allocation: a run of up to {@code want} blocks, in extents of {@code len} blocks or
     * multiples of it, in one transaction, from group {@code home} on: what the first free extents a group
     * looks at hold without a busy block ({@link AllocationGroup#allocRuns}: never a long search, never a
     * wait; inside a journal group the busy blocks outlast any wait). If no group has one, the single
     * value's {@link #allocate}, as the commit's later values get too. What the old run had left is freed
     * first. Returns the first block, taken off the run, or -1.
     */
    private long allocateRun(Run run, int len, long want, int home) {
        freeRest(run);
        int size = (int) Math.min(want, RUN_MOST);
        if (size > len && !run.failed) {
            int groups = geometry.agCount();
            for (int g = 0; g < groups; g++) {
                AllocationGroup ag = volume.group((home + g) % groups);
                if (ag.freeBlockCount() < len) {
                    continue; // a snapshot: saves a transaction that would find no room
                }
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                int items = ag.runsItems();
                try (Txn txn = Txn.begin(cache, items)) {
                    int n = ag.allocRuns(txn, len, size, items, run.segments);
                    if (n > 0) {
                        txn.commit();
                        run.carve(n);
                        return run.take(len);
                    }
                }
            }
            run.failed = true;
        }
        return allocate(len, home);
    }

    /** Frees the blocks {@code run} has left, if any, each extent in a transaction of its own (never written: nothing to forget). */
    void freeRest(Run run) {
        for (int i = 0; i < run.count; i++) {
            long block = i == run.at ? run.next : run.segments[2 * i];
            long len = i == run.at ? run.end - run.next : run.segments[2 * i + 1];
            if (len > 0) {
                freeBlocks(block, (int) len);
            }
        }
        run.empty();
    }

    /** Sets the superblock's feature before the first value is written (a write of the superblock: holding no lock). */
    private void feature() {
        if (!featured) {
            volume.requireIncompatFeature(SuperblockFormat.INCOMPAT_TABLE_EXTENTS);
            featured = true;
        }
    }

    /**
     * Sets the superblock's pending-free feature before a single delete may put the first entry on a
     * pending-free list (a write of the superblock: holding no lock).
     */
    void featurePendingFrees() {
        if (!defers) {
            volume.requireIncompatFeature(SuperblockFormat.INCOMPAT_PENDING_FREES);
            defers = true;
        }
    }

    /** Blocks a value of {@code length} bytes takes. */
    int blocks(long length) {
        return (int) ((length + blockSize - 1) / blockSize);
    }

    /** Writes value {@code x} ({@code value}, its bytes) to its blocks now, and caches it (a get right after the put is a copy; a failure that frees it drops it). */
    private void writeThrough(TableValueFormat.Extent x, MemorySegment value) {
        int n = x.length(), len = x.blocks(blockSize);
        MemorySegment buf = BUFFERS.get();
        MemorySegment.copy(value, 0, buf, 0, n);
        buf.asSlice(n, (long) len * blockSize - n).fill((byte) 0);
        device.write(x.block(), buf.asSlice(0, (long) len * blockSize));
        cached.fill(x, buf);
    }

    /**
     * Before a single put of a medium value of {@code length} bytes in one transaction ({@link #writeSingle}),
     * holding no lock: sets the feature and reserves the value's room in the write-back's budget (which
     * may write the values pending: device I/O, never under a group's AGF or a node's lock). False, nothing
     * reserved, if extents are off or the budget stays spent: the put goes through a group.
     */
    boolean prepareSingle(long length) {
        if (!enabled) {
            return false;
        }
        feature();
        return writeBack.reserveRoom(blocks(length));
    }

    /** Gives back the room {@link #prepareSingle} reserved for a value of {@code length} bytes that went another way. */
    void unprepareSingle(long length) {
        writeBack.unreserve(blocks(length));
    }

    /** The allocation group a single put into table inode {@code table} allocates its value in first ({@link #writeSingle}). */
    AllocationGroup homeGroup(long table) {
        return volume.group(geometry.agOfInode(table));
    }

    /**
     * For a single put whose transaction {@code txn} then makes its key name the value: allocates medium
     * {@code value}'s blocks from table inode {@code table}'s {@link #homeGroup} on, taking a group's AGF
     * before any node of the table's tree (the order {@link #freeBeforeChange} keeps), in a group whose
     * changes fit the {@code groupItems} reserved for them and whose free list holds its reserve (a
     * refill waits for log space, which a writer inside a table must not), and leaves its write to the
     * log in the room {@link #prepareSingle} reserved ({@link TableExtentWriteBack#deferReserved});
     * {@code crc} is its checksum. Returns its stub's fields, the room used; or null, nothing changed, no
     * AGF held and the room still reserved, if no such group has a free run of the blocks that is not
     * busy (the put then goes through a group, which refills, waits for busy blocks or falls back to the
     * overflow tree).
     */
    TableValueFormat.Extent writeSingle(Txn txn, long table, int groupItems, MemorySegment value, int crc) {
        int n = (int) value.byteSize();
        int home = geometry.agOfInode(table);
        for (int g = 0; g < geometry.agCount(); g++) {
            AllocationGroup ag = volume.group((home + g) % geometry.agCount());
            if (ag.needsRefill() || ag.blockItems() > groupItems || ag.allocClaiming(txn, blocks(n)) != AllocOutcome.DONE) {
                continue; // nothing changed, its AGF let go
            }
            TableValueFormat.Extent x = new TableValueFormat.Extent(ag.allocatedBlock(txn), n, crc);
            if (!writeBack.deferReserved(x, value)) {
                writeThrough(x, value); // no frame to be had (every page dirty): the one write under the AGF, seldom
            }
            return x;
        }
        return null;
    }

    /**
     * {@link #writeSingle} for a put over the key's extent value {@code old}: allocates the new value's
     * blocks in {@code old}'s group and frees {@code old}'s there, in {@code txn} (one AGF, taken before any
     * node of the table's tree), leaving the new value's write to the log and dropping {@code old}'s frames
     * (after its pending write, if it has one). Returns the new value's stub fields, the room used (its
     * freed blocks at the group's {@link AllocationGroup#freedData}); or null, nothing changed, no AGF held
     * and the room still reserved, if that group has no free run of the blocks that is not busy, or its
     * free list wants a refill (the put then goes through a group).
     */
    TableValueFormat.Extent replaceSingle(Txn txn, TableValueFormat.Extent old, MemorySegment value, int crc) {
        AllocationGroup ag = groupOf(old);
        int n = (int) value.byteSize();
        if (ag.needsRefill() || ag.replaceData(txn, blocks(n), old.block(), old.blocks(blockSize)) != AllocOutcome.DONE) {
            return null;
        }
        forget(old);
        TableValueFormat.Extent x = new TableValueFormat.Extent(ag.allocatedBlock(txn), n, crc);
        if (!writeBack.deferReserved(x, value)) {
            writeThrough(x, value);
        }
        return x;
    }

    /** {@code len} contiguous blocks in a transaction of their own, from group {@code home} on; -1 if no group has them. */
    private long allocate(int len, int home) {
        for (int g = 0; g < geometry.agCount(); g++) {
            AllocationGroup ag = volume.group((home + g) % geometry.agCount());
            int[] busy = {0};
            for (int attempt = 0, used; attempt < RETRIES; attempt += used) {
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                AllocOutcome r;
                try (Txn txn = Txn.begin(cache, ag.blockItems())) {
                    r = ag.allocClaiming(txn, len);
                    if (r == AllocOutcome.DONE) {
                        long block = ag.allocatedBlock(txn);
                        txn.commit();
                        return block;
                    }
                }
                if ((used = ag.recover(r, busy)) < 0) {
                    break;
                }
            }
        }
        return -1;
    }

    /**
     * Frees values {@code xs[0..n)}, sorted by block ({@link #BY_BLOCK}), a group's in as few transactions
     * as its free list and their room allow, where one transaction each took the free-space trees' locks
     * and logged their blocks again: a group commit's frees, made once its keys have changed. They stay
     * busy until their transaction is durable, and with {@code hold} until each entry is {@linkplain
     * BusyExtents.Entry#release released} too. Each one's busy entry goes to {@code busy[i]} as its
     * transaction changes the trees: if this throws, the entries set are the frees to take back ({@link
     * #retake}). After each transaction that brings the frees since the last check to {@code checkEvery},
     * runs {@code check} (the caller's room in the log: it throws to stop). A pending write of one still
     * goes ahead ({@link TableExtentWriteBack#freed}).
     */
    void freeAll(TableValueFormat.Extent[] xs, int n, boolean hold, BusyExtents.Entry[] busy, int checkEvery, Runnable check) {
        long[] blocks = new long[n];
        int[] lens = new int[n];
        for (int i = 0; i < n; i++) {
            groupOf(xs[i]); // checked before anything is freed
            forget(xs[i]);
            blocks[i] = xs[i].block();
            lens[i] = xs[i].blocks(blockSize);
        }
        for (int i = 0, unchecked = 0; i < n; ) {
            AllocationGroup ag = groupOf(blocks[i]);
            int to = i;
            while (to < n && groupOf(blocks[to]) == ag) {
                to++;
            }
            for (int fails = 0; i < to; ) {
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                int items = ag.runsItems();
                int freed;
                long seq = -1;
                try (Txn txn = Txn.begin(cache, items)) {
                    freed = ag.releaseDataRuns(txn, blocks, lens, i, to, items, busy);
                    if (freed > 0) {
                        seq = txn.commit();
                    }
                }
                if (freed == 0) {
                    refillOrGiveUp(ag, fails++);
                    continue;
                }
                for (int k = i; k < i + freed; k++) {
                    if (hold) {
                        busy[k].hold(seq);
                    } else {
                        busy[k].settle(seq);
                    }
                }
                i += freed;
                fails = 0;
                if ((unchecked += freed) >= checkEvery) {
                    unchecked = 0;
                    check.run();
                }
            }
        }
    }

    /** The order {@link #freeAll} takes its values in. */
    static final Comparator<TableValueFormat.Extent> BY_BLOCK =
            Comparator.comparingLong(TableValueFormat.Extent::block);

    /**
     * For a group's undo of value {@code x} it wrote, its key's change undone in the group too: frees its
     * blocks as {@link #freeAll} does, its pending write cancelled, if it has one.
     */
    void unwrite(TableValueFormat.Extent x) {
        writeBack.cancel(x);
        cached.drop(x);
        freeBlocks(x.block(), x.blocks(blockSize));
    }

    /** Value {@code x}'s blocks are being freed: its frames dropped, now or, if its write is pending, after it. */
    private void forget(TableValueFormat.Extent x) {
        if (!writeBack.freed(x)) {
            cached.drop(x);
        }
    }

    /** Frees {@code [block, block + len)} in a transaction of its own, busy until it is durable. */
    private void freeBlocks(long block, int len) {
        AllocationGroup ag = groupOf(block);
        for (int fails = 0; ; fails++) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(cache, ag.blockItems())) {
                if (ag.releaseData(txn, block, len) == AllocOutcome.DONE) {
                    BusyExtents.Entry busy = ag.freedData(txn);
                    busy.settle(txn.commit());
                    return;
                }
            }
            refillOrGiveUp(ag, fails);
        }
    }

    /**
     * The allocation group whose blocks value {@code x} lies in. A stub is checksummed with its leaf, but a
     * damaged one may name blocks outside every group's free space (the superblocks, the log, a group's
     * headers, past the device's end, across a group's end): a CorruptionException naming its first block,
     * thrown before its free or its replacement changes anything.
     */
    AllocationGroup groupOf(TableValueFormat.Extent x) {
        AllocationGroup ag = groupHolding(x);
        if (ag == null) {
            throw new CorruptionException(x.block(), "table value extent", "a table value's stub names blocks [" + x.block() + ", +"
                    + x.blocks(blockSize) + "), outside the free space of the allocation groups");
        }
        return ag;
    }

    /** {@link #groupOf(TableValueFormat.Extent)}, or null where that throws. */
    AllocationGroup groupHolding(TableValueFormat.Extent x) {
        long b = x.block();
        AllocationGroup ag = groupOf(b);
        return ag == null || b - ag.start < AgHeaderFormat.FIRST_FREE || b - ag.start + x.blocks(blockSize) > ag.length ? null : ag;
    }

    /** The allocation group device block {@code block} lies in, or null if it lies in none. */
    AllocationGroup groupOf(long block) {
        return geometry.isDataBlock(block) ? volume.group(geometry.agOfBlock(block)) : null;
    }

    /**
     * For a single write that replaces or deletes the key naming value {@code x}: frees its blocks in
     * {@code txn}, before the same transaction changes the key, so the free and the key's change are
     * recovered together with no journal group around them. Takes {@code ag}'s ({@link #groupOf}) AGF
     * before any node of the table's tree: the order {@link #release} and a reserve's spill take too, and
     * no tree change takes a group's AGF. Returns what the blocks are busy as ({@linkplain
     * BusyExtents.Entry#settle settle} it with the transaction's sequence), or null, with nothing changed
     * and the AGF let go, if the group's free list needs a refill first (which a writer inside a table
     * must not wait for).
     */
    BusyExtents.Entry freeBeforeChange(Txn txn, AllocationGroup ag, TableValueFormat.Extent x) {
        forget(x);
        if (ag.releaseData(txn, x.block(), x.blocks(blockSize)) != AllocOutcome.DONE) {
            return null;
        }
        return ag.freedData(txn);
    }

    /**
     * For a single delete that took {@code ag}'s AGF ({@link AllocationGroup#lockForRelease}) before any node
     * of the table's tree and then deleted the key naming value {@code x} (in {@code ag}) in {@code txn}:
     * puts its blocks on the group's pending-free list ({@link AllocationGroup#deferData}: the free-space
     * trees unchanged, a drain frees them later; {@link #featurePendingFrees} called before) and answers
     * null; or, the list full, frees them there as {@link #freeBeforeChange} does (the AGF held, the free
     * cannot need a refill) and answers what the blocks are busy as. Its frames go now either way.
     */
    BusyExtents.Entry freeAfterDelete(Txn txn, AllocationGroup ag, TableValueFormat.Extent x) {
        forget(x);
        if (!defers) {
            throw new IllegalStateException("the pending-free feature is not set");
        }
        if (ag.deferData(txn, x.block(), x.blocks(blockSize))) {
            return null;
        }
        if (ag.releaseData(txn, x.block(), x.blocks(blockSize)) != AllocOutcome.DONE) { // the journal shuts down rather than log the delete alone
            throw new IllegalStateException("group " + ag.agno + " refused a free while its AGF was held");
        }
        return ag.freedData(txn);
    }

    /** Takes back value {@code x}'s blocks, which {@link #freeAll} freed in the same journal group as {@code busy}. */
    void retake(TableValueFormat.Extent x, BusyExtents.Entry busy) {
        writeBack.retaken(x);
        AllocationGroup ag = groupOf(x);
        for (int fails = 0; ; fails++) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(cache, ag.blockItems())) {
                if (ag.retakeData(txn, x.block(), x.blocks(blockSize), busy) == AllocOutcome.DONE) {
                    txn.commit();
                    return;
                }
            }
            refillOrGiveUp(ag, fails);
        }
    }

    /**
     * For an orphaned table's release: frees value {@code x}'s blocks and, in the same transaction, makes
     * {@code key}'s stub in {@code tree} an inline value of its length, so that a release a crash cut short
     * and run again never frees them twice (by then they may be another value's).
     */
    void release(BTree tree, MemorySegment key, TableValueFormat.Extent x) {
        forget(x);
        byte[] dead = TableValueFormat.extent(x);
        dead[0] = TableValueFormat.INLINE; // same length: replaced in place, no split
        AllocationGroup ag = groupOf(x);
        for (int fails = 0; ; fails++) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(cache, ag.blockItems() + 1 + tree.reservation())) {
                if (ag.releaseData(txn, x.block(), x.blocks(blockSize)) == AllocOutcome.DONE) {
                    BusyExtents.Entry busy = ag.freedData(txn);
                    tree.put(txn, key, MemorySegment.ofArray(dead));
                    busy.settle(txn.commit());
                    return;
                }
            }
            refillOrGiveUp(ag, fails);
        }
    }

    /**
     * Refills {@code ag}'s free list for another try, or gives up after {@link InodeRecords#RETRIES}: inside a
     * journal group with {@link SpaceBusyException}, since the refills may have found the group's free
     * space busy only until the group ends (its own frees, or all of it pending free: {@code Tables}' commit
     * then applies once more after a force and a drain), else with {@link NoSpaceException}.
     */
    private void refillOrGiveUp(AllocationGroup ag, int fails) {
        if (fails == RETRIES) {
            String what = "allocation group " + ag.agno + " cannot refill the free list of its free-space trees";
            if (volume.journal().holdsGroup()) {
                throw new SpaceBusyException(what + " from blocks that are not busy until its journal group ends");
            }
            throw new NoSpaceException(what);
        }
        ag.refillFreeList();
    }

    /**
     * Copies bytes {@code [offset, offset + out.byteSize())} of value {@code x} (as many as there are) into
     * {@code out}, from the cache or reading only the blocks they lie in; checks the CRC when the whole
     * value is read from the device (and caches it if the CRC matched and the cache {@link TableExtentCache#admits}
     * it). A cache hit is not checked again:
     * its frames are tagged as {@code x}'s under the stripe's lock, and only bytes known to be {@code x}'s
     * (written, or read whole with the CRC matching) were ever tagged so ({@link TableExtentCache}). False
     * if the CRC does not match or the stub names blocks past the device's end: the value was replaced
     * meanwhile and its blocks taken again (or is damaged; the caller tells which). A read of part of a
     * value is valid only if the key names the same stub after it (see the class comment).
     */
    boolean read(TableValueFormat.Extent x, long offset, MemorySegment out) {
        long want = Math.max(0, Math.min(out.byteSize(), x.length() - offset));
        if (want == 0) {
            return true;
        }
        int len = x.blocks(blockSize);
        if (!onDevice(x, len)) {
            return false;
        }
        int first = (int) (offset / blockSize);
        int end = (int) ((offset + want + blockSize - 1) / blockSize);
        if (cached.copy(x, first, end, offset, want, out)) {
            return true; // frames tagged as the stub's hold its bytes: checked when they were filled, not again
        }
        boolean whole = offset == 0 && want == x.length(), admit = whole && cached.admits();
        int read = admit ? readIntoRun(x, len, out) : NO_RUN;
        if (read != NO_RUN) {
            return read == READ;
        }
        MemorySegment buf = BUFFERS.get();
        device.read(x.block() + first, buf.asSlice(0, (long) (end - first) * blockSize));
        MemorySegment.copy(buf, offset - (long) first * blockSize, out, 0, want);
        if (whole) {
            if (!matches(x, buf.asSlice(0, want))) {
                return false;
            }
            if (admit) {
                cached.fill(x, buf);
            }
        }
        return true;
    }

    /** {@link #readIntoRun}'s answers. */
    private static final int READ = 1, MISMATCH = 0, NO_RUN = -1;

    /**
     * Reads value {@code x} whole from the device straight into a run of frames reserved for it
     * ({@link TableExtentCache#reserveRun}), checks its CRC there, copies it into {@code out} unless that is
     * null, and maps the run as its cached pages (given back if another fill mapped one meanwhile):
     * READ; MISMATCH (nothing cached) if the CRC does not match; NO_RUN, nothing read, if the cache has no run for it.
     */
    private int readIntoRun(TableValueFormat.Extent x, int len, MemorySegment out) {
        int run = cached.reserveRun(x);
        if (run < 0) {
            return NO_RUN;
        }
        boolean mapped = false;
        try {
            MemorySegment blocks = cached.runBytes(run, len);
            device.read(x.block(), blocks);
            if (!matches(x, blocks.asSlice(0, x.length()))) {
                return MISMATCH;
            }
            if (out != null) {
                MemorySegment.copy(blocks, 0, out, 0, x.length());
            }
            mapped = cached.adopt(x, run);
            return READ;
        } finally {
            if (!mapped) {
                cached.releaseRun(x, run);
            }
        }
    }

    /**
     * Reads value {@code x} whole into the cache without copying it anywhere, for a cursor that then lends
     * it from its frames ({@link TableCursor#value(TableCursor.Pieces)}): a scan of values that miss the
     * cache copied each one from its frames into the cursor's buffer to lend it from there. True if it was
     * read (the cache admits it and its CRC matched); the caller's lend may still miss (another fill held
     * its pages, an eviction took them since) and then reads it the other way. A value the cache would not
     * admit is not counted here: the cursor's read of it the other way ({@link #read}) counts the miss; counted
     * in both, a cursor's misses were admitted more often than a get's (23 values of a working set of 64 lost
     * to a scan in {@code TableExtentTest}, against 17).
     */
    boolean cache(TableValueFormat.Extent x) {
        int len = x.blocks(blockSize);
        if (!onDevice(x, len) || !cached.willAdmit()) {
            return false;
        }
        cached.admits(); // counts this miss, admitted
        return readIntoRun(x, len, null) == READ;
    }

    /** Whether value {@code x}'s {@code len} blocks lie on the device; then runs the tests' {@link #beforeRead}, as a read begins. */
    private boolean onDevice(TableValueFormat.Extent x, int len) {
        if (x.block() < 0 || x.block() + len > device.blockCount()) {
            return false;
        }
        Runnable hook = beforeRead;
        if (hook != null) {
            hook.run();
        }
        return true;
    }

    private static boolean matches(TableValueFormat.Extent x, MemorySegment value) {
        return crc(value) == x.crc();
    }

    /** {@code value}'s checksum, as its stub holds it. */
    static int crc(MemorySegment value) {
        CRC32C crc = new CRC32C();
        crc.update(value.asByteBuffer());
        return (int) crc.getValue();
    }

    /** An extent value a key names that a read under the table's lock did not find whole. */
    CorruptionException damaged(Table t, MemorySegment key, TableValueFormat.Extent x) {
        return new CorruptionException(x.block(), "table value extent", t + " key " + Tables.hex(key) + " names a value of "
                + x.length() + " bytes in blocks [" + x.block() + ", +" + x.blocks(blockSize) + "), which do not match its checksum");
    }
}
