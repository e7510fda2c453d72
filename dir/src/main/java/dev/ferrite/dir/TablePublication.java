package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.NavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * What keeps reads of the tables' latest state ({@link Table#get}, a cursor outside a snapshot) from
 * seeing part of a multi-key commit: the commit applies key by key, readers take no lock, so each key it
 * changes first records its prior value here, and a read that finds the key's change in the tree while
 * the commit is still {@link #applying} answers with that prior value. A commit is <em>published</em>
 * once it has applied every change and left {@link #applying}: only then can a read return any of its
 * values, so a read that starts after one returned a commit's value finds all of that commit's changes
 * (what RocksDB gives by publishing a batch's sequence number once it is all in the memtable).
 *
 * <p>Several multi-key commits may apply at once ({@code Tables#commit}: side by side on their keys'
 * stripes, or holding their tables), but never two on one key: a commit holds its keys' stripes (or its
 * tables) from before it {@link #begin}s until after it {@link #end}s, so a key's record in an applying
 * commit is the key's published value, and the commits that change one key begin, record and publish in
 * turn. Single writes, one key each, are whole as they are and record nothing. Commits publish in any
 * order: each gets its place in the order they were published in ({@link Commit#publishedAs}).
 *
 * <p>A cursor outside a snapshot holds the {@link Point} that was {@link #published} when it opened (the
 * place before the oldest commit then applying) and the count of commits published by then
 * ({@link #ends}): every commit linked after that place and not published by then is hidden from it by its
 * records. Nothing else holds a published commit's records, so they go with the garbage once no such
 * cursor can reach them, and a cursor never closed pins none once it is garbage itself. Open cursors are
 * only counted ({@link #enter}): a commit whose records hold stubs of extent values it freed copies their
 * bytes in only if a cursor was open when it was published ({@code TableCommit#releaseFrees}).
 */
final class TablePublication {
    /** A place in the order multi-key commits began in: {@link #next} is the first commit after it, once one began. */
    static class Point {
        volatile Commit next;
    }

    /** A multi-key commit's prior values, per table and key, each the value before the commit's first change of the key. */
    static final class Commit {
        /** The place after this commit: where the next one links. */
        final Point after = new Point();
        /** Its place in the order commits were published in (from 1), or 0 while it applies. */
        volatile long publishedAs;
        /** The inodes of the tables it changes, ascending, and each one's records. */
        private final long[] inos;
        private final Records[] tables;
        /** The records of the table recorded to last, and its inode: the committing thread's alone. */
        private Records lastTable;
        private long lastIno;

        /** A commit of {@code ws}, in table inode order (as a commit takes its tables' locks). */
        Commit(List<WriteTransaction.Writes> ws) {
            inos = new long[ws.size()];
            tables = new Records[ws.size()];
            for (int i = 0; i < inos.length; i++) {
                WriteTransaction.Writes w = ws.get(i);
                inos[i] = w.table.inode.ino;
                tables[i] = w.ranges.isEmpty() ? new Listed(keys(w.changes())) : new Mapped();
            }
        }

        private static byte[][] keys(WriteTransaction.Op[] changes) {
            byte[][] keys = new byte[changes.length][];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = changes[i].key();
            }
            return keys;
        }

        /** Records {@code key}'s stored value before this commit (null: absent), unless a change of this commit recorded it already. */
        void record(long ino, byte[] key, byte[] before) {
            Records r = lastTable;
            if (r == null || lastIno != ino) {
                lastTable = r = table(ino);
                lastIno = ino;
                if (r == null) {
                    throw new IllegalStateException("a commit recorded a key of table " + ino + ", which it does not change");
                }
            }
            r.record(key, before);
        }

        /**
         * Replaces {@code key}'s record with {@code before}, the same value in another stored form: a
         * replaced extent value's bytes for its stub ({@code TableCommit#releaseFrees}). A reader handed
         * the old record still reads it right: its blocks stay busy until after this.
         */
        void rerecord(long ino, byte[] key, byte[] before) {
            table(ino).rerecord(key, before);
        }

        /** {@code key}'s record (its value before this commit), or null if the commit has not changed it (yet). */
        TableVersions.Undo prior(long ino, byte[] key) {
            Records r = table(ino);
            return r == null ? null : r.get(key);
        }

        /** Table {@code ino}'s records, or null if the commit does not change it. */
        Records table(long ino) {
            int i = Arrays.binarySearch(inos, ino);
            return i < 0 ? null : tables[i];
        }

        /** True if this commit was not published once {@code ends} commits were: a view taken then hides it. */
        boolean hiddenFrom(long ends) {
            long p = publishedAs;
            return p == 0 || p > ends;
        }
    }

    /** One table's records in a commit: the value each key the commit changed held before the commit. */
    abstract static sealed class Records permits Listed, Mapped {
        /** Records {@code key}'s prior value unless it is recorded already; the committing thread only. */
        abstract void record(byte[] key, byte[] before);

        /** Replaces recorded {@code key}'s record with {@code before} ({@link Commit#rerecord}); the committing thread only. */
        abstract void rerecord(byte[] key, byte[] before);

        /** {@code key}'s record, or null if the commit has not changed it (yet). */
        abstract TableVersions.Undo get(byte[] key);

        /**
         * The first recorded key of {@code range}, in its direction, at or past {@code key} ({@code
         * inclusive}) or past it, from the range's start if {@code key} is null; null if there is none.
         */
        abstract byte[] nearest(TableCursor.Range range, byte[] key, boolean inclusive);
    }

    /**
     * The records of a table whose changes are the transaction's own keys (no deleted range), which the
     * commit holds sorted before it begins: a slot per key, set as the key is recorded, so recording
     * allocates only the record and the readers search the keys. The commit applies them in order, so
     * the slots set are a prefix and {@link #high} bounds every search; a slot below it found empty was
     * not recorded yet (out of order), and is read as such.
     */
    static final class Listed extends Records {
        private static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(TableVersions.Undo[].class);
        private static final Comparator<byte[]> ORDER = Arrays::compareUnsigned;

        private final byte[][] keys;
        private final TableVersions.Undo[] slots;
        /** One past the highest slot set: written after the slot, read before it. */
        private volatile int high;
        /** Where the committing thread's next key is expected. */
        private int next;

        Listed(byte[][] keys) {
            this.keys = keys;
            this.slots = new TableVersions.Undo[keys.length];
        }

        @Override
        void record(byte[] key, byte[] before) {
            int i = next < keys.length && keys[next] == key ? next : Arrays.binarySearch(keys, key, ORDER);
            if (i < 0) {
                throw new IllegalStateException("a commit recorded key " + Tables.hex(MemorySegment.ofArray(key)) + ", which it does not change");
            }
            next = i + 1;
            if (slots[i] == null) { // only this thread sets slots
                SLOTS.setRelease(slots, i, new TableVersions.Undo(0, before, null));
                if (i >= high) {
                    high = i + 1;
                }
            }
        }

        @Override
        void rerecord(byte[] key, byte[] before) {
            SLOTS.setRelease(slots, Arrays.binarySearch(keys, 0, high, key, ORDER), new TableVersions.Undo(0, before, null));
        }

        @Override
        TableVersions.Undo get(byte[] key) {
            int i = Arrays.binarySearch(keys, 0, high, key, ORDER);
            return i < 0 ? null : slot(i);
        }

        private TableVersions.Undo slot(int i) {
            return (TableVersions.Undo) SLOTS.getAcquire(slots, i);
        }

        @Override
        byte[] nearest(TableCursor.Range range, byte[] key, boolean inclusive) {
            int h = high;
            byte[] lo = range.lo(), hi = range.hi();
            if (lo != null && hi != null) {
                int c = ORDER.compare(lo, hi);
                if (c > 0 || c == 0 && !(range.loIn() && range.hiIn())) {
                    return null;
                }
            }
            int from = lo == null ? 0 : range.loIn() ? lowerBound(lo, h) : upperBound(lo, h); // the range's first index
            int to = hi == null ? h : range.hiIn() ? upperBound(hi, h) : lowerBound(hi, h); // and one past its last
            if (!range.reverse()) {
                int i = key == null ? from : Math.max(from, inclusive ? lowerBound(key, h) : upperBound(key, h));
                for (; i < to; i++) {
                    if (slot(i) != null) {
                        return keys[i];
                    }
                }
            } else {
                int i = key == null ? to - 1 : Math.min(to - 1, (inclusive ? upperBound(key, h) : lowerBound(key, h)) - 1);
                for (; i >= from; i--) {
                    if (slot(i) != null) {
                        return keys[i];
                    }
                }
            }
            return null;
        }

        /** The first index below {@code h} whose key is at least {@code key} ({@code h} if none). */
        private int lowerBound(byte[] key, int h) {
            int i = Arrays.binarySearch(keys, 0, h, key, ORDER);
            return i >= 0 ? i : -i - 1;
        }

        /** The first index below {@code h} whose key is above {@code key} ({@code h} if none). */
        private int upperBound(byte[] key, int h) {
            int i = Arrays.binarySearch(keys, 0, h, key, ORDER);
            return i >= 0 ? i + 1 : -i - 1;
        }
    }

    /** The records of a table with a deleted range, whose keys the commit finds as it applies: a concurrent sorted map. */
    static final class Mapped extends Records {
        private final ConcurrentSkipListMap<byte[], TableVersions.Undo> records = new ConcurrentSkipListMap<>(Arrays::compareUnsigned);

        @Override
        void record(byte[] key, byte[] before) {
            records.putIfAbsent(key, new TableVersions.Undo(0, before, null));
        }

        @Override
        void rerecord(byte[] key, byte[] before) {
            records.put(key, new TableVersions.Undo(0, before, null));
        }

        @Override
        TableVersions.Undo get(byte[] key) {
            return records.get(key);
        }

        @Override
        byte[] nearest(TableCursor.Range range, byte[] key, boolean inclusive) {
            NavigableMap<byte[], TableVersions.Undo> v = range.view(records);
            if (key == null) {
                var e = v.firstEntry();
                return e == null ? null : e.getKey();
            }
            return inclusive ? v.ceilingKey(key) : v.higherKey(key);
        }
    }

    /** Stripes of {@link #cursors}, and the longs between two (a cache line and its neighbour apart). */
    private static final int STRIPES = 8, STRIDE = 16;

    /**
     * Latest-state cursors open, in stripes by thread: a cursor leaves the stripe it entered, so no stripe
     * goes below 0, and a sum read stripe by stripe sees every cursor open both before and after the read
     * of its stripe. A cursor never closed stays counted (costing later commits a copy, {@link #cursorsOpen}).
     */
    private final AtomicLongArray cursors = new AtomicLongArray(STRIPES * STRIDE);
    /** The place before the oldest commit applying (after the last published one, when none is). */
    private volatile Point published = new Point();
    /** Where the next commit links: the place after the last one begun. Guarded by this. */
    private Point last = published;
    /** Commits published so far; written under this after the commit's {@link Commit#publishedAs}. */
    private volatile long ends;
    /** The multi-key commits applying now, in the order they began, or null if none: replaced whole under this. */
    private volatile Commit[] applying;

    /** Starts the apply of a multi-key commit of {@code ws} (its keys held): visible to readers before its first change. */
    synchronized Commit begin(List<WriteTransaction.Writes> ws) {
        Commit c = new Commit(ws);
        Commit[] now = applying;
        Commit[] more = now == null ? new Commit[1] : Arrays.copyOf(now, now.length + 1);
        more[more.length - 1] = c;
        applying = more;
        last.next = c; // cursors opened from now on, or at a place before, hide it
        last = c.after;
        return c;
    }

    /** Publishes {@code c}, every change applied (or undone): reads from now on see it whole. */
    synchronized void end(Commit c) {
        long n = ends + 1;
        c.publishedAs = n;
        ends = n; // after publishedAs: a cursor that counts c as published finds it so
        Commit[] now = applying;
        Commit[] fewer = null;
        if (now.length > 1) {
            fewer = new Commit[now.length - 1];
            for (int i = 0, j = 0; i < now.length; i++) {
                if (now[i] != c) {
                    fewer[j++] = now[i];
                }
            }
        }
        applying = fewer;
        Point p = published;
        while (p.next != null && p.next.publishedAs != 0) {
            p = p.next.after;
        }
        published = p;
    }

    /** The commits applying now, oldest first, or null: the one volatile read a latest-state read pays when none is. */
    Commit[] applying() {
        return applying;
    }

    /**
     * {@code key}'s record in table {@code ino} in the oldest commit applying now that changed it (its
     * published value), or null if none did.
     */
    TableVersions.Undo prior(long ino, byte[] key) {
        Commit[] now = applying;
        if (now == null) {
            return null;
        }
        for (Commit c : now) {
            TableVersions.Undo u = c.prior(ino, key);
            if (u != null) {
                return u;
            }
        }
        return null;
    }

    /**
     * Counts a latest-state cursor opening on this thread, before it reads {@link #published}, or a
     * latest-state read before it looks at the applying commits' records: a commit that {@link #end}s and
     * then finds none counted knows none can read its records (a read counted later no longer finds it
     * applying). Returns the stripe for {@link #leave}.
     */
    int enter() {
        int stripe = (int) (Thread.currentThread().threadId() & (STRIPES - 1)) * STRIDE;
        cursors.getAndIncrement(stripe);
        return stripe;
    }

    /** A cursor {@link #enter} counted in {@code stripe} closed. */
    void leave(int stripe) {
        cursors.getAndDecrement(stripe);
    }

    /**
     * True if a latest-state cursor may be open, or a read may be looking at records ({@link #enter}):
     * read after a commit's {@link #end}, false means no cursor open then had opened before it and no read
     * holds a record of it, so none will read its records.
     */
    boolean cursorsOpen() {
        for (int s = 0; s < STRIPES * STRIDE; s += STRIDE) {
            if (cursors.get(s) != 0) {
                return true;
            }
        }
        return false;
    }

    /** Where a cursor opening now stands; read it before {@link #ends}. */
    Point published() {
        return published;
    }

    /** Commits published so far: a cursor that read {@link #published} and then this sees those, and none after. */
    long ends() {
        return ends;
    }
}
