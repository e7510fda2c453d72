package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.atomic.LongAdder;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.nowNanos;

/**
 * The second transaction of copies on write ({@link CopyOnWrite}), batched across the writers of one
 * shared file ({@link Combining}): a writer whose data is on the staged blocks publishes its remap;
 * whoever takes the file's remap turn commits every remap published so far in as few transactions as
 * the log reservation and the groups' free lists allow, each {@linkplain Txn#orderAfterData ordered after}
 * the data writes that completed before it (each published remap's did), so N writers finishing their
 * copies at once take the inode's lock and the groups' AGFs once, not N times one after the other.
 *
 * <p>A step remaps a run of one count of a request's old blocks (inside one extent), as one remap was a
 * transaction before: it maps the file's range to the staged blocks (written), drops their staging
 * record, and takes one reference off the old blocks, freeing them if that was the last; a request whose
 * old blocks are several runs (a count another file changed meanwhile) takes several steps. One
 * transaction carries up to {@link Conversions#MAX_STEPS} steps (fewer where their reservation would be
 * over an eighth of the log), in file order: the concurrent remaps of one file are of disjoint ranges
 * (each writer holds its range in {@link BlockRanges}). An inline list takes them while the result fits
 * (else a tree is made first, holding no lock, and the batch tried again); a tree a window per step
 * ({@link ExtentMap#extend}, as a batch of conversions does), each step after the first only while the
 * tree's reserve, read in the record the transaction holds, still covers it. The counts change under the
 * AGFs of every group the transaction's requests touch, taken in group order after the inode's lock and
 * before its record; each step after the first only while the free lists of its groups still hold
 * {@link AllocationGroup#RESERVE}, which a step's changes need, as a transaction of its own did. What does
 * not fit waits for the next transaction. The size moves in the transaction that finishes the request
 * that moves it.
 *
 * <p>A free list short of its reserve is refilled holding nothing (the transaction cancelled), never
 * inside a transaction that holds an AGF, which the refill takes. A batch that fails (no space to refill,
 * damage) fails each request it had not finished; what it committed stays, each transaction whole.
 */
final class Remaps extends Combining<Remaps.Request> {
    private static final Comparator<Request> BY_BLOCK = Comparator.comparingLong(r -> r.fb);

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeRecords records;
    private final ExtentMap map;
    private final FileMapping mapping;
    /** Requests remapped whole, and the transactions that carried them, since mount ({@link CopyOnWriteStats}). */
    private final LongAdder remapped = new LongAdder(), transactions = new LongAdder();

    Remaps(Volume volume, BufferCache cache, Geometry geometry, InodeRecords records, ExtentMap map, FileMapping mapping) {
        super("remaps");
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.records = records;
        this.map = map;
        this.mapping = mapping;
    }

    /** One copy on write's remap: file blocks {@code [fb, fb + n)}, on the shared blocks from {@code old}, to the staged ones from {@code fresh}. */
    static final class Request extends Combining.Request {
        final long fb, old, fresh, newSize;
        final int n;
        final boolean writeBack;
        final AllocationGroup og, ng;
        /** Blocks remapped by committed transactions; the turn holder's. */
        int done;

        Request(long fb, long old, long fresh, int n, long newSize, boolean writeBack, AllocationGroup og, AllocationGroup ng) {
            this.fb = fb;
            this.old = old;
            this.fresh = fresh;
            this.n = n;
            this.newSize = newSize;
            this.writeBack = writeBack;
            this.og = og;
            this.ng = ng;
        }
    }

    /**
     * Maps file blocks {@code [fb, fb + n)} of {@code i}, now on the shared blocks from {@code old}, to the
     * staged blocks from {@code fresh}, whose data is written: returns once transactions ordered after the
     * data have, this thread's or another writer's. {@code newSize} (0: none) moves with the last blocks;
     * with {@code writeBack} the times are the buffered write's. The caller holds {@code i}'s I/O lock and
     * the range in its {@link BlockRanges}.
     */
    void remap(Inode i, long fb, long old, long fresh, int n, long newSize, boolean writeBack) {
        submit(i, new Request(fb, old, fresh, n, newSize, writeBack, volume.group(geometry.agOfBlock(old)),
                volume.group(geometry.agOfBlock(fresh))));
    }

