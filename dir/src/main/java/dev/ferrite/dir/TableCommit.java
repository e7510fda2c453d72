package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

/**
 * Applies one table commit's changes, each key's change as a small transaction of its own: a single
 * write's beside other single writes to the table (admitted by {@code Tables#single}, its key's stripe
 * held), a group's either {@link #shared} (its keys' stripes held for the whole group, each change
 * admitted as a single write is, beside the table's other writers) or with the table held exclusively
 * ({@link Inode#lockExclusive}); values arrive in their stored form ({@link TableValueFormat}). Inside a
 * journal group ({@code Journal#pin}) the small transactions share one checkpoint, so the commit is
 * recovered all or nothing however many keys it changes; and each change that a group makes records the
 * key's stored value before it, so that a group that fails part way (no space, too big for the log)
 * undoes what it did, still inside the group, before the error reaches the caller. A change that names
 * a blob links it, one that replaces or deletes a blob's key dooms the blob (a flag cleared on the new
 * one's inode, set on the old one's, in the group, undone with it: {@link TableBlobs}). A medium value's chunks ({@link TableOverflow}) go in before the key that
 * names them and a replaced or deleted one's go after its key changed, all in the group; undone with it
 * (the deleted value's bytes were read first). A medium value in an extent ({@link TableExtents}) is
 * written and allocated before the key names it, and a replaced or deleted one's blocks freed after its
 * key changed, all in the group; undone by freeing the new blocks and taking the freed ones back (a
 * single write that deletes one, or puts an inline value over it, with no snapshot open, frees the blocks
 * in its own transaction instead, with the key's change ({@link #deleteExtent}); one that puts a medium value
 * allocates and writes its extent so, and frees the extent value it replaces, {@link #putExtent}: no group,
 * nothing to undo). One
 * thread uses an instance; an undoable one is its thread's, claimed by each commit and cleared when
 * the commit ends, however it ends ({@link #claim}, {@link #release}).
 */
final class TableCommit {
    static final int PUT = 0, PUT_IF_ABSENT = 1, DELETE = 2;

    /** What a group did, to undo: a key's change, or a medium value's chunks written or deleted. */
    private sealed interface Undo {
    }

    /** A key's stored value before a change of the group: {@code before} null if it was absent. */
    private record KeyUndo(Table table, byte[] key, byte[] before) implements Undo {
    }

    /** Extent value {@code x}'s blocks, allocated and written ({@code freed} null: undone by freeing them) or freed (undone by taking them back). */
    private record ExtentUndo(TableValueFormat.Extent x, BusyExtents.Entry freed) implements Undo {
    }

    /** Extent value {@code x}, table {@code ino}'s {@code key}'s before a multi-key commit, freed by it and {@linkplain BusyExtents.Entry#hold held} busy as {@code busy}. */
    private record HeldFree(long ino, byte[] key, TableValueFormat.Extent x, BusyExtents.Entry busy) {
    }

    /** Extent value {@code x}, table {@code ino}'s {@code key}'s before a change of the group, to free once its keys have changed ({@link #finish}). */
    private record PendingFree(long ino, byte[] key, TableValueFormat.Extent x) {
    }

    private static final Comparator<PendingFree> PENDING_BY_BLOCK =
            (a, b) -> TableExtents.BY_BLOCK.compare(a.x(), b.x());

    /** Medium value {@code m}'s chunks, written ({@code value} null: undone by deleting them) or deleted (undone by writing {@code value} again). */
    private record ChunksUndo(TableValueFormat.Medium m, byte[] value) implements Undo {
    }

