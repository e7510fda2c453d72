package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
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
 * <p>Not thread-safe: one thread builds and commits a transaction. Closing an uncommitted one rolls it
 * back (nothing was applied, so nothing is undone).
 */
public final class WriteTransaction implements AutoCloseable {
    /** One key's pending change: PUT, PUT_IF_ABSENT or DELETE ({@link TableCommit}) with its value. */
    record Op(int kind, byte[] value) {
    }

    /** The pending changes of one table: ranges deleted first, then the keys' own changes. */
    static final class Writes {
        final Table table;
        final TreeMap<byte[], Op> ops = new TreeMap<>(Arrays::compareUnsigned);
        final List<byte[][]> ranges = new ArrayList<>(0);

        Writes(Table table) {
            this.table = table;
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
        record(table, key, new Op(TableCommit.PUT, value.clone()));
    }

    /**
     * Inserts {@code key} in {@code table} if this transaction's view has no such key; true if so. The
     * condition is checked again as the commit applies: a key another commit inserted meanwhile stays.
     */
    public boolean putIfAbsent(Table table, byte[] key, byte[] value) {
        Table.requireKey(key);
        Table.requireValue(value);
        if (get(table, key) != null) {
            return false;
        }
        Writes w = writes(table);
        Op prior = w.ops.get(key);
        // after this transaction's own delete of the key the put is unconditional: the delete goes first
        record(table, key, new Op(prior != null || w.inDeletedRange(key) ? TableCommit.PUT : TableCommit.PUT_IF_ABSENT, value.clone()));
        return true;
    }

    /** Deletes {@code key} from {@code table}; true if this transaction's view had it. */
    public boolean delete(Table table, byte[] key) {
        Table.requireKey(key);
        boolean had = get(table, key) != null;
        record(table, key, new Op(TableCommit.DELETE, null));
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
        (from == null ? (to == null ? w.ops : w.ops.headMap(to)) : to == null ? w.ops.tailMap(from) : w.ops.subMap(from, to)).clear();
        w.ranges.add(new byte[][] {from == null ? null : from.clone(), to == null ? null : to.clone()});
    }

    /** {@code key}'s value in {@code table} as this transaction sees it (its own changes first), or null. */
    public byte[] get(Table table, byte[] key) {
        Table.requireKey(key);
        requireActive();
        if (table == null) {
            throw new InvalidArgumentException("table is null");
        }
        tables.requireOwn(table);
        Writes w = writes.get(table.inode.ino);
        if (w != null) {
            Op op = w.ops.get(key);
            if (op != null) {
                if (op.kind() == TableCommit.DELETE) {
                    return null;
                }
                if (op.kind() == TableCommit.PUT) {
                    return op.value().clone();
                }
                byte[] there = w.inDeletedRange(key) ? null : table.get(key);
                return there != null ? there : op.value().clone();
            }
            if (w.inDeletedRange(key)) {
                return null;
            }
        }
        return table.get(key);
    }

    /** Changes recorded so far (keys, plus one per deleted range). */
    public int size() {
        int n = 0;
        for (Writes w : writes.values()) {
            n += w.ops.size() + w.ranges.size();
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
        if (writes.size() == 1 && writes.firstEntry().getValue().ranges.isEmpty() && writes.firstEntry().getValue().ops.size() == 1) {
            Writes w = writes.firstEntry().getValue(); // one key's change: a single write, beside the table's others
            var change = w.ops.firstEntry();
            byte[] v = change.getValue().value();
            tables.single(w.table, MemorySegment.ofArray(change.getKey()), v == null ? null : MemorySegment.ofArray(v), change.getValue().kind(), durability);
        } else if (!writes.isEmpty()) {
            tables.commit(new ArrayList<>(writes.values()), durability);
        } else {
            tables.durableSoFar(durability);
        }
    }

    /** Drops every change; the transaction is done. */
    public void rollback() {
        requireActive();
        done = true;
        writes.clear();
        last = null;
    }

    /** Rolls back unless committed or rolled back already. */
    @Override
    public void close() {
        if (!done) {
            rollback();
        }
    }

    private void record(Table table, byte[] key, Op op) {
        requireActive();
        Writes w = writes(table);
        w.ops.put(key.clone(), op);
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
