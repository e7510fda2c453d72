package dev.ferrite.dir;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.btree.internal.BufferCache;

/**
 * One kind of change to a file's mapping batched across the file's writers (flat combining, as the
 * journal's group commit shares a log write): a writer whose data write has completed publishes its
 * request on the inode's {@link Queue} for that kind; whoever takes the queue's turn applies every
 * request published so far ({@link #apply}, as few transactions as the change allows), finishing each, then
 * those published meanwhile, up to {@link #PASSES} batches. The others wait for that: a writer that finds
 * the turn held parks at once, to be woken by the batch that carries its request or by the end of a turn
 * that took the queue for the last time before it published. It does not spin first: a turn carrying a
 * batch lasts longer than a spin could bridge, and on 2 vCPUs a spinning writer takes the CPU the holder
 * needs (with 32 writers on a memory device, a 20 us spin before parking cost 24–35 us of writers' CPU per
 * write, parking at once 12–20). Direct writes' conversions ({@link Conversions}) and copies on write's
 * remaps ({@link Remaps}) are the two kinds, each with a queue of its own per file.
 *
 * <h2>Locks</h2>
 * A turn is taken by a writer holding its shared I/O lock (and, for a remap, its range of blocks) and no
 * lock of {@link FileMapping}'s order, before the log reservation; under it the reservation, then that
 * order. Waiters hold only what they held to publish, which no one the turn holder waits for (the log's
 * tail, the tree's reserve, a group's free list) needs. A thread waits for one turn at a time.
 */
abstract class Combining<R extends Combining.Request> {
    /**
     * Most batches one turn applies: enough that writers publishing behind the holder need not take the
     * turn, few enough that its own writer is not kept long. With 32 writers filling unwritten space on a
     * memory device (2 vCPUs), 4 passes took transactions per write from 0.61–0.81 to 0.23–0.48 and the
     * p99 from 9.6–20 to 5.7–10.6 ms, at a p50 of 0.19–0.49 ms (10–26 us with one pass: most writers
     * then convert their own range at once).
     */
    static final int PASSES = 4;

    /** The {@link Inode} field holding this kind's queue, made at the file's first request. */
    private final VarHandle queueField;

    Combining(String inodeField) {
        try {
            queueField = MethodHandles.lookup().findVarHandle(Inode.class, inodeField, Queue.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** A file's published requests of one kind and its turn. */
    static final class Queue<R extends Request> {
        private static final VarHandle HEAD, TURN;

        static {
            try {
                HEAD = MethodHandles.lookup().findVarHandle(Queue.class, "head", Request.class);
                TURN = MethodHandles.lookup().findVarHandle(Queue.class, "turn", boolean.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        /** The requests published and not yet taken, newest first (a Treiber stack). */
        @SuppressWarnings("unused") // through HEAD
        private volatile Request head;
        /** Held by the writer applying a batch. */
        @SuppressWarnings("unused") // through TURN
        private volatile boolean turn;

        void publish(R r) {
            for (Request h; ; ) {
                r.next = h = (Request) HEAD.getVolatile(this);
                if (HEAD.compareAndSet(this, h, r)) {
                    return;
                }
            }
        }

        /** Every published request, oldest first, taken off the queue. */
        @SuppressWarnings("unchecked") // only publish puts requests on it
        List<R> takeAll() {
            Request h = (Request) HEAD.getAndSet(this, (Request) null);
            List<R> out = new ArrayList<>();
            for (; h != null; h = h.next) {
                out.addFirst((R) h);
            }
            return out;
        }

        boolean tryTurn() {
            return !turn && TURN.compareAndSet(this, false, true);
        }

        boolean turnHeld() {
            return turn;
        }

        void endTurn() {
            TURN.setVolatile(this, false);
            Request h = (Request) HEAD.getVolatile(this);
            if (h != null) {
                LockSupport.unpark(h.thread); // published while the turn was held: its writer takes the next one
            }
        }
    }

    /** One writer's request, finished once a batch has carried it. */
    abstract static class Request {
        final Thread thread = Thread.currentThread();
        Request next;
        /** Why the batch carrying it failed; read after {@link #done}. */
        Throwable failure;
        volatile boolean done;

        /** Ends the wait of this request's writer, with {@code t} as its failure if not null; once. */
        void finish(Throwable t) {
            if (!done) {
                failure = t;
                done = true;
                LockSupport.unpark(thread);
            }
        }
    }

    /** {@code i}'s queue of this kind, made at its first use. */
    @SuppressWarnings("unchecked") // the field holds queues of this kind only
    final Queue<R> queue(Inode i) {
        Queue<R> q = (Queue<R>) queueField.getVolatile(i);
        if (q == null) {
            queueField.compareAndSet(i, (Queue<R>) null, new Queue<R>());
            q = (Queue<R>) queueField.getVolatile(i);
        }
        return q;
    }

    /**
     * Publishes {@code mine} on {@code i}'s queue and returns once a batch, this thread's or another
     * writer's, has carried it; throws what failed that batch.
     */
    final void submit(Inode i, R mine) {
        Queue<R> q = queue(i);
        q.publish(mine);
        while (!mine.done) {
            if (q.tryTurn()) {
                try {
                    combine(i, q);
                } finally {
                    q.endTurn();
                }
                continue;
            }
            if (!mine.done && q.turnHeld()) {
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
     * The turn's work: every request published so far, then those published meanwhile, up to {@link #PASSES}
     * batches in all. A writer that publishes while the turn is held is so carried by the holder, awake
     * and on a CPU, and woken once, when its request is applied, rather than first woken to take the turn.
     */
    private void combine(Inode i, Queue<R> q) {
        for (int pass = 0; pass < PASSES; pass++) {
            List<R> batch = q.takeAll();
            if (batch.isEmpty()) {
                return;
            }
            apply(i, batch);
        }
    }

    /**
     * Most steps of {@code items} log items each, of the {@code wanted}, that one transaction of a batch
     * carries: fewer where their reservation would be over an eighth of the log, at least one.
     */
    static int fitLog(BufferCache cache, int wanted, int items) {
        int steps = wanted;
        while (steps > 1 && cache.journal().reservationBytes(2 + steps * items) > cache.journal().logBytes() / 8) {
            steps--;
        }
        return steps;
    }

    /** Applies every request of {@code batch} (oldest first), finishing each; a failure is each unfinished one's. */
    abstract void apply(Inode i, List<R> batch);
}