    private final BufferCache cache;
    private final DirContents dirs;
    private final InodeRecords records;
    private final TableVersions versions;
    private final TableBlobs blobs;
    private final TableOverflow overflow;
    private final TableExtents extents;
    /** The changes made so far, when the commit may have to undo them; else null. */
    private final List<Undo> undo;
    /**
     * Arrays of {@link #spareLength} bytes that held prior values of this engine's last commits and that
     * nothing refers to any more ({@link #recycle}), for the next commit's prior values of that length
     * ({@link #prior}); null for a single writes' engine. A batch of overwrites copied each key's prior
     * value into a fresh array: with 1 KiB values 82% of the bytes a batch put allocated, which two
     * writers on two CPUs turned into heap grown into fresh memory (a third of a page fault a put).
     */
    private final ArrayDeque<byte[]> spares;
    /** The length of every array in {@link #spares}. */
    private int spareLength = -1;
    /** The most bytes {@link #spares} keeps: a batch of 1,000 1 KiB values' priors. */
    private static final int SPARE_BYTES = 1 << 20;
    /** The extent values this multi-key commit freed whose stubs its records hold ({@link #releaseFrees}). */
    private final List<HeldFree> held;
    /** The extent values this group's changes replaced or deleted, freed together when it ends. */
    private final List<PendingFree> frees;
    /** The blocks this group allocated for its medium values and has not handed out yet. */
    private final TableExtents.Run run;
    /** The blocks of this group's medium values still to apply: the most its next {@link #run} needs. */
    long mediumBlocks;
    /** The blocks of the extent values this group freed ({@link #finish}). */
    long freedBlocks;
    /** Blobs this group's keys now name (by the ids they were written under: its commit must not discard them). */
    final List<Long> linked;
    /** Names of the blob files this group left no key naming, for the reaper once the group is done. */
    final List<String> doomed;
    /** This group's changes of blob files, in order (undone in reverse if it fails). */
    private final List<TableBlobs.Change> blobChanges;
    private final MemorySegment keyOut, valueOut;
    /** {@link #deleteExtent}'s check of the value it deletes, which takes its group's AGF: {@link #freeable}. */
    private final BTree.PriorCheck freeable = this::freeable;
    /** A group's change's condition on the key's prior value, read in the change's descent: {@link #inlineOrExtent}. */
    private final BTree.PriorCheck inlineOrExtent = this::inlineOrExtent;
    /** The inode number of the table of the change {@link #inlineOrExtent} checks. */
    private long checkedIno;
    /**
     * During {@link #deleteExtent}: its transaction, the group whose AGF it holds (null until its check
     * takes one), the items it reserved for a group's change, and the table's inode number.
     */
    private Txn freeing;
    private AllocationGroup freeableIn;
    private int freeableItems;
    private long freeableIno;
    /** Commit sequence of the last change made. */
    long seq = -1;
    /** The applying commit's version ({@link TableVersions#beginApply}): not 0, each change records the key's prior value there first. */
    long version;
    /** The multi-key commit's prior values for latest-state reads ({@link TablePublication}), or null: each change records there first. */
    TablePublication.Commit published;
    /** The items of the last transaction that found no log space ({@link #awaitLogSpace} waits for as many). */
    private int refused;
    /** Between {@link #claim} and {@link #release}. */
    private boolean claimed;
    /**
     * A group applying side by side with others on its tables ({@code Tables#commit}): it holds its keys'
     * stripes, not the tables, so each change enters its table as a single write does, and a key found
     * holding a value kept out of line answers NEEDS_GROUP, changing nothing (such a commit keeps its
     * tables to itself). Set by the commit after {@link #claim}.
     */
    boolean shared;

    TableCommit(BufferCache cache, DirContents dirs, InodeRecords records, TableVersions versions, TableBlobs blobs,
                TableOverflow overflow, TableExtents extents, boolean undoable) {
        this.cache = cache;
        this.dirs = dirs;
        this.records = records;
        this.versions = versions;
        this.blobs = blobs;
        this.overflow = overflow;
        this.extents = extents;
        this.undo = undoable ? new ArrayList<>() : null;
        this.spares = undoable ? new ArrayDeque<>() : null;
        this.held = undoable ? new ArrayList<>() : null;
        this.frees = undoable ? new ArrayList<>() : null;
        this.run = undoable ? new TableExtents.Run() : null;
        this.linked = undoable ? new ArrayList<>() : null;
        this.doomed = undoable ? new ArrayList<>() : null;
        this.blobChanges = undoable ? new ArrayList<>() : null;
        this.keyOut = MemorySegment.ofArray(new byte[Table.MAX_KEY]);
        this.valueOut = MemorySegment.ofArray(new byte[Table.MAX_TREE_VALUE]);
    }

    /**
     * Starts a commit's use of this undoable engine ({@code Tables} keeps one per thread): nothing done
     * yet. False, changing nothing, if a commit of this thread is using it already.
     */
    boolean claim() {
        if (claimed) {
            return false;
        }
        claimed = true;
        seq = -1;
        version = 0;
        shared = false;
        mediumBlocks = freedBlocks = 0;
        run.reset();
        return true;
    }

    /** Ends the use {@link #claim} began, dropping what the commit did (keys, values, blob ids). */
    void release() {
        undo.clear();
        frees.clear();
        linked.clear();
        doomed.clear();
        blobChanges.clear();
        published = null; // its records go once no cursor opened before it ended holds them
        claimed = false;
    }

    /** True if this engine writes through {@code c}, i.e. into the volume whose cache that is. */
    boolean writesThrough(BufferCache c) {
        return cache == c;
    }

    /**
     * What {@link #apply} came to: the table unchanged, changed, or (a single write or a {@link #shared}
     * group, nothing changed) a group holding the table needed, or no log space now ({@link #awaitLogSpace}).
     */
    static final int UNCHANGED = 0, CHANGED = 1, NEEDS_GROUP = 2, NO_LOG_SPACE = 3;

    /** {@link #changeHeld}'s lookup of the key's value not made yet (a {@link BTree#find} answers -1 or more). */
    private static final long UNLOOKED = -2;

