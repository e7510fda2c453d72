package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BTreeNodeFormat;
import dev.ferrite.io.InvalidArgumentException;

/**
 * A named table of a volume ({@link Tables}): keys of 1 to {@value #MAX_KEY} bytes, in unsigned
 * lexicographic order, each with a value of up to {@value #MAX_VALUE} bytes, in a B-tree of its own.
 *
 * <p>Reads ({@link #get}, {@link #cursor}) take no lock and never wait for writers, and never see part of
 * a write transaction's commit: a get finds it all or none of it, a cursor all of it if it was published
 * when the cursor opened, else none ({@link TablePublication}). A write here
 * ({@link #put}, {@link #delete}, ...) is a transaction of its own, durable as the table's default
 * {@link Durability} says (SYNC unless set); writes to several keys or tables that must happen together go
 * through a {@link WriteTransaction}. Single writes of values kept in the tree (up to {@link #MAX_INLINE_ENTRY}
 * bytes with their key) and deletes apply side by side, on one table as on several, one at a time per key; a
 * write transaction of such values applies beside them and beside other such transactions, holding its
 * keys' stripes to its end; one with a deleted range or a value kept out of line, or a single write of
 * such a value, holds its tables for itself while it applies its changes (not while it waits to be
 * durable) ({@link Tables}). Two transactions writing one key: the one whose commit applies last wins.
 *
 * <p>An open table holds its inode: dropped meanwhile, it keeps its contents for reads until closed,
 * refuses writes, and its space is freed at the last close. Thread-safe.
 */
public final class Table implements AutoCloseable {
    /** The longest key, in bytes. */
    public static final int MAX_KEY = BTreeNodeFormat.MAX_KEY;
    /**
     * The longest value, in bytes (1 GiB). Values too long for the tree ({@link #MAX_INLINE}) are kept out of line: up
     * to {@value #MAX_MEDIUM} in a data extent each (or as chunks in the volume's overflow tree), longer ones
     * as blobs.
     */
    public static final int MAX_VALUE = 1 << 30;
    /**
     * The longest value kept in the table's B-tree itself whatever its key's length. A value is kept there
     * while its key and it take {@value #MAX_INLINE_ENTRY} bytes or less (a 1,024-byte value beside a key of
     * up to 959 bytes); on a volume formatted before that bound, only up to this.
     */
    public static final int MAX_INLINE = BTreeNodeFormat.MAX_VALUE - 1;
    /** The most bytes a key and a value kept in the table's B-tree take together (see {@link #MAX_INLINE}). */
    public static final int MAX_INLINE_ENTRY = BTreeNodeFormat.MAX_ENTRY - 1;
    /**
     * The longest medium value, kept in a data extent ({@link TableExtents}) or as chunks in the volume's
     * overflow tree ({@link TableOverflow}); longer ones go to a blob file ({@link TableBlobs}).
     */
    public static final int MAX_MEDIUM = 64 * 1024;
    /** The longest stored form a B-tree cell takes ({@link TableValueFormat}): an inline value beside a 1-byte key. */
    static final int MAX_TREE_VALUE = BTreeNodeFormat.MAX_ENTRY - 1;

    private final Tables tables;
    private final String name;
    private final Handle handle;
    /**
     * The table's commit lock, shared by every handle on it ({@code Tables#apply}): commits applying side
     * by side hold it shared, one that keeps the table to itself and {@link #close} exclusively, so the
     * last close of a dropped table never frees its tree under a commit.
     */
    final ReentrantReadWriteLock commits;
    final Inode inode;
    private volatile Durability durability = Durability.SYNC;
    /** The table's B-tree once opened ({@link Tables#tree}). */
    volatile BTree cachedTree;

    Table(Tables tables, String name, Handle handle) {
        this.tables = tables;
        this.name = name;
        this.handle = handle;
        this.inode = handle.inode;
        this.commits = tables.commitLock(inode.ino);
    }

    Tables tables() {
        return tables;
    }

    /** The name it was opened by (a rename since does not change it). */
    public String name() {
        return name;
    }

    /** The durability of this handle's single writes ({@link #put} and the others): SYNC unless set. */
    public Durability durability() {
        return durability;
    }

    /** Sets the durability of this handle's single writes. */
    public Table withDurability(Durability d) {
        if (d == null) {
            throw new InvalidArgumentException("durability is required");
        }
        durability = d;
        return this;
    }

