package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.dir.AgHeaderFormat.REFCOUNT_TREE;
import static dev.ferrite.dir.AllocationGroup.AGF;
import static dev.ferrite.dir.AllocationGroup.RESERVE;
import static dev.ferrite.dir.AllocationGroup.lock;

/**
 * A group's reference counts of shared data blocks, the xfs_refcount role: its refcount tree
 * ({@link RefcountFormat}), made by the first clone of the group's blocks. Every block a file extent maps
 * has a count: the record's that covers it, else 1. A change sets the count of a <em>run</em> (blocks
 * from one start that have one count now, {@link #run}): the record covering it is cut at the run's ends
 * and the run's part rewritten, at most {@link #OPS} tree changes, so that each transaction stays bounded
 * whatever the sharing; neighbours with one count are not merged (a record per cloned piece).
 *
 * <h2>Locks</h2>
 * Read and changed under the AGF's lock, held by the transaction to commit, as the free-space trees are:
 * a run looked up with the AGF held stays that run until the commit. The tree's nodes come from the
 * AGF's free list; a transaction that changes counts checks the list holds {@link AllocationGroup#RESERVE},
 * which covers {@link #OPS} changes here and one free-space change at the trees' greatest height.
 */
final class Refcounts {
    /** Most tree changes one {@link #set} makes: the head cut off, the run's record, the tail cut off. */
    static final int OPS = 3;
    static final String TREE = "refcount tree";
    /** {@link BTree#reservation()} of a tree that is one leaf, drawing on a free list: 3 × 2 + 4 + 1 × 3 items. */
    private static final int NEW_TREE_ITEMS = 13;

    private final AllocationGroup ag;
    /** Null until the group's first shared block; made under the AGF. */
    volatile BTree tree;
    /**
     * Runs whose count a transaction took to 1 ({@link #lowering}), by first group block, until that
     * transaction is durable; an entry at a block replaces an older one there (whose transaction committed
     * before this one could count the blocks down again).
     */
    private final ConcurrentSkipListMap<Integer, Lowered> lowered = new ConcurrentSkipListMap<>();
    /** The longest run {@link #lowered} ever held: how far before a block an entry covering it may start. */
    private final AtomicInteger longestLowered = new AtomicInteger();
    /** Entries past which {@link #lowering} sweeps out the durable ones. */
    private volatile int sweepAt = SWEEP_AT;
    private static final int SWEEP_AT = 64;

    /** A run whose count went to 1: its end (group block) and its transaction's commit sequence, MAX_VALUE until known. */
    static final class Lowered {
        final int end;
        volatile long seq = Long.MAX_VALUE;

        Lowered(int end) {
            this.end = end;
        }
    }

    Refcounts(AllocationGroup ag) {
        this.ag = ag;
    }

    /** Opens the tree the AGF names, if any (mount). */
    void open() {
        int rel = AgHeaderFormat.u32(ag.agf.data(), REFCOUNT_TREE);
        if (rel == 0) {
            return;
        }
        if (rel < AgHeaderFormat.FIRST_FREE || rel >= ag.length) {
            throw new CorruptionException(ag.agf.block(), AGF, "refcount tree header at group block " + Integer.toUnsignedString(rel)
                    + " lies outside the group's " + ag.length + " blocks");
        }
        tree = BTree.open(ag.cache, ag.agfl, ag.start + rel, AgTreeFormat.treeId(ag.agno, AgTreeFormat.REFCOUNT));
    }

    /**
     * A transaction is about to take the count of {@code [dev, dev + len)} to 1 (a file letting go of
     * blocks another still maps): until it is durable, the remaining file must not overwrite them in
     * place, or a crash that undoes the letting go would show the other file its bytes
     * ({@link #recentlyLowered}). Called before the change; {@link #lowered} once the transaction has
     * committed or failed. {@code durable} is the journal's durable sequence, for sweeping.
     */
    Lowered lowering(long dev, int len, long durable) {
        if (lowered.size() >= sweepAt) {
            lowered.values().removeIf(l -> l.seq <= durable);
            sweepAt = Math.max(SWEEP_AT, 2 * lowered.size());
        }
        int s = (int) (dev - ag.start);
        Lowered l = new Lowered(s + len);
        longestLowered.accumulateAndGet(len, Math::max);
        lowered.put(s, l);
        return l;
    }