    /**
     * Changes {@code key} of {@code t} ({@code op}: PUT or PUT_IF_ABSENT with the stored {@code value}, or
     * DELETE) in a transaction of its own (see the class comment for what the caller holds). A commit that is not undoable (a
     * single write) answers NEEDS_GROUP, having changed nothing, when the key names a blob or a medium
     * value in chunks (its change must doom the blob, or delete the chunks, in a group), or an extent value
     * while a snapshot is open (the group reads its bytes first) or its group's free list needs a refill;
     * else it frees a replaced or deleted extent value's blocks in its transaction, with the key's change. It does not wait for log
     * space, since its caller has entered the table, which writers holding theirs may wait to lock: it
     * answers NO_LOG_SPACE, having changed nothing, and its caller leaves and {@link #awaitLogSpace}s.
     *
     * @return UNCHANGED, CHANGED, NEEDS_GROUP or NO_LOG_SPACE
     * @throws TableException TABLE_CLOSED if the table was dropped
     */
    int apply(Table t, MemorySegment key, MemorySegment value, int op) {
        return change(t, null, key, value, op, true);
    }

    /**
     * {@link #apply} of {@code key}, an array no one changes (a transaction's own copy), in {@code view}: the
     * records of its prior value (the undo's, latest-state reads', snapshots') keep the array, not a copy.
     */
    int apply(Table t, byte[] key, MemorySegment view, MemorySegment value, int op) {
        return change(t, key, view, value, op, true);
    }

    /**
     * After a single write's NO_LOG_SPACE, holding no lock: waits until the log has the space a change of
     * {@code t} reserves (space the journal frees as its tail moves), then gives it back for the retry.
     */
    void awaitLogSpace(Table t) {
        Txn.begin(cache, Math.max(2 + t.tree().reservation(), refused)).close();
    }

    /**
     * {@link #apply} of PUT or PUT_IF_ABSENT with medium {@code value} itself (not its stored form), in an
     * undoable commit: its extent (or, with no room for one, its chunks) is written first, then the key
     * names it. {@code key} and {@code view} as {@link #apply(Table, byte[], MemorySegment, MemorySegment, int)}'s.
     */
    int applyMedium(Table t, byte[] key, MemorySegment view, MemorySegment value, int op) {
        if (op == PUT_IF_ABSENT && t.tree().get(view, MemorySegment.NULL) >= 0) {
            mediumBlocks -= extents.blocks(value.byteSize());
            return UNCHANGED; // the table's lock, held, keeps the answer true: no chunks to write
        }
        long want = mediumBlocks;
        mediumBlocks -= extents.blocks(value.byteSize());
        TableValueFormat.Extent x = extents.write(value, t.inode.ino, run, want);
        if (x != null) {
            undo.add(new ExtentUndo(x, null)); // first: a change failing is undone too
            return change(t, key, view, MemorySegment.ofArray(TableValueFormat.extent(x)), op, true);
        }
        overflow.tree(true); // no room for an extent: chunks, the tree made first (a failure to make it leaves nothing to undo)
        TableValueFormat.Medium m = overflow.describe(value);
        undo.add(new ChunksUndo(m, null)); // first: a write failing part way is undone too
        overflow.write(m, value);
        return change(t, key, view, MemorySegment.ofArray(TableValueFormat.medium(m)), op, true);
    }

    /**
     * A single write's PUT of medium {@code value} itself (checksum {@code crc}) into an extent, as {@link
     * #apply} (the key's stripe held, the table entered), in one transaction with no group: an allocation
     * group's AGF first (the table's home group's, or the next with room; for a key naming an extent
     * value, that value's group, whose blocks it frees there too), the value's blocks allocated, its write
     * left to the log in the room {@link TableExtents#prepareSingle} reserved, the key's change ordered
     * after data. The transaction recovers the allocation, the free and the stub together or none of them.
     * NEEDS_GROUP, nothing changed, if it is not that: a snapshot open, the key naming a value kept out of
     * line otherwise (chunks or a blob), no group with a free run of the blocks that is not busy and a
     * free list that needs no refill ({@link TableExtents#writeSingle}, {@link TableExtents#replaceSingle}).
     *
     * @return CHANGED, NEEDS_GROUP or NO_LOG_SPACE; on CHANGED the reserved room is used
     */
    int putExtent(Table t, MemorySegment k, MemorySegment value, int crc) {
        if (t.inode.unlinked) {
            throw new TableException(TableException.Kind.TABLE_CLOSED, t + " was dropped");
        }
        if (version != 0) {
            return NEEDS_GROUP; // the group records the value it replaces for the snapshot
        }
        BTree tree = t.tree();
        long found = tree.find(null, k, BTree.Match.EXACT, keyOut, valueOut); // holding nothing: the stripe keeps the key's value
        TableValueFormat.Extent old = null;
        if (found >= 0) {
            byte kind = TableValueFormat.kind(valueOut, BTree.foundValueLength(found), t.inode.ino);
            if (kind == TableValueFormat.EXTENT) {
                old = TableValueFormat.readExtent(valueOut);
            } else if (kind != TableValueFormat.INLINE) {
                return NEEDS_GROUP;
            }
        }
        AllocationGroup ag = old != null ? extents.groupOf(old) : extents.homeGroup(t.inode.ino);
        int groupItems = ag.blockItems();
        int items = 2 + tree.reservation() + (old != null ? 2 * groupItems : groupItems); // a replacement allocates and frees
        Txn begun = Txn.tryBegin(cache, items);
        if (begun == null) {
            refused = items;
            return NO_LOG_SPACE;
        }
        BusyExtents.Entry freed = null;
        try (Txn txn = begun) {
            TableValueFormat.Extent x = old != null ? extents.replaceSingle(txn, old, value, crc)
                    : extents.writeSingle(txn, t.inode.ino, groupItems, value, crc);
            if (x == null) {
                return NEEDS_GROUP; // nothing logged: the transaction ends without a commit
            }
            if (old != null) {
                freed = ag.freedData(txn);
            }
            tree.put(txn, k, MemorySegment.ofArray(TableValueFormat.extent(x)));
            txn.orderAfterData(); // its blocks are written by the log before the checkpoint
            seq = txn.commit();
        }
        if (freed != null) {
            freed.settle(seq); // busy until the free is durable: a crash before gives the key its old value back
        }
        return CHANGED;
    }

