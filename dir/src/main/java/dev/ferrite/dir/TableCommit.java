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
 * lock held by the caller. Inside a journal group ({@code Journal#pin}) the small transactions share one
 * checkpoint, so the commit is recovered all or nothing however many keys it changes; and each change
 * that a group makes records the key's value before it, so that a group that fails part way (no space,
 * too big for the log) undoes what it did, still inside the group, before the error reaches the caller.
 * One thread uses an instance.
 */
final class TableCommit {
    static final int PUT = 0, PUT_IF_ABSENT = 1, DELETE = 2;

    /** A key's state before a change of the group: {@code before} null if it was absent. */
    private record Undo(Table table, byte[] key, byte[] before) {
    }

    private final BufferCache cache;
    private final DirContents dirs;
    private final InodeRecords records;
    /** The changes made so far, when the commit may have to undo them; else null. */
    private final List<Undo> undo;
    private final MemorySegment keyOut, valueOut;
    /** Commit sequence of the last change made. */
    long seq = -1;
    private final TableVersions versions;
    /** The applying commit's version ({@link TableVersions#beginApply}): not 0, each change records the key's prior value there first. */
    long version;

    TableCommit(BufferCache cache, DirContents dirs, InodeRecords records, TableVersions versions, boolean undoable) {
        this.versions = versions;
        this.cache = cache;
        this.dirs = dirs;
        this.records = records;
        this.undo = undoable ? new ArrayList<>() : null;
        this.keyOut = MemorySegment.ofArray(new byte[Table.MAX_KEY]);
        this.valueOut = MemorySegment.ofArray(new byte[Table.MAX_VALUE]);
    }

    /**
     * Changes {@code key} of {@code t} ({@code op}: PUT or PUT_IF_ABSENT with {@code value}, or DELETE) in a
     * transaction of its own; {@code t}'s lock is held. True if the table changed.
     *
     * @throws TableException TABLE_CLOSED if the table was dropped
     */
    boolean apply(Table t, byte[] key, byte[] value, int op) {
        return change(t, MemorySegment.ofArray(key), value == null ? null : MemorySegment.ofArray(value), op, true);
    }

    /** {@link #apply(Table, byte[], byte[], int)} for a key and value in segments (a single write's). */
    boolean apply(Table t, MemorySegment key, MemorySegment value, int op) {
        return change(t, key, value, op, true);
    }

    /** One change; {@code forward} false for one that undoes an earlier change of the group, which records nothing. */
    private boolean change(Table t, MemorySegment k, MemorySegment value, int op, boolean forward) {
        long ino = t.inode.ino;
        for (;;) {
            dirs.prepare(t.inode, 0); // the tree's block reserve between its marks, in transactions of its own
            BTree tree = t.tree();
            // read before the record is locked (a lock-free read of a block this thread holds would wait for
            // ever); the table's lock, held, keeps both answers true
            if (records.readRecord(ino, InodeFormat::nlink) == 0) {
                throw new TableException(TableException.Kind.TABLE_CLOSED, t + " was dropped");
            }
            if (dirs.step(t.inode, 0) != DirContents.READY) {
                continue; // another change used the reserve up meanwhile: prepare again
            }
            try (Txn txn = Txn.begin(cache, 2 + tree.reservation())) {
                records.lockRecord(txn, ino);
                byte[] before = null;
                byte[] key = null;
                if (forward && (undo != null || version != 0)) {
                    key = k.toArray(ValueLayout.JAVA_BYTE);
                    long found = tree.find(txn, k, BTree.Match.EXACT, keyOut, valueOut);
                    if (found >= 0) {
                        before = valueOut.asSlice(0, BTree.foundValueLength(found)).toArray(ValueLayout.JAVA_BYTE);
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
                    return false; // nothing logged: the transaction ends without a commit
                }
                seq = txn.commit();
                if (forward && undo != null) {
                    undo.add(new Undo(t, key, before));
                }
                return true;
            }
        }
    }

    /**
     * Undoes this group's changes, newest first, each as a change of its own inside the group. Throws if
     * one fails: the caller must then shut the journal down, so that the group never reaches the log.
     */
    void undoAll() {
        List<Undo> done = undo;
        for (int i = done.size() - 1; i >= 0; i--) {
            Undo u = done.get(i);
            change(u.table(), MemorySegment.ofArray(u.key()), u.before() == null ? null : MemorySegment.ofArray(u.before()),
                    u.before() == null ? DELETE : PUT, false);
        }
        done.clear();
    }
}