    /** The transaction {@link #lowering} announced committed with {@code seq}; 0: it failed, changing nothing. */
    void lowered(Lowered l, long seq) {
        if (seq == 0) {
            lowered.values().remove(l);
        } else {
            l.seq = seq;
        }
    }

    /**
     * Whether some block of {@code [dev, dev + len)} had its count taken to 1 by a transaction not durable
     * as of sequence {@code durable}: a shared file then copies it on write though only it maps it now.
     * Read after the count.
     */
    boolean recentlyLowered(long dev, int len, long durable) {
        if (lowered.isEmpty()) {
            return false;
        }
        int s = (int) (dev - ag.start), end = s + len;
        for (Map.Entry<Integer, Lowered> e : lowered.subMap(s - longestLowered.get(), true, end, false).entrySet()) {
            Lowered l = e.getValue();
            if (l.seq <= durable) {
                lowered.remove(e.getKey(), l);
            } else if (l.end > s) {
                return true;
            }
        }
        return false;
    }

    /** Log items {@code changes} calls of {@link #set} may touch (the tree's creation included), beside the AGF. */
    int items(int changes) {
        BTree t = tree;
        return 1 + (t == null ? BTree.CREATE_ITEMS + changes * OPS * NEW_TREE_ITEMS : changes * OPS * t.reservation());
    }

    /**
     * Locks the AGF in {@code txn} for a change of counts: false, with the AGF let go, if its free list does
     * not hold its reserve (the caller refills it and tries again).
     */
    boolean lockForChange(Txn txn) {
        lock(txn, ag.agf);
        if (!ag.agfl.holds(RESERVE)) {
            txn.release(ag.agf);
            return false;
        }
        return true;
    }

    /**
     * The run at device block {@code dev}: how many of the {@code len} blocks from it have the count
     * {@code dev} has, and that count, packed as {@code length << 32 | count} (1 where no record covers
     * it). With {@code txn} null, a snapshot read without the AGF (a plan the caller checks again under it).
     */
    long run(Txn txn, long dev, int len) {
        BTree t = tree;
        int at = (int) (dev - ag.start);
        if (t == null) {
            return pack(len, 1);
        }
        MemorySegment k = MemorySegment.ofArray(new byte[RefcountFormat.KEY]);
        MemorySegment fk = MemorySegment.ofArray(new byte[RefcountFormat.KEY]);
        MemorySegment fv = MemorySegment.ofArray(new byte[RefcountFormat.VALUE]);
        RefcountFormat.setKey(k, at);
        if (t.find(txn, k, BTree.Match.FLOOR, fk, fv) >= 0) {
            int s = RefcountFormat.key(fk), l = checked(s, fv);
            if ((long) s + l > at) {
                return pack((int) Math.min(len, (long) s + l - at), RefcountFormat.count(fv));
            }
        }
        if (t.find(txn, k, BTree.Match.CEILING, fk, fv) >= 0) {
            int s = RefcountFormat.key(fk);
            checked(s, fv);
            return pack((int) Math.min(len, (long) s - at), 1);
        }
        return pack(len, 1);
    }

    static long pack(int length, int count) {
        return (long) length << 32 | Integer.toUnsignedLong(count);
    }

    static int runLength(long run) {
        return (int) (run >>> 32);
    }

    static int runCount(long run) {
        return (int) run;
    }

