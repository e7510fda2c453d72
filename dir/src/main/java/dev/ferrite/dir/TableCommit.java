package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;

/**
 * Applies one table commit's changes, each key's change as a small transaction of its own, the table's
 * lock held by the caller; values arrive in their stored form ({@link TableValueFormat}). Inside a
 * journal group ({@code Journal#pin}) the small transactions share one checkpoint, so the commit is
 * recovered all or nothing however many keys it changes; and each change that a group makes records the
 * key's stored value before it, so that a group that fails part way (no space, too big for the log)
 * undoes what it did, still inside the group, before the error reaches the caller. A change that names
 * a blob links it, one that replaces or deletes a blob's key dooms the blob (renames in the group, undone
 * with it: {@link TableBlobs}). One thread uses an instance.
 */
final class TableCommit {
    static final int PUT = 0, PUT_IF_ABSENT = 1, DELETE = 2;

    /** A key's stored value before a change of the group: {@code before} null if it was absent. */
    private record Undo(Table table, byte[] key, byte[] before) {
    }

    private final BufferCache cache;
    private final DirContents dirs;
    private final InodeRecords records;
    private final TableVersions versions;
    private final TableBlobs blobs;
    /** The changes made so far, when the commit may have to undo them; else null. */
    private final List<Undo> undo;
    /** Blobs this group linked and doomed, in order (undone in reverse if it fails). */
    final List<Long> linked, doomed;
    private final MemorySegment keyOut, valueOut;
    /** Commit sequence of the last change made. */
    long seq = -1;
    /** The applying commit's version ({@link TableVersions#beginApply}): not 0, each change records the key's prior value there first. */
    long version;

    TableCommit(BufferCache cache, DirContents dirs, InodeRecords records, TableVersions versions, TableBlobs blobs,
                boolean undoable) {
        this.cache = cache;
        this.dirs = dirs;
        this.records = records;
        this.versions = versions;
        this.blobs = blobs;
        this.undo = undoable ? new ArrayList<>() : null;
        this.linked = undoable ? new ArrayList<>() : null;
        this.doomed = undoable ? new ArrayList<>() : null;
        this.keyOut = MemorySegment.ofArray(new byte[Table.MAX_KEY]);
        this.valueOut = MemorySegment.ofArray(new byte[Table.MAX_TREE_VALUE]);
    }

    /** What {@link #apply} came to: the table unchanged, changed, or (a single write) a group needed. */
    static final int UNCHANGED = 0, CHANGED = 1, NEEDS_GROUP = 2;

    /**
     * Changes {@code key} of {@code t} ({@code op}: PUT or PUT_IF_ABSENT with the stored {@code value}, or
     * DELETE) in a transaction of its own; {@code t}'s lock is held. A commit that is not undoable (a
     * single write) answers NEEDS_GROUP, having changed nothing, when the key names a blob: its change
     * must doom the blob in a group.
     *
     * @return UNCHANGED, CHANGED or NEEDS_GROUP
     * @throws TableException TABLE_CLOSED if the table was dropped
     */
    int apply(Table t, MemorySegment key, MemorySegment value, int op) {
        return change(t, key, value, op, true);
    }

    /** One change; {@code forward} false for one that undoes an earlier change of the group, which records nothing. */
    private int change(Table t, MemorySegment k, MemorySegment value, int op, boolean forward) {
        long ino = t.inode.ino;
        boolean mayHoldBlobs = blobs.directory() != 0;
        for (;;) {
            // read before the record is locked (a lock-free read of a block this thread holds would wait for
            // ever); the table's lock, held, keeps both answers true
            if (dirs.step(t.inode, 0) != DirContents.READY) {
                dirs.prepare(t.inode, 0); // the tree's block reserve between its marks, in transactions of its own
                continue;
            }
            if (records.readRecord(ino, InodeFormat::nlink) == 0) {
                throw new TableException(TableException.Kind.TABLE_CLOSED, t + " was dropped");
            }
            BTree tree = t.tree();
            byte[] before = null, key = null;
            long doomedBlob = -1;
            try (Txn txn = Txn.begin(cache, 2 + tree.reservation())) {
                records.lockRecord(txn, ino);
                if (forward && (undo != null || version != 0 || mayHoldBlobs)) {
                    long found = tree.find(txn, k, BTree.Match.EXACT, keyOut, valueOut);
                    int length = found >= 0 ? BTree.foundValueLength(found) : -1;
                    if (length >= 0 && TableValueFormat.kind(valueOut, length, ino) == TableValueFormat.BLOB) {
                        if (undo == null) {
                            return NEEDS_GROUP; // nothing changed: the transaction ends without a commit
                        }
                        doomedBlob = op == PUT_IF_ABSENT ? -1 : TableValueFormat.readBlob(valueOut).id();
                    }
                    if (undo != null || version != 0) {
                        key = k.toArray(ValueLayout.JAVA_BYTE);
                        before = length < 0 ? null : valueOut.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE);
                    }
                    if (version != 0) {
                        versions.record(version, ino, key, before); // before the change can be seen: at its commit
                    }
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
                    return UNCHANGED; // nothing logged: the transaction ends without a commit
                }
                seq = txn.commit();
            }
            if (forward && undo != null) {
                undo.add(new Undo(t, key, before));
                if (doomedBlob >= 0) {
                    blobs.doom(doomedBlob);
                    doomed.add(doomedBlob);
                }
                if (value != null && TableValueFormat.kind(value, value.byteSize(), ino) == TableValueFormat.BLOB) {
                    long id = TableValueFormat.readBlob(value).id();
                    blobs.link(id);
                    linked.add(id);
                }
            }
            return CHANGED;
        }
    }

    /**
     * Undoes this group's changes, newest first, each as a change of its own inside the group, then its
     * blobs' renames. Throws if one fails: the caller must then shut the journal down, so that the group
     * never reaches the log.
     */
    void undoAll() {
        for (int i = undo.size() - 1; i >= 0; i--) {
            Undo u = undo.get(i);
            change(u.table(), MemorySegment.ofArray(u.key()), u.before() == null ? null : MemorySegment.ofArray(u.before()),
                    u.before() == null ? DELETE : PUT, false);
        }
        undo.clear();
        for (int i = linked.size() - 1; i >= 0; i--) {
            blobs.unlink(linked.get(i));
        }
        for (int i = doomed.size() - 1; i >= 0; i--) {
            blobs.undoom(doomed.get(i));
        }
        linked.clear();
        doomed.clear();
    }
}