    /**
     * One change; {@code forward} false for one that undoes an earlier change of the group, which records
     * nothing. A {@link #shared} group's enters the table first, as a single write does ({@code
     * DirContents#enter}: its claim on the tree's block reserve, a refill or spill made first), and leaves
     * after it.
     */
    private int change(Table t, byte[] keyBytes, MemorySegment k, MemorySegment value, int op, boolean forward) {
        if (!shared) {
            return changeHeld(t, keyBytes, k, value, op, forward);
        }
        int claim = dirs.enter(t.inode, t.tree().height() + 2, value == null);
        if (claim < 0) { // a table's tree is made with it and goes only once it is freed
            throw new CorruptionException(records.block(t.inode.ino), "table", t + "'s inode " + t.inode.ino + " holds no tree");
        }
        try {
            return changeHeld(t, keyBytes, k, value, op, forward);
        } finally {
            t.inode.leave(claim);
        }
    }

    /** {@link #change}, the key kept from other writers (its stripe held, or the table) and, if {@link #shared}, the table entered. */
    private int changeHeld(Table t, byte[] keyBytes, MemorySegment k, MemorySegment value, int op, boolean forward) {
        long ino = t.inode.ino;
        boolean mayHoldOutOfLine = blobs.directory() != 0 || overflow.inode() != 0 || extents.inUse();
        TableValueFormat.Extent prior = null; // the extent value this change replaces, read for snapshots (a group's)
        byte[] priorBytes = null;
        boolean looked = false;
        for (;;) {
            // read before any block is locked (a lock-free read of a block this thread holds would wait for
            // ever). A single write was admitted with its claim on the reserve ({@code Tables#single}); a
            // group that is not shared holds the table exclusively, which keeps the step's answer true; a
            // shared one entered the table as a single write does
            int step = value == null ? DirContents.REMOVAL : 0;
            if (undo != null && !shared && dirs.step(t.inode, step) != DirContents.READY) {
                dirs.prepare(t.inode, step); // the tree's block reserve between its marks, in transactions of its own
                continue;
            }
            // the drop sets it holding the table exclusively, so it holds still while this writer is inside (or
            // holds the table); an undo puts back what the group changed, dropped or not
            if (forward && t.inode.unlinked) {
                throw new TableException(TableException.Kind.TABLE_CLOSED, t + " was dropped");
            }
            BTree tree = t.tree();
            if (forward && version != 0 && undo != null && !shared && extents.inUse() && !looked) {
                // a replaced extent value's bytes, read before any node is held (no I/O under a latch): the
                // group holds the table exclusively, so the key keeps that value until this change (a shared
                // group meeting an extent value answers NEEDS_GROUP below instead)
                looked = true;
                int n = tree.get(k, valueOut);
                if (n >= 0 && TableValueFormat.isExtent(valueOut, n)) {
                    prior = TableValueFormat.readExtent(valueOut);
                    priorBytes = new byte[1 + prior.length()]; // kind INLINE
                    if (!extents.read(prior, 0, MemorySegment.ofArray(priorBytes).asSlice(1))) {
                        throw extents.damaged(t, k, prior);
                    }
                }
            }
            byte[] before = null, key = null, replaced = null;
            TableValueFormat.Blob doomedBlob = null, linkedBlob = null;
            TableValueFormat.Medium medium = null;
            TableValueFormat.Extent freeing = null;
            byte valueKind = value == null ? TableValueFormat.INLINE : TableValueFormat.kind(value, value.byteSize(), ino);
            // a change that records the key's prior value, in a volume whose values are all in the trees,
            // reads it in the change's own descent, under the leaf's lock (the caller keeps other writers
            // off the key); one whose value may lie out of line looks first, holding nothing
            boolean fused = forward && !mayHoldOutOfLine && op != PUT_IF_ABSENT && (undo != null || version != 0)
                    && (value == null || value.get(ValueLayout.JAVA_BYTE, 0) == TableValueFormat.INLINE);
            // so does one of a group holding its tables, no snapshot open, whose values may lie out of line,
            // if the key holds an inline or an extent value (the stub is all its undo and records need, so
            // nothing is read under the lock); over chunks or a blob it changes nothing and looks first
            boolean checked = forward && mayHoldOutOfLine && undo != null && !shared && version == 0 && op != PUT_IF_ABSENT
                    && (valueKind == TableValueFormat.INLINE || valueKind == TableValueFormat.EXTENT);
            int items = 2 + tree.reservation(); // the record's block is taken by a split or merge (DirAllocator)
            // a single write, no snapshot open, that replaces or deletes an extent value frees its blocks in
            // its own transaction instead of a group's: it looks holding nothing (its stripe keeps the key's
            // value), so that the transaction reserves for the free too
            long found = UNLOOKED;
            AllocationGroup freeIn = null;
            if (forward && undo == null && version == 0 && op == DELETE && extents.inUse()) {
                int outcome = deleteExtent(t, k, null);
                if (outcome != NOT_HERE) {
                    return outcome;
                }
            }
            if (forward && undo == null && version == 0 && op != PUT_IF_ABSENT && extents.inUse()) {
                found = tree.find(null, k, BTree.Match.EXACT, keyOut, valueOut);
                if (found >= 0 && TableValueFormat.isExtent(valueOut, BTree.foundValueLength(found))) {
                    freeIn = extents.groupOf(TableValueFormat.readExtent(valueOut));
                    if (op == DELETE) {
                        int outcome = deleteExtent(t, k, freeIn); // its AGF first this time, waiting for it
                        if (outcome != NOT_HERE) {
                            return outcome;
                        }
                        found = UNLOOKED; // looked at again below, in the transaction
                    }
                    if (freeIn.needsRefill()) {
                        return NEEDS_GROUP; // its refill waits for log space, which a writer inside the table must not
                    }
                    items += freeIn.blockItems();
                }
            }
            BusyExtents.Entry freedHere = null;
            Txn begun = undo != null ? Txn.begin(cache, items) : Txn.tryBegin(cache, items);
            if (begun == null) {
                refused = items;
                return NO_LOG_SPACE;
            }
            try (Txn txn = begun) {
                int had = BTree.REFUSED;
                if (checked) {
                    checkedIno = ino;
                    had = op == PUT ? tree.replaceIf(txn, k, value, valueOut, inlineOrExtent) : tree.deleteIf(txn, k, valueOut, inlineOrExtent);
                } else if (fused) {
                    had = op == PUT ? tree.replace(txn, k, value, valueOut) : tree.delete(txn, k, valueOut);
                }
                if (had != BTree.REFUSED) {
                    if (op == DELETE && had < 0) {
                        return UNCHANGED; // nothing logged: the transaction ends without a commit
                    }
                    key = keyBytes != null ? keyBytes : bytes(k, (int) k.byteSize());
                    before = had < 0 ? null : prior(had);
                    if (checked && had >= 0 && TableValueFormat.isExtent(valueOut, had)) {
                        freeing = TableValueFormat.readExtent(valueOut); // freed after the commit, as below
                    }
                    record(ino, key, before); // before the change can be seen: the leaf stays locked until the commit
                    if (valueKind == TableValueFormat.EXTENT) {
                        txn.orderAfterData();
                    }
                    seq = txn.commit();
                } else {
                    if (forward && (undo != null || version != 0 || mayHoldOutOfLine)) {
                        if (found == UNLOOKED) {
                            found = tree.find(txn, k, BTree.Match.EXACT, keyOut, valueOut);
                        }
                        int length = found >= 0 ? BTree.foundValueLength(found) : -1;
                        byte kind = length >= 0 ? TableValueFormat.kind(valueOut, length, ino) : TableValueFormat.INLINE;
                        if (freeIn != null) {
                            freedHere = extents.freeBeforeChange(txn, freeIn, TableValueFormat.readExtent(valueOut));
                            if (freedHere == null) {
                                return NEEDS_GROUP; // nothing changed, the AGF let go: the group refills the free list
                            }
                        } else if (kind != TableValueFormat.INLINE && (undo == null || shared)) {
                            return NEEDS_GROUP; // nothing changed: the transaction ends without a commit
                        }
                        if (kind == TableValueFormat.BLOB) {
                            doomedBlob = op == PUT_IF_ABSENT ? null : TableValueFormat.readBlob(valueOut);
                        } else if (kind == TableValueFormat.MEDIUM && op != PUT_IF_ABSENT) {
                            medium = TableValueFormat.readMedium(valueOut);
                            replaced = new byte[1 + medium.length()]; // its bytes, for the undo and for snapshots: its chunks go after this change
                            if (!overflow.read(medium, 0, MemorySegment.ofArray(replaced).asSlice(1))) { // the table's lock held: nothing changes them
                                throw TableOverflow.damaged(t, k, medium);
                            }
                        } else if (kind == TableValueFormat.EXTENT && op != PUT_IF_ABSENT) {
                            freeing = TableValueFormat.readExtent(valueOut); // its blocks go after this change; the undo needs only the stub
                            if (version != 0) { // a snapshot gets its bytes: the blocks may be reused once the free is durable
                                if (!freeing.equals(prior)) {
                                    throw new IllegalStateException(t + " key " + Tables.hex(k) + " changed while its group held the table");
                                }
                                replaced = priorBytes;
                            }
                        }
                        if (undo != null || version != 0) {
                            key = keyBytes != null ? keyBytes : bytes(k, (int) k.byteSize());
                            before = length < 0 ? null : prior(length);
                        }
                        record(ino, key, replaced != null ? replaced : before); // before the change can be seen: at its commit; a medium value by its bytes (kind INLINE)
                    }
                    if (forward && undo != null && valueKind == TableValueFormat.BLOB) {
                        linkedBlob = TableValueFormat.readBlob(value);
                    }
                    boolean changed = switch (op) {
                        case PUT -> {
                            tree.put(txn, k, value);
                            yield true;
                        }
                        case PUT_IF_ABSENT -> tree.putIfAbsent(txn, k, value);
                        case DELETE -> tree.delete(txn, k);
                        default -> throw new IllegalArgumentException("table change " + op);
                    };
                    if (!changed) {
                        if (freedHere != null) { // cancelled after its free: the journal shuts down rather than log half of it
                            throw new IllegalStateException(t + " key " + Tables.hex(k) + " changed while its stripe was held");
                        }
                        return UNCHANGED; // nothing logged: the transaction ends without a commit
                    }
                    if (valueKind == TableValueFormat.EXTENT || valueKind == TableValueFormat.BLOB) {
                        txn.orderAfterData(); // the blocks it names (an extent's, a blob file's) were written just before
                    }
                    seq = txn.commit();
                    if (freedHere != null) {
                        freedHere.settle(seq); // busy until the free is durable: a crash before gives the key its stub back
                    }
                }
            }
            if (forward && undo != null) {
                undo.add(new KeyUndo(t, key, before));
                if (medium != null) {
                    undo.add(new ChunksUndo(medium, replaced));
                    overflow.delete(medium);
                }
                if (freeing != null) {
                    frees.add(new PendingFree(ino, key, freeing)); // with the group's others, at its end
                }
                TableBlobs.Change r = null;
                if (linkedBlob != null) {
                    r = doomedBlob != null ? new TableBlobs.Change.Replace(linkedBlob, doomedBlob) : new TableBlobs.Change.Link(linkedBlob);
                    linked.add(linkedBlob.id());
                } else if (doomedBlob != null) {
                    r = new TableBlobs.Change.Doom(doomedBlob);
                }
                if (r != null) {
                    blobs.apply(r);
                    blobChanges.add(r);
                    if (r.doomed() != null) {
                        doomed.add(r.doomed());
                    }
                }
            }
            return CHANGED;
        }
    }

