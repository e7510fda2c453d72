package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;

import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * The second transaction of direct writes that filled unwritten space or moved the size, batched across
 * the writers of one file (flat combining, as the journal's group commit shares a log write): a writer
 * whose data write has completed publishes its range on the inode's {@link Queue}; whoever takes the
 * inode's conversion turn applies every range published so far, as few transactions as the mapping
 * allows, each {@linkplain Txn#orderAfterData ordered after} the data writes that completed before it (each
 * published range's did), and wakes the writers whose ranges it carried. The others wait for that: a
 * writer that finds the turn held watches it for up to {@link #SPIN_NANOS} (a batch is mostly one short
 * transaction, so by then its range is often converted, or the turn free for it to take) and parks after
 * that, to be woken by the batch that carries its range or by the end of a turn that took the queue
 * before it published.
 *
 * <p>An inline list takes a whole batch in one transaction (made a tree first if the result would not
 * fit). A tree takes up to {@link #MAX_STEPS} ranges per transaction, each within one extent of the tree
 * and apart from the others' (each a change of at most {@link ExtentMap#TREE_OPS} keys to keys of its
 * own): before each step after the first, the tree's block reserve, read in the record the transaction
 * holds, must still be between its marks, which covers that step's worst case, as a step of its own.
 * What does not fit waits for the next transaction; a range over several extents takes
 * {@link FileMapping#finish}'s steps. The size moves in the transaction that converts the range that moves
 * it, as it did one write at a time.
 *
 * <h2>Locks</h2>
 * The conversion turn ({@link Queue#turn}) is taken by a writer holding its shared I/O lock and nothing
 * else, before the log reservation; under it the reservation, then {@link FileMapping}'s order. Waiters
 * hold only their shared I/O locks, which no one the turn holder waits for (the log's tail, the tree's
 * reserve) needs.
 */
final class Conversions {
    /** Most tree steps (ranges) one transaction carries: what it reserves log space for (fewer where that would be over an eighth of the log). */
    static final int MAX_STEPS = 8;
    /**
     * How long a writer watches a held turn before it parks. A park and its wake cost more CPU than that
     * on 2 vCPUs, and each wake could preempt the turn holder: with 32 writers (bench randwrite
     * --unwritten --qd 32) 20 us took involuntary context switches per write from 0.27 to 0.07 and the
     * process's CPU per write from 46 to 43 us (medians of 5 runs); 5 us left more parks, and the one
     * run at 50 us spent more CPU.
     */
    static final long SPIN_NANOS = 20_000;
    private static final VarHandle QUEUE;

    static {
        try {
            QUEUE = MethodHandles.lookup().findVarHandle(Inode.class, "conversions", Queue.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final BufferCache cache;
    private final InodeRecords records;
    private final ExtentMap map;
    private final FileMapping mapping;

    Conversions(BufferCache cache, InodeRecords records, ExtentMap map, FileMapping mapping) {
        this.cache = cache;
        this.records = records;
        this.map = map;
        this.mapping = mapping;
    }

    /** A file's published ranges and its conversion turn. */
    static final class Queue {
        private static final VarHandle HEAD, TURN;

        static {
            try {
                HEAD = MethodHandles.lookup().findVarHandle(Queue.class, "head", Request.class);
                TURN = MethodHandles.lookup().findVarHandle(Queue.class, "turn", boolean.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        /** The ranges published and not yet taken, newest first (a Treiber stack). */
        @SuppressWarnings("unused") // through HEAD
        private volatile Request head;
        /** Held by the writer applying a batch. */
        @SuppressWarnings("unused") // through TURN
        private volatile boolean turn;

        void publish(Request r) {
            for (Request h; ; ) {
                r.next = h = (Request) HEAD.getVolatile(this);
                if (HEAD.compareAndSet(this, h, r)) {
                    return;
                }
            }
        }

        /** Every published range, oldest first, taken off the queue. */
        List<Request> takeAll() {
            Request h = (Request) HEAD.getAndSet(this, (Request) null);
            List<Request> out = new ArrayList<>();
            for (; h != null; h = h.next) {
                out.addFirst(h);
            }
            return out;
        }

        boolean tryTurn() {
            return !turn && TURN.compareAndSet(this, false, true);
        }

        void endTurn() {
            TURN.setVolatile(this, false);
            Request h = (Request) HEAD.getVolatile(this);
            if (h != null) {
                LockSupport.unpark(h.thread); // published while the turn was held: its writer takes the next one
            }
        }
    }

    /** One write's conversion: file blocks {@code [first, end)} written, the size at least {@code newSize}. */
    static final class Request {
        final long first, end, newSize;
        final Thread thread = Thread.currentThread();
        Request next;
        /** Why the batch carrying it failed; read after {@link #done}. */
        Throwable failure;
        volatile boolean done;

        Request(long first, long end, long newSize) {
            this.first = first;
            this.end = end;
            this.newSize = newSize;
        }

        /** Ends the wait of this request's writer, with {@code t} as its failure if not null; once. */
        void finish(Throwable t) {
            if (!done) {
                failure = t;
                done = true;
                LockSupport.unpark(thread);
            }
        }
    }

    private static Queue queue(Inode i) {
        Queue q = i.conversions;
        if (q == null) {
            QUEUE.compareAndSet(i, (Queue) null, new Queue());
            q = i.conversions;
        }
        return q;
    }

    /**
     * {@link FileMapping#finish} for a direct write whose data is on the device: returns once a
     * transaction ordered after it converted {@code [first, end)} of {@code i} and moved its size to at
     * least {@code newSize}, this thread's or another writer's. The caller holds {@code i}'s I/O lock.
     */
    void convert(Inode i, long first, long end, long newSize) {
        Queue q = queue(i);
        Request mine = new Request(first, end, newSize);
        q.publish(mine);
        long spinEnd = 0;
        while (!mine.done) {
            if (q.tryTurn()) {
                try {
                    apply(i, q.takeAll());
                } finally {
                    q.endTurn();
                }
                continue;
            }
            if (spinEnd == 0) {
                spinEnd = System.nanoTime() + SPIN_NANOS;
            }
            while (!mine.done && q.turn && System.nanoTime() < spinEnd) {
                Thread.onSpinWait();
            }
            if (!mine.done && q.turn) {
                LockSupport.park(this);
            }
        }
        Throwable t = mine.failure;
        if (t instanceof RuntimeException e) {
            throw e;
        }
        if (t instanceof Error e) {
            throw e;
        }
    }

    /** Converts every range of {@code batch}, waking each writer when its range is; a failure is each unfinished one's. */
    private void apply(Inode i, List<Request> batch) {
        List<Request> left = batch;
        try {
            while (!left.isEmpty()) {
                left = commitSome(i, left);
            }
        } catch (RuntimeException | Error t) {
            for (Request r : left) {
                r.finish(t);
            }
        }
    }

    /** One transaction converting what it can of {@code pending} (finished); returns the rest. */
    private List<Request> commitSome(Inode i, List<Request> pending) {
        map.prepare(i);
        ExtentList plan = mapping.file(i, 0, 0).extents(); // where the extents are is all the reservation needs
        int steps = plan.inTree() ? Math.min(pending.size(), MAX_STEPS) : 1, items = map.items(i, plan);
        while (steps > 1 && cache.journal().reservationBytes(2 + steps * items) > cache.journal().logBytes() / 8) {
            steps--; // a small log: no one reservation takes much of it
        }
        List<Request> carried = new ArrayList<>(), left = new ArrayList<>();
        Request alone = null;
        boolean grow = false;
        try (Txn txn = Txn.begin(cache, 2 + steps * items)) {
            i.lock();
            try {
                ExtentList y = mapping.file(i, 0, 0).extents();
                if (!FileMapping.sameMap(plan, y) || !map.ready(i, y)) {
                    return pending; // changed meanwhile: look again
                }
                Buffer b = null;
                int span = InodeFormat.INLINE;
                if (!y.inTree()) {
                    for (Request r : pending) {
                        y.setWritten(r.first, r.end);
                    }
                    if (!y.fits()) {
                        grow = true;
                        return pending;
                    }
                    b = records.lockRecord(txn, i.ino);
                    span = Math.max(span, map.store(txn, i, b, y));
                    carried.addAll(pending);
                } else {
                    List<ExtentList> windows = new ArrayList<>();
                    for (Request r : pending) {
                        ExtentList w = windows.size() == steps ? null : map.window(i, y, r.first, r.end);
                        if (w != null && FileMapping.stepEnd(w, r.first, r.end) < r.end && carried.isEmpty() && alone == null) {
                            alone = r; // over several extents: FileMapping.finish's steps, after this transaction
                        } else if (w == null || FileMapping.stepEnd(w, r.first, r.end) < r.end || overlaps(w, windows)) {
                            left.add(r);
                        } else {
                            w.setWritten(r.first, r.end);
                            windows.add(w);
                            carried.add(r);
                        }
                    }
                    if (!windows.isEmpty()) {
                        b = records.lockRecord(txn, i.ino);
                    }
                    int rec = records.rec(i.ino);
                    for (int n = 0; n < windows.size(); n++) {
                        if (n > 0 && !map.readyIn(b.data(), rec)) { // the reserve covers no further step
                            List<Request> rest = carried.subList(n, carried.size());
                            left.addAll(0, rest);
                            rest.clear();
                            break;
                        }
                        map.store(txn, i, b, windows.get(n));
                    }
                }
                if (!carried.isEmpty()) {
                    commit(i, txn, b, span, carried);
                }
            } finally {
                i.unlock();
            }
        } finally {
            if (grow) {
                map.makeRoom(i); // the transaction closed, changing nothing, and the lock let go
            }
        }
        for (Request r : carried) {
            r.finish(null);
        }
        if (alone != null) {
            mapping.finish(i, alone.first, alone.end, alone.newSize, false);
            alone.finish(null);
        }
        return left;
    }

    /** Whether the extents {@code w} holds (and so the keys its change may touch) meet or touch those of one of {@code windows}. */
    private static boolean overlaps(ExtentList w, List<ExtentList> windows) {
        for (ExtentList o : windows) {
            if (w.count() == 0 || o.count() == 0
                    || w.fileBlock(0) <= o.end(o.count() - 1) && o.fileBlock(0) <= w.end(w.count() - 1)) {
                return true;
            }
        }
        return false;
    }

    /** Moves the size to the largest {@code carried} asks for, touches the times, and commits ordered after the data. */
    private void commit(Inode i, Txn txn, Buffer b, int span, List<Request> carried) {
        int rec = records.rec(i.ino);
        MemorySegment m = b.data();
        long size = InodeFormat.size(m, rec);
        for (Request r : carried) {
            size = Math.max(size, r.newSize);
        }
        InodeFormat.setSize(m, rec, size);
        long now = nowNanos();
        InodeFormat.touch(m, rec, now, true);
        txn.log(b, rec, span);
        txn.orderAfterData();
        FileMapping.commitData(i, txn);
        records.clearModified(i, now);
    }
}