    /** Requests remapped whole and transactions that remapped them, since mount. */
    CopyOnWriteStats stats() {
        return new CopyOnWriteStats(remapped.sum(), transactions.sum());
    }

    /** What is left of one batch, and what its next transaction must do first. */
    private static final class Batch {
        List<Request> left;
        /** Groups whose free list a transaction found short: refilled before the next, holding nothing. */
        final List<AllocationGroup> refill = new ArrayList<>();
        /** The inline list could not take the first step: a tree first. */
        boolean room;
        int fails;

        Batch(List<Request> left) {
            this.left = left;
        }
    }

    @Override
    void apply(Inode i, List<Request> batch) {
        batch.sort(BY_BLOCK);
        Batch b = new Batch(batch);
        try {
            while (!b.left.isEmpty()) {
                commitSome(i, b);
            }
        } catch (RuntimeException | Error t) {
            for (Request r : b.left) {
                r.finish(t);
            }
        }
    }

    /** One step: {@code len} blocks of {@code r} from its {@code done}; its count change announced as {@code lowered}, if any. */
    private record Step(Request r, int len, Refcounts owner, Refcounts.Lowered lowered, BusyExtents.Entry busy) {
    }

    /** One transaction remapping what it can of {@code b.left}, or none (then what blocked it is fixed first). */
    private void commitSome(Inode i, Batch b) {
        if (b.room) { // another writer's remap split extents since its makeRoom: a tree first, holding no lock
            map.makeRoom(i);
            b.room = false;
        }
        map.prepare(i);
        ExtentList plan = mapping.file(i, 0, 0).extents();
        List<Request> pending = b.left;
        // a step frees the old blocks or counts them down, never both
        int perStep = 0, most = Math.min(pending.size(), Conversions.MAX_STEPS);
        for (int k = 0; k < most; k++) {
            Request r = pending.get(k);
            perStep = Math.max(perStep, Math.max(r.og.blockItems(), r.og.refcounts.items(1)) + r.ng.refcounts.items(1));
        }
        perStep += map.items(i, plan);
        int steps = fitLog(cache, most, perStep);
        TreeSet<AllocationGroup> groups = new TreeSet<>(Comparator.comparingInt(g -> g.agno)); // AGFs in group order
        for (Request r : pending.subList(0, steps)) {
            groups.add(r.og);
            groups.add(r.ng);
        }
        for (AllocationGroup g : groups) {
            if (b.refill.contains(g) || g.needsRefill()) {
                g.refillFreeList();
            }
        }
        b.refill.clear();
        int rec = records.rec(i.ino);
        List<Step> done = new ArrayList<>(steps);
        try (Txn txn = Txn.begin(cache, 2 + steps * perStep)) {
            i.lock();
            try {
                ExtentList y = mapping.file(i, 0, 0).extents();
                if (!FileMapping.sameMap(plan, y) || !map.ready(i, y)) {
                    return; // changed meanwhile: look again
                }
                for (AllocationGroup g : groups) {
                    if (!g.refcounts.lockForChange(txn)) {
                        if (b.fails++ == RETRIES) {
                            throw new NoSpaceException("allocation group " + g.agno + " cannot refill the free list of its trees");
                        }
                        // refilled holding nothing: this transaction may hold an AGF, which a refill takes
                        b.refill.add(g);
                        return;
                    }
                }
                Buffer rb = null;
                ExtentList w = y.inTree() ? ExtentMap.emptyWindow(y) : y;
                int span = InodeFormat.INLINE;
                long size = 0;
                boolean direct = false;
                requests:
                for (Request r : pending) {
                    for (int at = r.done; at < r.n; ) {
                        if (done.size() == steps) {
                            break requests;
                        }
                        if (!done.isEmpty() && (!r.og.refcounts.holdsReserve() || !r.ng.refcounts.holdsReserve()
                                || w.inTree() && !map.readyIn(rb.data(), rec))) {
                            break requests; // what this step may take is not there: the next transaction's
                        }
                        long fb = r.fb + at;
                        if (w.inTree()) {
                            map.extend(txn, i, w, fb, r.fb + r.n);
                        }
                        int k = w.find(fb);
                        if (k < 0 || w.deviceBlock(k) + (fb - w.fileBlock(k)) != r.old + at) {
                            throw new IllegalStateException("inode " + i.ino + " no longer maps file block " + fb + " to device block "
                                    + (r.old + at) + " under its I/O lock: " + w);
                        }
                        long run = r.og.refcounts.run(txn, r.old + at, (int) Math.min(r.n - at, w.end(k) - fb));
                        int len = Refcounts.runLength(run), count = Refcounts.runCount(run);
                        long staging = r.ng.refcounts.run(txn, r.fresh + at, len);
                        if (Refcounts.runCount(staging) != RefcountFormat.STAGING || Refcounts.runLength(staging) != len) {
                            throw new CorruptionException(r.fresh + at, Refcounts.TREE, "copy-on-write blocks [" + (r.fresh + at) + ", +"
                                    + len + ") of inode " + i.ino + " are not all staging in group " + r.ng.agno);
                        }
                        int from = 0, to = 0;
                        ExtentList changed;
                        if (w.inTree()) { // the step's own window: the extents it reads or merges with
                            from = w.firstEndingAfter(Math.max(fb - 1, 0));
                            to = w.firstStartingAfter(fb + len);
                            changed = ExtentMap.asLoaded(w.slice(from, to));
                        } else {
                            changed = w.copy();
                        }
                        changed.punch(fb, fb + len);
                        changed.insert(fb, r.fresh + at, len, false);
                        if (!changed.fits()) { // nothing of this step changed yet
                            b.room = done.isEmpty();
                            if (b.room) {
                                return;
                            }
                            break requests;
                        }
                        r.ng.refcounts.set(txn, r.fresh + at, len, RefcountFormat.STAGING, 1);
                        Refcounts.Lowered lowered = null;
                        BusyExtents.Entry busy = null;
                        if (count > 1) { // another file (or this one, elsewhere) still maps the old blocks
                            if (count == 2) {
                                lowered = r.og.refcounts.lowering(r.old + at, len, cache.journal().durableSeq());
                            }
                            done.add(new Step(r, len, r.og.refcounts, lowered, null)); // before the change: announced either way
                            r.og.refcounts.set(txn, r.old + at, len, count, count - 1);
                        } else if (r.og.releaseData(txn, r.old + at, len) == AllocOutcome.DONE) { // the others let go meanwhile
                            busy = r.og.freedData(txn);
                            done.add(new Step(r, len, r.og.refcounts, null, busy));
                        } else {
                            throw new IllegalStateException("group " + r.og.agno + " refused a free with its free list held");
                        }
                        if (rb == null) {
                            rb = records.lockRecord(txn, i.ino);
                        }
                        if (w.inTree()) {
                            map.store(txn, i, rb, changed);
                            w.splice(from, to, changed);
                        } else {
                            w = changed;
                        }
                        at += len;
                        direct |= !r.writeBack;
                        if (at == r.n) {
                            size = Math.max(size, r.newSize);
                        }
                    }
                }
                if (!w.inTree()) {
                    span = Math.max(span, map.store(txn, i, rb, w));
                }
                MemorySegment m = rb.data();
                if (size > InodeFormat.size(m, rec)) {
                    InodeFormat.setSize(m, rec, size);
                }
                long now = direct ? nowNanos() : i.modified();
                if (now != 0) {
                    InodeFormat.touch(m, rec, now, true);
                }
                txn.log(rb, rec, span);
                txn.orderAfterData();
                long seq = FileMapping.commitData(i, txn);
                transactions.increment();
                for (Step s : done) {
                    settle(s, seq);
                }
                if (now != 0) {
                    records.clearModified(i, now);
                }
            } catch (RuntimeException | Error t) {
                for (Step s : done) {
                    settle(s, 0); // the transaction failed, changing nothing
                }
                throw t;
            } finally {
                i.unlock();
            }
        }
        List<Request> left = new ArrayList<>();
        for (Step s : done) {
            s.r.done += s.len;
        }
        for (Request r : pending) {
            if (r.done == r.n) {
                remapped.increment();
                r.finish(null);
            } else {
                left.add(r);
            }
        }
        b.left = left;
        b.fails = 0;
    }

    /** Tells the groups the transaction that carried {@code s} committed as {@code seq}, or failed (0). */
    private static void settle(Step s, long seq) {
        if (s.lowered != null) {
            s.owner.lowered(s.lowered, seq);
        }
        if (s.busy != null && seq != 0) {
            s.busy.settle(seq);
        }
    }
}