    /** What {@link #deleteExtent} answers when the key's value is not one it can delete: look it up first. */
    private static final int NOT_HERE = -100;

    /**
     * A single DELETE (no snapshot open) of a key that likely holds an inline or extent value, in one
     * descent: deletes it if the value is inline, or an extent value whose group's AGF the transaction
     * takes, looking at the value under the leaf's lock, and puts that extent on the group's pending-free
     * list in the same transaction (frees it there if the list is full: {@link
     * TableExtents#freeAfterDelete}). With {@code ag} null, the AGF is taken under the leaf's lock, only if
     * no one holds it (after a short spin): a holder may be an allocation about to insert into this leaf,
     * so waiting could deadlock; the AGF is so held only from the change to the commit, not through the
     * descent, and deletes of values in one group by several threads overlap (issue 17). With {@code ag}
     * (where a look before found the value), {@code ag}'s AGF is taken first, waiting, in the order of
     * {@link TableExtents#freeBeforeChange}: before any node of the table's tree. After the commit, with no
     * lock held, a list half full or more is drained, unless that would wait (a writer inside a table must
     * not wait for log space or a refill: the list fills up meanwhile). NOT_HERE, nothing changed, if the
     * free list needs a refill, the AGF is busy or the value lies elsewhere (another group than {@code
     * ag}, a blob, chunks): the caller looks the key up first.
     *
     * @return UNCHANGED, CHANGED, NO_LOG_SPACE or NOT_HERE
     */
    private int deleteExtent(Table t, MemorySegment k, AllocationGroup ag) {
        if (ag != null && ag.needsRefill()) {
            return NOT_HERE;
        }
        extents.featurePendingFrees();
        BTree tree = t.tree();
        int groupItems = (ag != null ? ag : extents.homeGroup(t.inode.ino)).blockItems(); // the groups' trees are alike in height
        int items = 2 + tree.reservation() + groupItems;
        Txn begun = Txn.tryBegin(cache, items);
        if (begun == null) {
            refused = items;
            return NO_LOG_SPACE;
        }
        try (Txn txn = begun) {
            if (ag != null && !ag.lockForRelease(txn)) {
                return NOT_HERE; // nothing changed, the AGF let go
            }
            freeing = txn;
            freeableIn = ag;
            freeableItems = groupItems;
            freeableIno = t.inode.ino;
            int length = tree.deleteIf(txn, k, valueOut, freeable);
            if (length == BTree.REFUSED) {
                return NOT_HERE; // nothing changed: the transaction ends without a commit
            }
            if (length < 0) {
                return UNCHANGED;
            }
            BusyExtents.Entry freed = null;
            boolean extent = TableValueFormat.isExtent(valueOut, length);
            AllocationGroup in = freeableIn;
            if (extent) {
                freed = extents.freeAfterDelete(txn, in, TableValueFormat.readExtent(valueOut));
            }
            seq = txn.commit();
            if (freed != null) {
                freed.settle(seq); // busy until the free is durable: a crash before gives the key its stub back
            }
            if (extent && in.pendingHalfFull()) {
                in.drainPending(false); // no lock held; inside the table, so it gives up rather than wait
            }
            return CHANGED;
        } finally {
            freeing = null;
            freeableIn = null;
        }
    }

