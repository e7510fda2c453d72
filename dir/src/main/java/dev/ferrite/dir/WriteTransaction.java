package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.TreeMap;

import dev.ferrite.io.InvalidArgumentException;

/**
 * A write transaction over any keys of any tables of one volume ({@link Tables#begin}): its changes are
 * kept here until {@link #commit()} applies them all at once, and recovered after a crash all or none.
 * Its reads ({@link #get}) see its own changes over the tables' latest committed state; other threads see
 * none of them before the commit.
 *
 * <p>The commit takes the stripes of all its keys (in stripe order, so transactions cannot deadlock) and a
 * share of the log, applies the changes inside one journal group beside other transactions and single
 * writes to the same tables, lets the stripes go and then waits for durability as {@link Durability}
 * says; one with a deleted range, or one that writes, replaces or deletes a value kept out of line, takes
 * its tables' locks instead (in inode order) and applies alone; a transaction of one key's change (no deleted range) applies instead as a single
 * write does ({@link Table#put}), beside the table's other single writes, holding only its key's stripe.
 * Two transactions that write one key: the later commit wins (no conflict is
 * detected). A commit whose changes would not fit in the log at once fails with
 * {@link TableException.Kind#TOO_LARGE} having changed nothing: split such work into several
 * transactions. Roughly, the changes of one transaction may take up to a quarter of the log, each changed
 * key costing its key and value (a medium value, too long for the tree with its key, up to 64 KiB, only its 24-byte stub and some 100
 * bytes, or where extents are off its bytes and some 100 bytes per 960-byte chunk; a blob, over 64 KiB, only
 * its 40-byte reference) and some 100 bytes; a 4 MiB log (the least) holds some 5,000 puts of
 * 64-byte values. A commit that fails for any other reason (no space) also leaves every table as it was.
 *
 * <p>A put copies its value (the caller may reuse the array at once), off the Java heap into buffers the
 * transaction gives back when it ends ({@link StagedValues}): end each transaction, by commit, rollback or
 * close, or its buffers stay lent. Not thread-safe: one thread builds and commits a transaction. Closing
 * an uncommitted one rolls it back (nothing was applied, so nothing is undone).
 */
public final class WriteTransaction implements AutoCloseable {
    /** One key's pending change: PUT, PUT_IF_ABSENT or DELETE ({@link TableCommit}) with its value (null for DELETE). */
    static final class Op {
        private final byte[] key;
        private final int kind;
        private final MemorySegment value;
        /** The key's first 8 bytes, big-endian, zero past its end: orders two keys unless they share them. */
        private final long head;

        Op(byte[] key, int kind, MemorySegment value) {
            this.key = key;
            this.kind = kind;
            this.value = value;
            long h = 0;
            for (int i = 0; i < Long.BYTES; i++) {
                h = h << 8 | (i < key.length ? key[i] & 0xFF : 0);
            }
            head = h;
        }

        byte[] key() {
            return key;
        }

        int kind() {
            return kind;
        }

        MemorySegment value() {
            return value;
        }
    }

    /**
     * The pending changes of one table: ranges deleted first, then the keys' own changes. While the
     * transaction does not read its own changes of the table, a change is appended, duplicates and all,
     * and the commit sorts them once ({@link #changes}); the first read of them ({@link #byKey}) files them
     * by key, and later changes go there. A sorted map's put per change was a sixth of a batch's CPU.
     */
    static final class Writes {
        /** Key order: a key shorter than 8 bytes sorts by its head as if padded with zeros, which ties it with those it prefixes. */
        private static final Comparator<Op> ORDER = (a, b) -> {
            int c = Long.compareUnsigned(a.head, b.head);
            return c != 0 ? c : Arrays.compareUnsigned(a.key, b.key);
        };

        /** The low bits of a change's place in the order made, as {@link #sort} packs it: 20, for up to a million changes. */
        private static final long INDEX = (1L << 20) - 1;

        final Table table;
        final List<byte[][]> ranges = new ArrayList<>(0);
        /** The changes in the order made, the first {@link #made} of them, until {@link #byKey} files them. */
        private Op[] log = new Op[8];
        private int made;
        /** The latest change of each key, once the transaction read its changes; null before. */
        private TreeMap<byte[], Op> byKey;
        /** {@link #changes}, until a change is added. */
        private Op[] sorted;

        Writes(Table table) {
            this.table = table;
        }

        /** Adds {@code op}, which replaces any earlier change of its key. */
        void add(Op op) {
            sorted = null;
            if (byKey != null) {
                byKey.put(op.key(), op);
                return;
            }
            if (made == log.length) {
                log = Arrays.copyOf(log, made * 2);
            }
            log[made++] = op;
        }

