package dev.ferrite.dir;

import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;

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
 * cursor can reach them: no registration, no lock, and a cursor never closed pins nothing once it is
 * garbage itself.
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
        private final ConcurrentHashMap<Long, ConcurrentSkipListMap<byte[], TableVersions.Undo>> tables = new ConcurrentHashMap<>();
        /** The records of the table recorded to last, and its inode: the committing thread's alone (a run of changes to one table boxes no inode). */
        private ConcurrentSkipListMap<byte[], TableVersions.Undo> lastTable;
        private long lastIno;

        /** Records {@code key}'s stored value before this commit (null: absent), unless a change of this commit recorded it already. */
        void record(long ino, byte[] key, byte[] before) {
            ConcurrentSkipListMap<byte[], TableVersions.Undo> m = lastTable;
            if (m == null || lastIno != ino) {
                lastTable = m = table(ino, true);
                lastIno = ino;
            }
            m.putIfAbsent(key, new TableVersions.Undo(0, before, null));
        }

        /** {@code key}'s record (its value before this commit), or null if the commit has not changed it (yet). */
        TableVersions.Undo prior(long ino, byte[] key) {
            ConcurrentSkipListMap<byte[], TableVersions.Undo> m = tables.get(ino);
            return m == null ? null : m.get(key);
        }

        /** Table {@code ino}'s records, ascending (null if none and not {@code make}). */
        ConcurrentSkipListMap<byte[], TableVersions.Undo> table(long ino, boolean make) {
            return make ? tables.computeIfAbsent(ino, i -> new ConcurrentSkipListMap<>(Arrays::compareUnsigned)) : tables.get(ino);
        }

        /** True if this commit was not published once {@code ends} commits were: a view taken then hides it. */
        boolean hiddenFrom(long ends) {
            long p = publishedAs;
            return p == 0 || p > ends;
        }
    }

    /** The place before the oldest commit applying (after the last published one, when none is). */
    private volatile Point published = new Point();
    /** Where the next commit links: the place after the last one begun. Guarded by this. */
    private Point last = published;
    /** Commits published so far; written under this after the commit's {@link Commit#publishedAs}. */
    private volatile long ends;
    /** The multi-key commits applying now, in the order they began, or null if none: replaced whole under this. */
    private volatile Commit[] applying;

    /** Starts a multi-key commit's apply (its keys held): visible to readers before its first change. */
    synchronized Commit begin() {
        Commit c = new Commit();
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

    /** Where a cursor opening now stands; read it before {@link #ends}. */
    Point published() {
        return published;
    }

    /** Commits published so far: a cursor that read {@link #published} and then this sees those, and none after. */
    long ends() {
        return ends;
    }
}