    /** Tries {@link #deleteExtent}'s check makes for a busy AGF before it gives up (each a spin-wait hint). */
    private static final int AGF_TRIES = 64;

    /**
     * {@link #deleteExtent}'s check, under the leaf's lock: an inline value goes; an extent value goes if
     * it lies in the group whose AGF the delete took first, or, with none taken, if its group's AGF is
     * taken now without waiting and its change fits the items reserved.
     */
    private boolean freeable(MemorySegment prior, int length) {
        byte kind = TableValueFormat.kind(prior, length, freeableIno);
        if (kind == TableValueFormat.INLINE) {
            return true;
        }
        if (kind != TableValueFormat.EXTENT) {
            return false;
        }
        AllocationGroup g = extents.groupHolding(TableValueFormat.readExtent(prior));
        if (g == null) {
            return false; // a stub outside the groups' free space: the look first names the damage
        }
        if (freeableIn != null) {
            return g == freeableIn;
        }
        if (g.blockItems() > freeableItems) {
            return false;
        }
        for (int i = 0; i < AGF_TRIES; i++) {
            if (g.tryLockForRelease(freeing)) {
                freeableIn = g;
                return true;
            }
            if (g.needsRefill()) {
                return false;
            }
            Thread.onSpinWait();
        }
        return false;
    }