        /** The latest change of each key, by key, for the caller to read or change: filed from the log on first use. */
        TreeMap<byte[], Op> byKey() {
            sorted = null;
            if (byKey == null) {
                byKey = new TreeMap<>(Arrays::compareUnsigned);
                for (int i = 0; i < made; i++) {
                    byKey.put(log[i].key(), log[i]); // in the order made: the latest stays
                }
                log = null;
            }
            return byKey;
        }

        /** The latest change of each key, in key order: what the commit applies. */
        Op[] changes() {
            if (sorted == null) {
                if (byKey != null) {
                    sorted = byKey.values().toArray(new Op[0]);
                } else {
                    Op[] s = Arrays.copyOf(log, made);
                    sort(s);
                    int n = 0;
                    for (int i = 0; i < s.length; i++) {
                        if (i + 1 == s.length || s[i].head != s[i + 1].head || !Arrays.equals(s[i].key, s[i + 1].key)) { // else a later change replaces it
                            s[n++] = s[i];
                        }
                    }
                    sorted = n == s.length ? s : Arrays.copyOf(s, n);
                }
            }
            return sorted;
        }

        /**
         * Sorts {@code ops} by key, stably (one key's changes stay in the order made): as numbers, each its
         * head's first 44 bits and its index in the low 20 (a sort of longs, a third of the time of a sort
         * of the changes by comparator), then each run of a shared 44 bits by the whole key.
         */
        private static void sort(Op[] ops) {
            int n = ops.length;
            if (n > INDEX) {
                Arrays.sort(ops, ORDER);
                return;
            }
            long[] order = new long[n];
            for (int i = 0; i < n; i++) {
                order[i] = ((ops[i].head & ~INDEX) ^ Long.MIN_VALUE) | i; // signed order is the heads' unsigned order
            }
            Arrays.sort(order);
            Op[] made = ops.clone();
            for (int i = 0; i < n; i++) {
                ops[i] = made[(int) (order[i] & INDEX)];
            }
            for (int i = 0; i < n; ) {
                int j = i + 1;
                while (j < n && (order[j] & ~INDEX) == (order[i] & ~INDEX)) {
                    j++;
                }
                if (j - i > 1) {
                    Arrays.sort(ops, i, j, ORDER); // already in the order made: stable keeps it
                }
                i = j;
            }
        }

        boolean inDeletedRange(byte[] key) {
            for (byte[][] r : ranges) {
                if ((r[0] == null || Arrays.compareUnsigned(key, r[0]) >= 0) && (r[1] == null || Arrays.compareUnsigned(key, r[1]) < 0)) {
                    return true;
                }
            }
            return false;
        }
    }

    private final Tables tables;
    private final Durability durability;
    /** Copies of the values put, off the heap; made on the first put. */
    private StagedValues values;
    /** By table inode, in inode order: the order the commit locks them in. */
    private final TreeMap<Long, Writes> writes = new TreeMap<>();
    /** The changes of the table handle written last: a run of writes to one table looks up (and boxes) no inode. */
    private Writes last;
    private boolean done;

    WriteTransaction(Tables tables, Durability durability) {
        this.tables = tables;
        this.durability = durability;
    }

    /** The durability its commit waits for. */
    public Durability durability() {
        return durability;
    }

    /** Inserts or replaces {@code key}'s value in {@code table}. */
    public void put(Table table, byte[] key, byte[] value) {
        Table.requireKey(key);
        Table.requireValue(value);
        record(table, key, TableCommit.PUT, value);
    }

    /**
     * Inserts {@code key} in {@code table} if this transaction's view has no such key; true if so. The
     * condition is checked again as the commit applies: a key another commit inserted meanwhile stays.
     */
    public boolean putIfAbsent(Table table, byte[] key, byte[] value) {
        Table.requireKey(key);
        Table.requireValue(value);
        if (containsKey(table, key)) {
            return false;
        }
        Writes w = writes(table);
        Op prior = w.byKey().get(key);
        // after this transaction's own delete of the key the put is unconditional: the delete goes first
        record(table, key, prior != null || w.inDeletedRange(key) ? TableCommit.PUT : TableCommit.PUT_IF_ABSENT, value);
        return true;
    }

    /** Deletes {@code key} from {@code table}; true if this transaction's view had it. */
    public boolean delete(Table table, byte[] key) {
        Table.requireKey(key);
        boolean had = containsKey(table, key);
        record(table, key, TableCommit.DELETE, null);
        return had;
    }

    /**
     * Deletes every key of {@code table} in {@code [from, to)} (null: the end of the key space), those this
     * transaction put before included; its later puts in the range stay. The keys are found as the commit
     * applies, so the range counts toward the transaction's size by the keys it holds then.
     */
    public void deleteRange(Table table, byte[] from, byte[] to) {
        if (from != null) {
            Table.requireKey(from);
        }
        if (to != null) {
            Table.requireKey(to);
        }
        requireActive();
        Writes w = writes(table);
        if (from != null && to != null && Arrays.compareUnsigned(from, to) >= 0) {
            return; // an empty range
        }
        TreeMap<byte[], Op> ops = w.byKey();
        (from == null ? (to == null ? ops : ops.headMap(to)) : to == null ? ops.tailMap(from) : ops.subMap(from, to)).clear();
        w.ranges.add(new byte[][] {from == null ? null : from.clone(), to == null ? null : to.clone()});
    }

