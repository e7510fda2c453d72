package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * The second transaction of direct writes that filled unwritten space or moved the size, batched across
 * the writers of one file (flat combining, as the journal's group commit shares a log write): a writer
 * whose data write has completed publishes its range on the inode's {@link Queue}; whoever takes the
 * inode's conversion turn applies every range published so far, as few transactions as the mapping
 * allows, each {@linkplain Txn#orderAfterData ordered after} the data writes that completed before it (each
 * published range's did), and wakes the writers whose ranges it carried; then, while more were published
 * meanwhile, those too, up to {@link #PASSES} batches. The others wait for that: a writer that finds the
 * turn held parks at once, to be woken by the batch that carries its range or by the end of a turn that
 * took the queue for the last time before it published. It does not spin first: a turn carrying a batch
 * lasts longer than a spin could bridge, and on 2 vCPUs a spinning writer takes the CPU the holder needs
 * (with 32 writers on a memory device, a 20 us spin before parking cost 24–35 us of writers' CPU per
 * write, parking at once 12–20).
 *
 * <p>A batch goes in file order, ranges that meet or overlap merged into one change (a run). An inline
 * list takes a whole batch in one transaction (made a tree first if the result would not fit, the tree's
 * blocks promised first unless a writer of the batch holds them: {@link #requireTree}). A tree
 * takes up to {@link #MAX_STEPS} runs per transaction, a step each: its extents are looked up once for
 * the whole batch, as the runs need them ({@link ExtentMap#extend}: one lookup for a range inside an
 * extent, one more per end at an extent's edge), and each step changes and stores only the extents its
 * run reads or merges with (at most {@link ExtentMap#TREE_OPS} keys), which a later run beside it then
 * sees. Before each step after the first, the tree's block reserve, read in the record the transaction
 * holds, must still be between its marks, which covers that step's worst case, as a step of its own.
 * What does not fit waits for the next transaction; a merged run that would change more keys goes as
 * its ranges; a range over several extents takes {@link FileMapping#finish}'s steps. The size moves in
 * the transaction that converts the range that moves it, as it did one write at a time.
 *
 * <h2>Locks</h2>
 * The conversion turn ({@link Queue#turn}) is taken by a writer holding its shared I/O lock and nothing
 * else, before the log reservation; under it the reservation, then {@link FileMapping}'s order. Waiters
 * hold only their shared I/O locks, which no one the turn holder waits for (the log's tail, the tree's
 * reserve) needs.
 */
final class Conversions {
    /**
     * Most tree steps (runs) one transaction carries: what it reserves log space for (fewer where that
     * would be over an eighth of the log). As many as the writers a database keeps in flight (32 in
     * bench randwrite): one transaction for all that were published together.
     */
    static final int MAX_STEPS = 32;
    /**
     * Most batches one turn applies: enough that writers publishing behind the holder need not take the
     * turn, few enough that its own writer is not kept long. With 32 writers filling unwritten space on a
     * memory device (2 vCPUs), 4 passes took transactions per write from 0.61–0.81 to 0.23–0.48 and the
     * p99 from 9.6–20 to 5.7–10.6 ms, at a p50 of 0.19–0.49 ms (10–26 us with one pass: most writers
     * then convert their own range at once).
     */
    static final int PASSES = 4;
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
        /** A tree's blocks the turn's holder promised for batches none of whose writers holds them; used under the turn. */
        final FileMapping.TreePromise tree = FileMapping.TreePromise.of(false);

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

    /**
     * One write's conversion: file blocks {@code [first, end)} written, the size at least {@code newSize}; with
     * {@code treePromised}, its writer holds a tree's blocks promised until it is done.
     */
    static final class Request {
        final long first, end, newSize;
        final boolean treePromised;
        final Thread thread = Thread.currentThread();
        Request next;
        /** Why the batch carrying it failed; read after {@link #done}. */
        Throwable failure;
        volatile boolean done;

        Request(long first, long end, long newSize, boolean treePromised) {
            this.first = first;
            this.end = end;
            this.newSize = newSize;
            this.treePromised = treePromised;
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
     * least {@code newSize}, this thread's or another writer's. The caller holds {@code i}'s I/O lock, and
     * with {@code treePromised} a tree's blocks promised until this returns.
     */
    void convert(Inode i, long first, long end, long newSize, boolean treePromised) {
        Queue q = queue(i);
        Request mine = new Request(first, end, newSize, treePromised);
        q.publish(mine);
        while (!mine.done) {
            if (q.tryTurn()) {
                try {
                    combine(i, q);
                } finally {
                    mapping.releaseTree(q.tree);
                    q.endTurn();
                }
                continue;
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

    /**
     * The turn's work: every range published so far, then those published meanwhile, up to {@link #PASSES}
     * batches in all. A writer that publishes while the turn is held is so carried by the holder, awake
     * and on a CPU, and woken once, when its range is converted, rather than first woken to take the turn.
     */
    private void combine(Inode i, Queue q) {
        for (int pass = 0; pass < PASSES; pass++) {
            List<Request> batch = q.takeAll();
            if (batch.isEmpty()) {
                return;
            }
            apply(i, q, Run.of(batch));
        }
    }

    /**
     * Converts every range of {@code batch}, waking each writer when its range is; a failure is each
     * unfinished one's. The ranges go in file order, those that meet or overlap merged into one change.
     * Runs that together found no space (no tree's blocks to promise, most often, when their changes fit
     * an inline list only one at a time) go again one at a time, so that only those that need what is not
     * there fail.
     */
    private void apply(Inode i, Queue q, List<Run> runs) {
        List<Run> left = runs;
        try {
            while (!left.isEmpty()) {
                left = commitSome(i, q, left);
            }
        } catch (NoSpaceException full) {
            List<Run> unfinished = left.stream().filter(r -> !r.done()).toList();
            if (unfinished.size() < 2) {
                finish(unfinished, full);
            } else {
                for (Run r : unfinished) {
                    apply(i, q, List.of(r));
                }
            }
        } catch (RuntimeException | Error t) {
            finish(left, t);
        }
    }

    private static void finish(List<Run> runs, Throwable t) {
        for (Run r : runs) {
            r.finish(t);
        }
    }

    /**
     * Published ranges that meet or overlap, in file order: one change of the extents, carried by one
     * transaction; the size it asks for is the largest of its requests'.
     */
    private static final class Run {
        final long first;
        long end, newSize;
        final List<Request> requests = new ArrayList<>(1);

        private Run(Request r) {
            first = r.first;
            end = r.end;
            newSize = r.newSize;
            requests.add(r);
        }

        private static final Comparator<Request> BY_FIRST = Comparator.comparingLong(r -> r.first);

        /** {@code batch} sorted by first block, merged where ranges meet or overlap. */
        static List<Run> of(List<Request> batch) {
            if (batch.size() > 1) {
                batch.sort(BY_FIRST);
            }
            List<Run> runs = new ArrayList<>(batch.size());
            for (Request r : batch) {
                Run last = runs.isEmpty() ? null : runs.getLast();
                if (last != null && r.first <= last.end) {
                    last.end = Math.max(last.end, r.end);
                    last.newSize = Math.max(last.newSize, r.newSize);
                    last.requests.add(r);
                } else {
                    runs.add(new Run(r));
                }
            }
            return runs;
        }

        /** Its requests as runs of their own, in file order (a merged change too big for one step). */
        List<Run> split() {
            List<Run> one = new ArrayList<>(requests.size());
            for (Request r : requests) {
                one.add(new Run(r));
            }
            return one;
        }

        void finish(Throwable t) {
            for (Request r : requests) {
                r.finish(t);
            }
        }

        /** Whether every request it carries is finished. */
        boolean done() {
            for (Request r : requests) {
                if (!r.done) {
                    return false;
                }
            }
            return true;
        }
    }

    /**
     * Steps one transaction of a tree reserves for: one per range of {@code pending} (a merged run that
     * goes as its ranges takes one each), up to {@link #MAX_STEPS}, fewer where their reservation of
     * {@code items} each would be over an eighth of the log.
     */
    private int steps(List<Run> pending, int items) {
        int ranges = 0;
        for (Run r : pending) {
            ranges += r.requests.size();
        }
        int steps = Math.min(ranges, MAX_STEPS);
        while (steps > 1 && cache.journal().reservationBytes(2 + steps * items) > cache.journal().logBytes() / 8) {
            steps--;
        }
        return steps;
    }

    /** What one transaction carries of the runs it was given, and what it leaves. */
    private static final class Carry {
        final List<Run> carried = new ArrayList<>(), left = new ArrayList<>();
        /** A run over several extents, for {@link FileMapping#finish}'s steps after the transaction; or null. */
        Run alone;
        /** The block holding the inode's record, once the transaction holds it. */
        Buffer record;
    }

    /**
     * One transaction converting what it can of {@code pending} (in file order, finished); returns the rest.
     * A tree's blocks are promised before its reserve is refilled or an inline list becomes one
     * ({@link #requireTree}).
     */
    private List<Run> commitSome(Inode i, Queue q, List<Run> pending) {
        ExtentList plan = mapping.file(i, 0, 0).extents(); // where the extents are is all the reservation needs
        if (plan.inTree()) { // its reserve refilled first (an inline list needs nothing): a change since is found under the lock
            requireTree(i, q, pending);
            map.prepare(i);
        }
        int items = map.items(i, plan), steps = plan.inTree() ? steps(pending, items) : 1;
        Carry c = new Carry();
        boolean grow = false;
        try (Txn txn = Txn.begin(cache, 2 + steps * items)) {
            i.lock();
            try {
                ExtentList y = mapping.file(i, 0, 0).extents();
                if (!FileMapping.sameMap(plan, y) || !map.ready(i, y)) {
                    return pending; // changed meanwhile: look again
                }
                int span = InodeFormat.INLINE;
                if (!y.inTree()) {
                    for (Run r : pending) {
                        y.setWritten(r.first, r.end);
                    }
                    if (!y.fits()) {
                        grow = true;
                        return pending;
                    }
                    c.record = records.lockRecord(txn, i.ino);
                    span = Math.max(span, map.store(txn, i, c.record, y));
                    c.carried.addAll(pending);
                } else {
                    convertInTree(txn, i, y, pending, steps, c);
                }
                if (!c.carried.isEmpty()) {
                    commit(i, txn, c.record, span, c.carried, y.inTree() ? null : y);
                }
            } finally {
                i.unlock();
            }
        } finally {
            if (grow) { // the transaction closed, changing nothing, and the lock let go
                requireTree(i, q, pending);
                map.makeRoom(i);
            }
        }
        for (Run r : c.carried) {
            r.finish(null);
        }
        if (c.alone != null) {
            mapping.finish(i, c.alone.first, c.alone.end, c.alone.newSize, false);
            c.alone.finish(null);
        }
        return c.left;
    }

    /**
     * Promises a tree's blocks for the rest of the turn ({@link FileMapping#requireTree}) unless the turn did
     * or a writer of {@code pending} holds them: writers that checked an inline list and found their own
     * change fitting promised none, yet together, or after another writer's change, their changes may not
     * fit (direct writes share the I/O lock). NoSpaceException, with nothing changed: the batch's runs go
     * again one at a time ({@link #apply}), and a writer whose run still needs the tree fails, its blocks
     * unwritten, reading what they read before.
     */
    private void requireTree(Inode i, Queue q, List<Run> pending) {
        for (Run r : pending) {
            for (Request w : r.requests) {
                if (w.treePromised) {
                    return;
                }
            }
        }
        mapping.requireTree(i, q.tree);
    }

    /**
     * Converts up to {@code steps} of {@code pending} in the tree window {@code y} (an empty one: the
     * extents are looked up as the runs need them, each once, {@link ExtentMap#extend}), a step each: the
     * extents the run reads or merges with, changed and stored as a window of their own (at most
     * {@link ExtentMap#TREE_OPS} keys), then put back into {@code y}, so that a later run beside it sees
     * the change. A merged run that would change more keys goes as its requests, one a step; a single
     * request that would (over several extents) is {@link Carry#alone}; each step after the first waits
     * for the next transaction unless the tree's reserve, read in the record the transaction holds, still
     * covers it.
     */
    private void convertInTree(Txn txn, Inode i, ExtentList y, List<Run> pending, int steps, Carry c) {
        ExtentList w = ExtentMap.emptyWindow(y);
        int rec = records.rec(i.ino);
        List<Run> todo = pending;
        for (int n = 0; n < todo.size(); n++) {
            Run r = todo.get(n);
            if (c.carried.size() == steps) {
                c.left.add(r);
                continue;
            }
            map.extend(txn, i, w, r.first, r.end);
            int from = w.firstEndingAfter(Math.max(r.first - 1, 0)), to = w.firstStartingAfter(r.end);
            ExtentList step = ExtentMap.asLoaded(w.slice(from, to));
            step.setWritten(r.first, r.end);
            if (ExtentMap.changes(step) > ExtentMap.TREE_OPS) {
                if (r.requests.size() > 1) {
                    todo = todo == pending ? new ArrayList<>(pending) : todo;
                    todo.addAll(n + 1, r.split());
                } else if (c.alone == null) {
                    c.alone = r; // over several extents: FileMapping.finish's steps, after this transaction
                } else {
                    c.left.add(r);
                }
                continue;
            }
            if (c.record == null) {
                c.record = records.lockRecord(txn, i.ino);
            } else if (!map.readyIn(c.record.data(), rec)) { // the reserve covers no further step
                c.left.addAll(todo.subList(n, todo.size()));
                return;
            }
            map.store(txn, i, c.record, step);
            w.splice(from, to, step);
            c.carried.add(r);
        }
    }

    /** Moves the size to the largest {@code carried} asks for, touches the times, and commits ordered after the data. */
    private void commit(Inode i, Txn txn, Buffer b, int span, List<Run> carried, ExtentList inline) {
        int rec = records.rec(i.ino);
        MemorySegment m = b.data();
        long size = InodeFormat.size(m, rec);
        for (Run r : carried) {
            size = Math.max(size, r.newSize);
        }
        InodeFormat.setSize(m, rec, size);
        if (inline != null) {
            mapping.clearSpeculativeIfCovered(i, m, rec, inline);
        }
        long now = nowNanos();
        InodeFormat.touch(m, rec, now, true);
        txn.log(b, rec, span);
        txn.orderAfterData();
        FileMapping.commitData(i, txn);
        records.clearModified(i, now);
    }
}