    // ------------------------------------------------------------------ reads

    /** The value of {@code key} (read whole, however long), or null if absent. Lock-free. */
    public byte[] get(byte[] key) {
        byte[] stored = storedValue(key);
        return stored == null ? null : tables.decode(this, MemorySegment.ofArray(key), null, stored);
    }

    /**
     * Copies the value of {@code key} into {@code out}, as much as fits, and returns its whole length, or
     * -1 if the key is absent. Lock-free; allocates nothing for a value kept in the tree once the blocks
     * are cached.
     */
    public int get(MemorySegment key, MemorySegment out) {
        return (int) read(key, 0, out);
    }

    /**
     * Copies bytes of {@code key}'s value from {@code offset} into {@code out}, as many as fit (or as
     * remain), and returns the value's whole length, or -1 if the key is absent: a streaming read of a long
     * value, a piece at a time (of a medium value only the blocks or chunks holding those bytes are read).
     */
    public long read(MemorySegment key, long offset, MemorySegment out) {
        requireKey(key.byteSize());
        requireOffset(offset);
        requireOpen();
        MemorySegment buf = Tables.valueBuffer();
        int len = tree().get(key, buf);
        if (tables.applying()) { // after the tree: a change seen there has its record
            int counted = tables.enterRecords(); // before the look: the commit keeps the record's array until it is left
            try {
                TableVersions.Undo u = tables.unpublished(this, key);
                if (u != null) {
                    return u.before == null ? -1 : tables.copy(this, key, null, MemorySegment.ofArray(u.before), u.before.length, offset, out);
                }
            } finally {
                tables.leaveRecords(counted);
            }
        }
        return len < 0 ? -1 : tables.copy(this, key, null, buf, len, offset, out);
    }

    /** The length of {@code key}'s value, or -1 if absent. */
    public long valueLength(byte[] key) {
        return read(MemorySegment.ofArray(key), 0, MemorySegment.NULL);
    }

    /** True if {@code key} is present. */
    public boolean containsKey(byte[] key) {
        requireKey(key);
        requireOpen();
        MemorySegment k = MemorySegment.ofArray(key);
        boolean found = tree().get(k, MemorySegment.NULL) >= 0;
        TableVersions.Undo u = tables.unpublished(this, k);
        return u == null ? found : u.before != null;
    }