    /** A record's length, checked to lie inside the group's blocks past its headers. */
    private int checked(int s, MemorySegment v) {
        int l = RefcountFormat.length(v);
        if (l < 1 || s < AgHeaderFormat.FIRST_FREE || (long) s + l > ag.length) {
            throw new CorruptionException(ag.agf.block(), TREE, "group " + ag.agno + "'s refcount tree holds [" + Integer.toUnsignedString(s)
                    + ", +" + Integer.toUnsignedString(l) + "), not inside [" + AgHeaderFormat.FIRST_FREE + ", " + ag.length + ")");
        }
        return l;
    }

    /**
     * Sets the count of the run {@code [dev, dev + len)}, whose count is {@code from} ({@link #run} with
     * {@code txn}, which holds the AGF from {@link #lockForChange}), to {@code to}: 1 removes it from the
     * tree, {@link RefcountFormat#STAGING} marks it staging. Makes the tree if this is its first record.
     */
    void set(Txn txn, long dev, int len, int from, int to) {
        int at = (int) (dev - ag.start);
        BTree t = tree;
        if (t == null) {
            t = BTree.create(txn, ag.agfl, AgTreeFormat.treeId(ag.agno, AgTreeFormat.REFCOUNT));
            AllocationGroup.setU32(txn, ag.agf, REFCOUNT_TREE, (int) (t.headerBlock() - ag.start));
            tree = t;
        }
        MemorySegment k = MemorySegment.ofArray(new byte[RefcountFormat.KEY]);
        MemorySegment v = MemorySegment.ofArray(new byte[RefcountFormat.VALUE]);
        if (from != 1) { // a record holds the run: cut off what lies before and after it
            MemorySegment fk = MemorySegment.ofArray(new byte[RefcountFormat.KEY]);
            RefcountFormat.setKey(k, at);
            if (t.find(txn, k, BTree.Match.FLOOR, fk, v) < 0 || RefcountFormat.count(v) != from) {
                throw new CorruptionException(ag.agf.block(), TREE, "group " + ag.agno + " has no record of count " + from
                        + " holding block " + at);
            }
            int s = RefcountFormat.key(fk), l = checked(s, v);
            if ((long) s + l < (long) at + len) {
                throw new CorruptionException(ag.agf.block(), TREE, "group " + ag.agno + "'s record [" + s + ", +" + l
                        + ") does not hold the run [" + at + ", +" + len + ")");
            }
            if (s < at) {
                put(txn, t, k, v, s, at - s, from);
            } else if (to == 1) {
                RefcountFormat.setKey(k, at);
                t.delete(txn, k);
            }
            if ((long) s + l > (long) at + len) {
                put(txn, t, k, v, at + len, s + l - at - len, from);
            }
        }
        if (to != 1) {
            put(txn, t, k, v, at, len, to);
        }
    }

    private static void put(Txn txn, BTree t, MemorySegment k, MemorySegment v, int s, int l, int count) {
        RefcountFormat.setKey(k, s);
        RefcountFormat.setValue(v, l, count);
        t.put(txn, k, v);
    }

    /** A record of the tree: group block, length and count. */
    record Entry(int start, int length, int count) {
    }

    /** Every record, in block order (a snapshot: for the checker, dumps and the mount's staging cleanup). */
    List<Entry> all() {
        List<Entry> out = new ArrayList<>();
        BTree t = tree;
        if (t != null) {
            for (Cursor c = t.cursor(null, false); c.next(); ) {
                MemorySegment k = MemorySegment.ofArray(c.key()), v = MemorySegment.ofArray(c.value());
                if (k.byteSize() != RefcountFormat.KEY || v.byteSize() != RefcountFormat.VALUE) {
                    throw new CorruptionException(t.headerBlock(), TREE, "group " + ag.agno + "'s refcount tree has a "
                            + k.byteSize() + "-byte key and a " + v.byteSize() + "-byte value");
                }
                int s = RefcountFormat.key(k);
                out.add(new Entry(s, checked(s, v), RefcountFormat.count(v)));
            }
        }
        return out;
    }
}
