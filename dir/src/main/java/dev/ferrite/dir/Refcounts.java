package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BlockAllocator;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.TreeWalk;
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
 *
 * <h2>Reservation</h2>
 * A change of counts may grow the tree (a record cut in two), freeing included: a truncate that takes a
 * reference off the middle of a shared run. So the group holds back from data and inode chunks
 * {@link #most} blocks, the tree's worst case ({@link RefcountFormat#maxTreeBlocks}), less those the tree
 * already takes (XFS's per-group metadata reservation): only the tree's nodes, through the free list's
 * refills, use it, and a change of counts never runs out of blocks. Every group holds it, cloned or not,
 * as XFS does on a volume formatted for reflink: a group filled before its first clone would have none.
 * The free list's stock is not free space, so a node the tree takes from it is paid for from the
 * reservation only when the list is refilled from free space, and one it gives back returns to the
 * reservation only when the list spills back: statfs's free count then moves exactly as free space does.
 * What has been paid is kept in the AGF ({@link AgHeaderFormat#REFCOUNT_PAID}), changed in the refill's
 * transaction, so that a mount, which counts the tree's blocks, knows what is still owed or to refund.
 * The spare count ({@link Volume#spareBlocks}) counts the list's stock with the free blocks, so a node the
 * tree takes lowers it until the refill pays for it: meanwhile it is drawn from the set-aside pool, which
 * the payment tops up again ({@link Counters#repay}).
 */
final class Refcounts {
    /** Most tree changes one {@link #set} makes: the head cut off, the run's record, the tail cut off. */
    static final int OPS = 3;
    static final String TREE = "refcount tree";
    /** {@link BTree#reservation()} of a tree that is one leaf, drawing on a free list: 3 × 2 + 4 + 1 × 3 items. */
    private static final int NEW_TREE_ITEMS = 13;

    private final AllocationGroup ag;
    private final Counters counters;
    /** Null until the group's first shared block; made under the AGF. */
    volatile BTree tree;
    /** Blocks the tree may take at most, its header included: what the group holds back for it, less {@link #paid}. */
    final int most;
    /** Under the AGF (read without it as a hint): blocks of the tree the reservation has paid for, as the AGF says. */
    private volatile int paid;
    /** Under the AGF: nodes the tree took from the free list that the reservation has not paid for yet. */
    private int owed;
    /** Under the AGF: nodes the tree gave back to the free list that have not returned to the reservation yet. */
    private int refunds;
    /** The tree's allocator: the AGF's free list, counting the nodes the tree takes and gives back. */
    private final BlockAllocator nodes = new BlockAllocator() {
        @Override
        public long allocate(Txn txn) {
            long block = ag.agfl.allocate(txn);
            if (refunds > 0) {
                refunds--;
            } else {
                owed++;
            }
            return block;
        }

        @Override
        public void free(Txn txn, long block) {
            ag.agfl.free(txn, block);
            if (owed > 0) {
                owed--;
            } else {
                refunds++;
            }
        }

        @Override
        public long freeBlocks() {
            return ag.agfl.freeBlocks();
        }

        @Override
        public int itemsPerChange() {
            return ag.agfl.itemsPerChange();
        }
    };
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

    Refcounts(AllocationGroup ag, Counters counters) {
        this.ag = ag;
        this.counters = counters;
        this.most = RefcountFormat.maxTreeBlocks(ag.geometry.blockSize(), ag.length - AgHeaderFormat.FIRST_FREE);
        counters.reservedBlocks.add(most);
    }

    /** Blocks the group holds back for the tree's growth now (a hint without the AGF). */
    int reserve() {
        return Math.max(0, most - paid);
    }

    /** The tree's blocks as counted here: the checker compares them with the tree's. */
    int blocksCounted() {
        return paid + owed - refunds;
    }

    /** In {@code txn}, holding the AGF: the free list took {@code n} blocks from free space, paying for nodes the tree took from it. */
    void listRefilled(Txn txn, int n) {
        int paying = Math.min(n, owed);
        if (paying > 0) {
            owed -= paying;
            pay(txn, paying);
            counters.repay(paying); // the nodes came out of the set-aside pool when the tree took them
        }
    }

    /** In {@code txn}, holding the AGF: the free list gave a block back to free space, returning a node the tree gave back to the reservation. */
    void listSpilled(Txn txn) {
        if (refunds > 0) {
            refunds--;
            pay(txn, -1);
        }
    }

    private void pay(Txn txn, int blocks) {
        AllocationGroup.setU32(txn, ag.agf, AgHeaderFormat.REFCOUNT_PAID, paid + blocks);
        setPaid(paid + blocks);
    }

    private void setPaid(int blocks) {
        int before = reserve();
        paid = blocks;
        counters.reservedBlocks.add(reserve() - before);
    }

    /**
     * Opens the tree the AGF names, if any (mount), and counts its blocks: those beyond what the AGF says the
     * reservation paid are owed, those short of it to be refunded (their nodes on the free list).
     */
    void open() {
        int paidFor = AgHeaderFormat.u32(ag.agf.data(), AgHeaderFormat.REFCOUNT_PAID);
        if (paidFor < 0 || paidFor > ag.length) {
            throw new CorruptionException(ag.agf.block(), AGF, "the refcount tree's reservation paid for "
                    + Integer.toUnsignedString(paidFor) + " blocks of a group of " + ag.length);
        }
        setPaid(paidFor);
        int rel = AgHeaderFormat.u32(ag.agf.data(), REFCOUNT_TREE);
        int[] blocks = {0};
        if (rel != 0) {
            if (rel < AgHeaderFormat.FIRST_FREE || rel >= ag.length) {
                throw new CorruptionException(ag.agf.block(), AGF, "refcount tree header at group block " + Integer.toUnsignedString(rel)
                        + " lies outside the group's " + ag.length + " blocks");
            }
            tree = BTree.open(ag.cache, nodes, ag.start + rel, AgTreeFormat.treeId(ag.agno, AgTreeFormat.REFCOUNT));
            TreeWalk.blocks(tree, b -> blocks[0]++);
        }
        owed = Math.max(0, blocks[0] - paidFor);
        refunds = Math.max(0, paidFor - blocks[0]);
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

    /**
     * {@link #run} backwards: the run ending at device block {@code end} (exclusive), how many of the
     * {@code len} blocks before it have the count block {@code end - 1} has, and that count, packed alike.
     */
    long runBefore(Txn txn, long end, int len) {
        BTree t = tree;
        int last = (int) (end - 1 - ag.start);
        if (t == null) {
            return pack(len, 1);
        }
        MemorySegment k = MemorySegment.ofArray(new byte[RefcountFormat.KEY]);
        MemorySegment fk = MemorySegment.ofArray(new byte[RefcountFormat.KEY]);
        MemorySegment fv = MemorySegment.ofArray(new byte[RefcountFormat.VALUE]);
        RefcountFormat.setKey(k, last);
        if (t.find(txn, k, BTree.Match.FLOOR, fk, fv) < 0) {
            return pack(len, 1);
        }
        int s = RefcountFormat.key(fk), l = checked(s, fv);
        return (long) s + l > last ? pack((int) Math.min(len, (long) last + 1 - s), RefcountFormat.count(fv))
                : pack((int) Math.min(len, (long) last + 1 - s - l), 1);
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
            t = BTree.create(txn, nodes, AgTreeFormat.treeId(ag.agno, AgTreeFormat.REFCOUNT));
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