    /** An inline value, or an extent value: the prior values a group's change reads in its own descent. */
    private boolean inlineOrExtent(MemorySegment prior, int length) {
        byte kind = TableValueFormat.kind(prior, length, checkedIno);
        return kind == TableValueFormat.INLINE || kind == TableValueFormat.EXTENT;
    }

    /**
     * A copy of the first {@code length} bytes of {@link #valueOut} (a key's prior value, just read), in a
     * spare array of that length if this engine has one ({@link #spares}), else in a new one.
     */
    private byte[] prior(int length) {
        byte[] a = spares != null && length == spareLength ? spares.pollLast() : null;
        if (a == null) {
            return bytes(valueOut, length);
        }
        MemorySegment.copy(valueOut, ValueLayout.JAVA_BYTE, 0, a, 0, length);
        return a;
    }

    /**
     * Keeps the prior values this commit copied ({@link #prior}) as spares for the next commits, if nothing
     * can read them any more: not a commit that took a version (a snapshot's chains keep its records), and,
     * for one that published records ({@link TablePublication}), only if no latest-state cursor or read is
     * counted open after its {@link TablePublication#end} ({@code cursorsOpen}: a cursor opened before
     * it may read its records later, and a {@code get} that found a record copies it out counted, see
     * {@code Tables#unpublished}); one counted after the end finds no record of it. Called once the
     * commit is published (or undone: its undo list is empty then) and before {@link #release}.
     */
    void recycle(TablePublication publication) {
        if (version != 0 || published != null && publication.cursorsOpen()) {
            return;
        }
        for (Undo u : undo) {
            if (u instanceof KeyUndo k && k.before() != null) {
                byte[] a = k.before();
                if (a.length != spareLength) {
                    if (!spares.isEmpty() || a.length == 0) {
                        continue; // spares of one length at a time: a batch's values mostly share theirs
                    }
                    spareLength = a.length;
                }
                if ((long) (spares.size() + 1) * a.length > SPARE_BYTES) {
                    return;
                }
                spares.addLast(a);
            }
        }
    }

    /**
     * The first {@code length} bytes of {@code s} in a new array: what a slice's {@code toArray} gives,
     * without the slice, and without the array type's name {@code toArray} looks up (through the class's
     * reflection data) for its size check on every call.
     */
    private static byte[] bytes(MemorySegment s, int length) {
        byte[] a = new byte[length];
        MemorySegment.copy(s, ValueLayout.JAVA_BYTE, 0, a, 0, length);
        return a;
    }