    /** {@code key}'s value in {@code table} as this transaction sees it (its own changes first), or null. */
    public byte[] get(Table table, byte[] key) {
        Writes w = ownWrites(table, key);
        if (w != null) {
            Op op = w.byKey().get(key);
            if (op != null) {
                if (op.kind() == TableCommit.DELETE) {
                    return null;
                }
                if (op.kind() == TableCommit.PUT) {
                    return op.value().toArray(ValueLayout.JAVA_BYTE);
                }
                byte[] there = w.inDeletedRange(key) ? null : table.get(key);
                return there != null ? there : op.value().toArray(ValueLayout.JAVA_BYTE);
            }
            if (w.inDeletedRange(key)) {
                return null;
            }
        }
        return table.get(key);
    }

    /**
     * Whether {@code key} is in {@code table} as this transaction sees it (its own changes first), read
     * from the tree without its value: a delete or a conditional put of a 16 KiB value read it whole only
     * to learn that much.
     */
    public boolean containsKey(Table table, byte[] key) {
        Writes w = ownWrites(table, key);
        if (w != null) {
            Op op = w.byKey().get(key);
            if (op != null) {
                return op.kind() != TableCommit.DELETE; // a put-if-absent leaves the key there, its value or the one before
            }
            if (w.inDeletedRange(key)) {
                return false;
            }
        }
        return table.containsKey(key);
    }

    /** This transaction's changes to {@code table} so far, or null; checks the read's arguments. */
    private Writes ownWrites(Table table, byte[] key) {
        Table.requireKey(key);
        requireActive();
        if (table == null) {
            throw new InvalidArgumentException("table is null");
        }
        tables.requireOwn(table);
        return writes.get(table.inode.ino);
    }

    /** Changes recorded so far (keys, plus one per deleted range). */
    public int size() {
        int n = 0;
        for (Writes w : writes.values()) {
            n += w.byKey().size() + w.ranges.size();
        }
        return n;
    }

    /**
     * Applies every change, all or nothing, and returns once they are as durable as {@link #durability()}
     * says. Afterwards the transaction is done, committed or (if this throws) not.
     *
     * @throws TableException TOO_LARGE if the changes do not fit in the log at once, TABLE_CLOSED if a
     *         table was dropped or its handle closed, TRANSACTION_DONE if already committed or rolled back;
     *         nothing was changed
     * @throws dev.ferrite.io.NoSpaceException if the volume ran out of space; nothing was changed
     */
    public void commit() {
        requireActive();
        done = true;
        try {
            Writes only = writes.size() == 1 ? writes.firstEntry().getValue() : null;
            if (only != null && only.ranges.isEmpty() && only.changes().length == 1) {
                Op change = only.changes()[0]; // one key's change: a single write, beside the table's others
                tables.single(only.table, MemorySegment.ofArray(change.key()), change.value(), change.kind(), durability);
            } else if (!writes.isEmpty()) {
                tables.commit(new ArrayList<>(writes.values()), durability);
            } else {
                tables.durableSoFar(durability);
            }
        } finally {
            releaseValues(); // the commit read them while it applied, and kept none
        }
    }

    /** Drops every change; the transaction is done. */
    public void rollback() {
        requireActive();
        done = true;
        writes.clear();
        last = null;
        releaseValues();
    }

    private void releaseValues() {
        if (values != null) {
            values.release();
        }
    }

    /** Rolls back unless committed or rolled back already. */
    @Override
    public void close() {
        if (!done) {
            rollback();
        }
    }

    /** Records a change of {@code key}, with a copy of {@code value} (null for a delete). */
    private void record(Table table, byte[] key, int kind, byte[] value) {
        requireActive();
        Writes w = writes(table);
        MemorySegment copy = null;
        if (value != null) {
            if (values == null) {
                values = Tables.stagedValues();
            }
            copy = values.copy(value);
        }
        w.add(new Op(key.clone(), kind, copy));
    }

    private Writes writes(Table table) {
        if (table == null) {
            throw new InvalidArgumentException("table is null");
        }
        table.requireOpen();
        tables.requireOwn(table);
        Writes w = last;
        if (w == null || w.table != table) {
            last = w = writes.computeIfAbsent(table.inode.ino, i -> new Writes(table));
        }
        return w;
    }

    private void requireActive() {
        if (done) {
            throw new TableException(TableException.Kind.TRANSACTION_DONE, "the transaction was committed or rolled back already");
        }
    }
}
