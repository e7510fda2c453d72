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
 * <p>Multi-key commits apply one at a time ({@code Tables#commit} holds the volume's group lock, and each
 * of its tables exclusively, keeping single writes off them), so at most one is applying; its tables'
 * keys change only through it meanwhile. Single writes, one key each, are whole as they are and record
 * nothing. A cursor outside a snapshot holds the {@link Point} that was published when it opened: every
 * commit linked after it (applying then, or begun since) is hidden from it by its records. Nothing else
 * holds a published commit's records, so they go with the garbage once no such cursor can reach them:
 * no registration, no lock, and a cursor never closed pins nothing once it is garbage itself.
 */
final class TablePublication {
    /** A place in the order of multi-key commits: {@link #next} is the first commit after it, once one began. */
    static class Point {
        volatile Commit next;
    }

    /** A multi-key commit's prior values, per table and key, each the value before the commit's first change of the key. */
    static final class Commit {
        /** The place after this commit: where the next one links. */
        final Point after = new Point();
        private final ConcurrentHashMap<Long, ConcurrentSkipListMap<byte[], TableVersions.Undo>> tables = new ConcurrentHashMap<>();

        /** Records {@code key}'s stored value before this commit (null: absent), unless a change of this commit recorded it already. */
        void record(long ino, byte[] key, byte[] before) {
            table(ino, true).putIfAbsent(key, new TableVersions.Undo(0, before, null));
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
    }

    /** The place after the last published commit. */
    private volatile Point published = new Point();
    /** The multi-key commit applying now, or null. */
    private volatile Commit applying;

    /** Starts a multi-key commit's apply (the caller holds the volume's group lock): visible to readers before its first change. */
    Commit begin() {
        Commit c = new Commit();
        applying = c;
        published.next = c; // cursors opened from now on, or at the place before, hide it
        return c;
    }

    /** Publishes {@code c}, every change applied (or undone): reads from now on see it whole. */
    void end(Commit c) {
        published = c.after;
        applying = null;
    }

    /** The commit applying now, or null: the one volatile read a latest-state read pays when none is. */
    Commit applying() {
        return applying;
    }

    /** Where a cursor opening now stands: it sees the commits published before, and none after. */
    Point published() {
        return published;
    }
}