    /**
     * After the multi-key commit is published ({@link TablePublication#end}), lets go of the extent values
     * it freed whose stubs its records hold. A cursor that opened before the publication and reads a record
     * later needs the value's bytes, and the blocks may be another value's once their free is durable: if a
     * cursor is open now ({@link TablePublication#cursorsOpen}, read after the publication), each such
     * record is first replaced with the value's bytes, read from the blocks still held busy. If none is,
     * no cursor can read the records (one opening from now on sees the commit published), and a read of
     * the table's latest state that was handed a stub while the commit applied checks what it read (the
     * stub's CRC, or the key still naming it) and reads the key again. So a commit with no cursor open, the
     * common case, copies nothing where it used to read every replaced value onto the heap. A record whose
     * value cannot be read keeps its blocks busy until the volume is mounted again.
     */
    void releaseFrees(TablePublication publication) {
        if (held.isEmpty()) {
            return;
        }
        boolean copy = publication.cursorsOpen();
        for (HeldFree h : held) {
            if (copy && !copied(h)) {
                continue;
            }
            h.busy().release();
        }
        held.clear();
    }

    /** Whether {@code h}'s record now holds its value's bytes (kind INLINE) instead of its stub. */
    private boolean copied(HeldFree h) {
        byte[] bytes = new byte[1 + h.x().length()];
        try {
            if (!extents.read(h.x(), 0, MemorySegment.ofArray(bytes).asSlice(1))) {
                return false;
            }
        } catch (RuntimeException e) { // a failed read: a cursor reading the stub meets it too, the blocks unchanged
            return false;
        }
        published.rerecord(h.ino(), h.key(), bytes);
        return true;
    }

    /**
     * Ends a group whose changes all applied, still inside it: frees the extent values they replaced or
     * deleted, a few transactions for them all ({@link TableExtents#freeAll}), and what is left of its
     * {@link #run}, running {@code check} (the group's room in the log: it throws if the group must stop)
     * every {@value #FREES_CHECKED} frees, as the group does after each change. A failure here leaves the
     * group to {@link #undoAll}, as any change's does.
     */
    void finish(Runnable check) {
        if (!frees.isEmpty()) {
            freePending(check);
        }
        extents.freeRest(run);
    }

    /** Frees ({@link TableExtents#freeAll}) after which {@link #finish} checks the group's room again, at the end of that transaction. */
    private static final int FREES_CHECKED = 256;

    private void freePending(Runnable check) {
        frees.sort(PENDING_BY_BLOCK);
        int n = frees.size();
        TableValueFormat.Extent[] xs = new TableValueFormat.Extent[n];
        for (int i = 0; i < n; i++) {
            xs[i] = frees.get(i).x();
            freedBlocks += extents.blocks(xs[i].length());
        }
        BusyExtents.Entry[] busy = new BusyExtents.Entry[n];
        // latest-state readers get their stubs (the records, without a snapshot): busy until releaseFrees
        boolean hold = published != null && version == 0;
        try {
            extents.freeAll(xs, n, hold, busy, FREES_CHECKED, check);
        } finally {
            for (int i = 0; i < n; i++) {
                if (busy[i] != null) { // freed: taken back if the group fails from here
                    undo.add(new ExtentUndo(xs[i], busy[i]));
                    if (hold) {
                        held.add(new HeldFree(frees.get(i).ino(), frees.get(i).key(), xs[i], busy[i]));
                    }
                }
            }
            frees.clear();
        }
    }

    /** Records {@code key}'s prior value for snapshots (with a version) and for latest-state reads (a multi-key commit's). */
    private void record(long ino, byte[] key, byte[] before) {
        if (version != 0) {
            versions.record(version, ino, key, before);
        }
        if (published != null) {
            published.record(ino, key, before);
        }
    }

    /**
     * Undoes this group's changes, newest first, each as a change of its own inside the group, then its
     * blobs' flags. Throws if one fails: the caller must then shut the journal down, so that the group
     * never reaches the log.
     */
    void undoAll() {
        frees.clear(); // not freed yet: the keys' undo names them again
        for (int i = undo.size() - 1; i >= 0; i--) {
            switch (undo.get(i)) {
                case KeyUndo u -> change(u.table(), u.key(), MemorySegment.ofArray(u.key()), u.before() == null ? null : MemorySegment.ofArray(u.before()),
                        u.before() == null ? DELETE : PUT, false);
                case ExtentUndo u when u.freed() == null -> extents.unwrite(u.x());
                case ExtentUndo u -> extents.retake(u.x(), u.freed());
                case ChunksUndo u when u.value() == null -> overflow.delete(u.m());
                case ChunksUndo u -> overflow.write(u.m(), MemorySegment.ofArray(u.value()).asSlice(1));
            }
        }
        undo.clear();
        extents.freeRest(run);
        for (int i = blobChanges.size() - 1; i >= 0; i--) {
            blobs.undo(blobChanges.get(i));
        }
        linked.clear();
        doomed.clear();
        blobChanges.clear();
    }
}