    /**
     * {@code key}'s latest published value as the tree stores it ({@link TableValueFormat}), or null: the tree's, or the
     * value before the multi-key commit applying now if that has changed it ({@link TablePublication}).
     */
    byte[] storedValue(byte[] key) {
        requireKey(key);
        requireOpen();
        MemorySegment buf = Tables.valueBuffer();
        int len = tree().get(MemorySegment.ofArray(key), buf);
        return tables.published(this, key, len < 0 ? null : buf.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE));
    }

    /** A cursor over every key, in order. */
    public TableCursor cursor() {
        return cursor(null, null, false);
    }

    /**
     * A cursor over the keys in {@code [from, to)}, in order, or with {@code reverse} over the keys in
     * {@code (to, from]} from the largest down; a null bound is the end of the key space.
     */
    public TableCursor cursor(byte[] from, byte[] to, boolean reverse) {
        if (from != null) {
            requireKey(from);
        }
        if (to != null) {
            requireKey(to);
        }
        requireOpen();
        return new TableCursor(this, from, to, reverse, null, null);
    }

    /** A cursor over the keys starting with {@code prefix} (1 byte at least), in order or in reverse. */
    public TableCursor prefix(byte[] prefix, boolean reverse) {
        requireKey(prefix);
        byte[] end = successor(prefix);
        if (!reverse) {
            return cursor(prefix, end, false);
        }
        requireOpen(); // down from end (itself skipped: it is past the prefix), stopping below the prefix
        return new TableCursor(this, end, null, true, end, prefix);
    }

    /** The smallest key greater than every key starting with {@code prefix}, or null if there is none. */
    static byte[] successor(byte[] prefix) {
        for (int i = prefix.length - 1; i >= 0; i--) {
            if (prefix[i] != (byte) 0xFF) {
                byte[] s = Arrays.copyOf(prefix, i + 1);
                s[i]++;
                return s;
            }
        }
        return null;
    }

    /** The number of keys, counted by a scan (exact at some moment of the scan; costs a pass over the table). */
    public long count() {
        requireOpen();
        long n = 0;
        try (TableCursor c = cursor()) {
            while (c.next()) {
                n++;
            }
        }
        return n;
    }

    /** An estimate of the number of keys from the tree's shape, in microseconds (exact for a table of one leaf). */
    public long countEstimate() {
        requireOpen();
        return tree().countEstimate();
    }

    /** The table's figures now; the extent values' are counted by a scan (a pass over the table, as {@link #count()}). */
    public TableStats stats() {
        requireOpen();
        InodeStat s = tables.statOf(inode.ino);
        BTree t = tree();
        long[] extents = Tables.extentFigures(t, tables.blockSize());
        return new TableStats(name, inode.ino, t.countEstimate(), t.height(), s.blocks() * tables.blockSize(), extents[0], extents[1]);
    }

    // ------------------------------------------------------------------ single writes

    /** Inserts or replaces {@code key}'s value, in a transaction of its own. */
    public void put(byte[] key, byte[] value) {
        requireKey(key);
        requireValue(value);
        tables.single(this, key, value, TableCommit.PUT);
    }

    /**
     * {@link #put(byte[], byte[])} from segments (heap or native; read, not kept): a writer that reuses
     * its buffers passes views of them and allocates nothing per write.
     */
    public void put(MemorySegment key, MemorySegment value) {
        requireKey(key.byteSize());
        requireValue(value.byteSize());
        tables.single(this, key, value, TableCommit.PUT);
    }

    /** {@link #delete(byte[])} of a key in a segment; true if it was there. */
    public boolean delete(MemorySegment key) {
        requireKey(key.byteSize());
        return tables.single(this, key, null, TableCommit.DELETE);
    }

    /** Inserts {@code key} if absent, in a transaction of its own; true if it did. */
    public boolean putIfAbsent(byte[] key, byte[] value) {
        requireKey(key);
        requireValue(value);
        return tables.single(this, key, value, TableCommit.PUT_IF_ABSENT);
    }

    /** Deletes {@code key}, in a transaction of its own; true if it was there. */
    public boolean delete(byte[] key) {
        requireKey(key);
        return tables.single(this, key, null, TableCommit.DELETE);
    }

    /**
     * Deletes every key in {@code [from, to)} (null: the end of the key space), in transactions of up to
     * {@value Tables#RANGE_BATCH} keys each, fewer when their values are medium ones kept as chunks (at most
     * a sixteenth of the log's size of those per transaction): not atomic as a whole (use a {@link WriteTransaction}
     * for that); returns how many keys it deleted.
     */
    public long deleteRange(byte[] from, byte[] to) {
        if (from != null) {
            requireKey(from);
        }
        if (to != null) {
            requireKey(to);
        }
        return tables.deleteRange(this, from, to);
    }

    // ------------------------------------------------------------------ the handle

    /** Lets go of the table; the last close of a dropped table frees its space. A second close does nothing. */
    @Override
    public void close() {
        commits.writeLock().lock();
        try {
            handle.close();
        } finally {
            commits.writeLock().unlock();
        }
    }

    public boolean isOpen() {
        return handle.isOpen();
    }

    void requireOpen() {
        if (!handle.isOpen()) {
            throw new TableException(TableException.Kind.TABLE_CLOSED, "table '" + name + "' is closed");
        }
        tables.requireVolumeOpen();
    }

    BTree tree() {
        return tables.tree(this);
    }

    @Override
    public String toString() {
        return "table '" + name + "' (inode " + inode.ino + ")";
    }

    static void requireKey(byte[] key) {
        if (key == null) {
            throw new InvalidArgumentException("key is null");
        }
        requireKey(key.length);
    }

    static void requireKey(long length) {
        if (length < 1 || length > MAX_KEY) {
            throw new InvalidArgumentException("a key of " + length + " bytes; keys are 1 to " + MAX_KEY + " bytes");
        }
    }

    /** A read's offset into a value: not negative (past the value's end reads nothing). */
    static void requireOffset(long offset) {
        if (offset < 0) {
            throw new InvalidArgumentException("offset " + offset + " is negative");
        }
    }

    static void requireValue(byte[] value) {
        if (value == null) {
            throw new InvalidArgumentException("value is null");
        }
        requireValue(value.length);
    }

    static void requireValue(long length) {
        if (length > MAX_VALUE) {
            throw new InvalidArgumentException("a value of " + length + " bytes; values are at most " + MAX_VALUE + " bytes");
        }
    }
}
