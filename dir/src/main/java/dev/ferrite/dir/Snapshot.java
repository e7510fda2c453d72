package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Every table of a volume as it was at one moment ({@link Tables#snapshot()}), whatever commits come
 * after, for as long as it is open: the isolation LMDB's read transactions, RocksDB's snapshots, Xodus's
 * and MVStore's versions give. A transaction's changes are all in a snapshot or none of them.
 *
 * <p>How: while any snapshot is open, each commit takes a version and records each key's prior value in
 * memory before its change becomes visible ({@link TableVersions}); a snapshot reads the table as it is
 * and then the key's records newer than itself. Readers never block writers and writers never block
 * readers; nothing is pinned in the log. The cost is memory: the prior value of every key changed while
 * the snapshot is open (plus ~100 bytes each), kept until the snapshots older than the change close — so
 * close snapshots when done. A crash ends every snapshot.
 *
 * <p>A snapshot reads tables through their handles: a table dropped meanwhile stays readable while a
 * handle on it is open. Thread-safe; close it when done (a second close does nothing).
 */
public final class Snapshot implements AutoCloseable {
    private final Tables tables;
    private final long version;
    private final AtomicBoolean closed = new AtomicBoolean();

    Snapshot(Tables tables, long version) {
        this.tables = tables;
        this.version = version;
    }

    /** The version of the tables it sees: every commit with a version up to this one, and no other. */
    public long version() {
        return version;
    }

    /** {@code key}'s value in {@code table} at this snapshot, or null. */
    public byte[] get(Table table, byte[] key) {
        Table.requireKey(key);
        requireOpen(table);
        TableCursor.AtSnapshot at = at(table);
        byte[] then = storedAt(table, key, at);
        return then == null ? null : tables.decode(table, MemorySegment.ofArray(key), at, then);
    }

    /**
     * Copies bytes of {@code key}'s value in {@code table} at this snapshot from {@code offset} into {@code
     * out}, as many as fit (or as remain), and returns the value's whole length, or -1 if the key was absent:
     * {@link Table#read}'s streaming read of a long value, a piece at a time, as the snapshot sees it (a blob
     * a later commit replaced or deleted stays readable while the snapshot is open).
     */
    public long read(Table table, byte[] key, long offset, MemorySegment out) {
        Table.requireKey(key);
        Table.requireOffset(offset);
        requireOpen(table);
        TableCursor.AtSnapshot at = at(table);
        byte[] then = storedAt(table, key, at);
        return then == null ? -1 : tables.copy(table, MemorySegment.ofArray(key), at, MemorySegment.ofArray(then), then.length, offset, out);
    }

    private TableCursor.AtSnapshot at(Table table) {
        return new TableCursor.AtSnapshot(tables.versions, table.inode.ino, version, null);
    }

    /** {@code key}'s stored form ({@link TableValueFormat}) in {@code table} as {@code at} sees it, or null. */
    private static byte[] storedAt(Table table, byte[] key, TableCursor.AtSnapshot at) {
        byte[] now = table.storedValue(key); // the tree first, then the records: a change seen above has its record below
        TableVersions.Undo u = at.at(key);
        return u == null ? now : u.before;
    }

    /** The length of {@code key}'s value in {@code table} at this snapshot, or -1 if it was absent. */
    public long valueLength(Table table, byte[] key) {
        return read(table, key, 0, MemorySegment.NULL);
    }

    /**
     * A cursor over {@code table}'s keys at this snapshot in {@code [from, to)}, in order, or with
     * {@code reverse} over {@code (to, from]} from the largest down; a null bound is the end of the key
     * space.
     */
    public TableCursor cursor(Table table, byte[] from, byte[] to, boolean reverse) {
        if (from != null) {
            Table.requireKey(from);
        }
        if (to != null) {
            Table.requireKey(to);
        }
        requireOpen(table);
        return new TableCursor(table, from, to, reverse, null, null, records(table, TableCursor.Range.of(from, to, reverse)));
    }

    /** A cursor over {@code table}'s keys starting with {@code prefix} at this snapshot, in order or in reverse. */
    public TableCursor prefix(Table table, byte[] prefix, boolean reverse) {
        Table.requireKey(prefix);
        byte[] end = Table.successor(prefix);
        if (!reverse) {
            return cursor(table, prefix, end, false);
        }
        requireOpen(table);
        return new TableCursor(table, end, null, true, end, prefix, records(table, new TableCursor.Range(prefix, true, end, false, true)));
    }

    /** The table's records of keys in {@code range}, in its direction, as this snapshot reads them. */
    private TableCursor.AtSnapshot records(Table table, TableCursor.Range range) {
        return new TableCursor.AtSnapshot(tables.versions, table.inode.ino, version, range.view(tables.versions.chains(table.inode.ino)));
    }

    private void requireOpen(Table table) {
        if (closed.get()) {
            throw new TableException(TableException.Kind.TRANSACTION_DONE, "the snapshot is closed");
        }
        tables.requireOwn(table);
        table.requireOpen();
    }

    /** Lets the records (and doomed blobs) only this snapshot needed go. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            tables.versions.close(version);
            tables.blobs.snapshotClosed();
        }
    }
}
