package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.NavigableMap;

import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Keys;

/**
 * Walks a table's keys in order (or in reverse) between bounds. Lock-free: it copies one leaf at a time,
 * so it never blocks a writer, and after a concurrent change it finds its place again by key; it returns
 * each key at most once, in order. On a table ({@link Table#cursor}) a single write made while the
 * cursor runs is seen or not depending on whether it reached the key's leaf before the cursor did, and
 * a multi-key commit is seen whole if it was published when the cursor opened, else not at all
 * ({@link TablePublication}: the commits begun since are hidden by their records, merged as a
 * snapshot's are); at a {@link Snapshot} every key is as it was at the snapshot. Not thread-safe: one
 * thread uses a cursor.
 *
 * <p>{@link #close()} hands the cursor's leaf copy and key buffers (5 KiB) to the next cursor the
 * closing thread opens, so a scan that closes its cursor allocates only the few small objects a cursor
 * is; one never closed is only garbage.
 */
public final class TableCursor implements AutoCloseable {
    /** What a cursor merges with the tree: records of what keys held in its view where the tree has moved on since. */
    interface Records {
        /** The record saying what {@code key} held in the view, or null: the tree's entry is the view's. */
        TableVersions.Undo at(byte[] key);

        /** The first recorded key in the cursor's range and direction, or null. */
        byte[] first();

        /** The first recorded key at or past {@code key} in the cursor's direction, or null. */
        byte[] ceiling(byte[] key);

        /** The first recorded key past {@code key} in the cursor's direction, or null. */
        byte[] higher(byte[] key);

        /** Compares keys in the cursor's direction. */
        int order(byte[] a, byte[] b);
    }

    /** A cursor's key range as the records' maps see it, ascending, with its direction. */
    record Range(byte[] lo, boolean loIn, byte[] hi, boolean hiIn, boolean reverse) {
        /** The range of {@link #cursor(Table, byte[], byte[], boolean) a cursor} over {@code [from, to)}, or reversed over {@code (to, from]}. */
        static Range of(byte[] from, byte[] to, boolean reverse) {
            return reverse ? new Range(to, false, from, true, true) : new Range(from, true, to, false, false);
        }

        /** {@code m}'s entries in the range, in the cursor's direction. */
        NavigableMap<byte[], TableVersions.Undo> view(NavigableMap<byte[], TableVersions.Undo> m) {
            NavigableMap<byte[], TableVersions.Undo> r;
            if (lo != null && hi != null) {
                r = compare(lo, hi) > 0 || (compare(lo, hi) == 0 && !(loIn && hiIn)) ? m.subMap(lo, true, lo, false) : m.subMap(lo, loIn, hi, hiIn);
            } else {
                r = lo != null ? m.tailMap(lo, loIn) : hi != null ? m.headMap(hi, hiIn) : m;
            }
            return reverse ? r.descendingMap() : r;
        }
    }

    /** What a cursor at a snapshot merges with the tree: the records of its range newer than the snapshot, in the cursor's direction. */
    record AtSnapshot(TableVersions versions, long ino, long version, NavigableMap<byte[], TableVersions.Undo> chains) implements Records {
        @Override
        public TableVersions.Undo at(byte[] key) {
            return versions.at(ino, key, version);
        }

        @Override
        public byte[] first() {
            var e = chains.firstEntry(); // an entry, not isEmpty then firstKey: records go meanwhile
            return e == null ? null : e.getKey();
        }

        @Override
        public byte[] ceiling(byte[] key) {
            return chains.ceilingKey(key);
        }

        @Override
        public byte[] higher(byte[] key) {
            return chains.higherKey(key);
        }

        @Override
        public int order(byte[] a, byte[] b) {
            return chains.comparator().compare(a, b);
        }
    }

    /**
     * What a cursor outside a snapshot merges with the tree once a multi-key commit began after it opened:
     * the records of the commits linked after {@code since}, the place published at its opening, that
     * were not published by then (when {@code ends} were). A key's record is its first such commit's (the
     * value it had before them all).
     */
    record Unpublished(TablePublication.Point since, long ends, long ino, Range range) implements Records {
        /**
         * The key's record in the first hidden commit that changed it. One walk along the commits is not
         * enough: commits that change one key apply in turn, but a walk that passed a commit before it
         * recorded the key can meet, further on, the record of a commit that began on the key after that
         * one ended (holding the value the first one wrote, which the view must not show). So once a record
         * is found, the commits before it are looked at again: the later commit's record, seen now, was made
         * after every earlier commit's record of the key, so those are seen too.
         */
        @Override
        public TableVersions.Undo at(byte[] key) {
            for (TablePublication.Commit c = since.next; c != null; c = c.after.next) {
                TableVersions.Undo u = hidden(c, key);
                if (u != null) {
                    for (TablePublication.Commit e = since.next; e != c; e = e.after.next) {
                        TableVersions.Undo first = hidden(e, key);
                        if (first != null) {
                            return first;
                        }
                    }
                    return u;
                }
            }
            return null;
        }

        /** {@code key}'s record in commit {@code c} if the view hides {@code c}, else null. */
        private TableVersions.Undo hidden(TablePublication.Commit c, byte[] key) {
            var r = c.hiddenFrom(ends) ? c.table(ino) : null;
            return r == null ? null : r.get(key);
        }

        @Override
        public byte[] first() {
            return nearest(null, false);
        }

        @Override
        public byte[] ceiling(byte[] key) {
            return nearest(key, true);
        }

        @Override
        public byte[] higher(byte[] key) {
            return nearest(key, false);
        }

        /** The first key of any commit's records at or past (or past) {@code key} (null: the range's start). */
        private byte[] nearest(byte[] key, boolean inclusive) {
            byte[] best = null;
            for (TablePublication.Commit c = since.next; c != null; c = c.after.next) {
                var r = c.hiddenFrom(ends) ? c.table(ino) : null;
                byte[] k = r == null ? null : r.nearest(range, key, inclusive);
                if (k != null && (best == null || order(k, best) < 0)) {
                    best = k;
                }
            }
            return best;
        }

        @Override
        public int order(byte[] a, byte[] b) {
            return range.reverse() ? compare(b, a) : compare(a, b);
        }
    }

    /** Longest value read into {@link #readBuffer}; a longer one is read into an array of its own. */
    private static final int MAX_READ_BUFFER = 1 << 30;

    private final Table table;
    /** The tree's cursor; null once closed. */
    private Cursor cursor;
    /** The bounds it was opened with: {@link #seek} stays within them. */
    private final byte[] from, to;
    private final boolean reverse;
    /** Merging records, after a {@link #seek}: where the records start, until the first key is returned. */
    private byte[] start;
    /** Reverse prefix scans: the scan ends below {@code low}; else null. */
    private final byte[] low;
    /** Reverse prefix scans: a key equal to {@code skipKey} is skipped; both as segments, compared in every step. */
    private final MemorySegment skipKey, lowKey;
    /** On a table: its tables' publication, which counts it as open, and the stripe it is counted in ({@link TablePublication#enter}); null and -1 at a snapshot. */
    private final TablePublication publication;
    private final int stripe;
    /** On a table: the place published when it opened ({@link TablePublication}); null at a snapshot. */
    private final TablePublication.Point since;
    /** On a table: the commits published when it opened, counted after {@link #since} was read. */
    private final long ends;
    /** At a snapshot, its records; on a table, once a commit began since it opened, those commits' records (else null). */
    private Records at;
    /** Merging {@link #at} with the tree: at a snapshot always, on a table once a commit began since it opened. */
    private boolean merging;
    /** Merging: the tree cursor stands on a key not returned yet; it ran out; the last key returned. */
    private boolean held, treeDone;
    private byte[] last;
    /**
     * Not merging: the tree cursor's {@link Cursor#copies()} when the records were last looked at. An
     * entry of a leaf copy taken before that look is in the view whatever commit began since (the commit
     * links itself before it changes a leaf), so the records are looked at once per copy, not per entry.
     */
    private long recordsChecked;
    /** Merging: the current entry when it came from a record rather than from the tree. */
    private byte[] key, value;
    /**
     * Where {@link #valueSegment} reads values kept out of line, grown to the longest so far: a scan of
     * medium values or blobs allocates one buffer, not one per value (a 1 MiB array per blob was most of
     * a blob scan's time); null until the first.
     */
    private MemorySegment readBuffer;

    /** A cursor on the table's latest state, seeing the multi-key commits published now and none after. */
    TableCursor(Table table, byte[] from, byte[] to, boolean reverse, byte[] skip, byte[] low) {
        this(table, from, to, reverse, skip, low, table.tables().publication, null);
    }

    /** A cursor at a snapshot, merging the tree with its records {@code at}. */
    TableCursor(Table table, byte[] from, byte[] to, boolean reverse, byte[] skip, byte[] low, AtSnapshot at) {
        this(table, from, to, reverse, skip, low, null, at);
    }

    private TableCursor(Table table, byte[] from, byte[] to, boolean reverse, byte[] skip, byte[] low, TablePublication publication, AtSnapshot at) {
        this.publication = publication;
        this.stripe = publication == null ? -1 : publication.enter(); // counted before it reads the place
        // before the tree's first copy: a commit not published by now links after the place and is not counted
        this.since = publication == null ? null : publication.published();
        this.ends = publication == null ? 0 : publication.ends();
        this.table = table;
        this.from = from;
        this.to = to;
        this.reverse = reverse;
        try {
            this.cursor = table.tree().cursor(from, to, reverse);
        } catch (RuntimeException | Error e) {
            leave();
            throw e;
        }
        this.recordsChecked = cursor.copies();
        this.low = low;
        this.skipKey = skip == null ? null : MemorySegment.ofArray(skip);
        this.lowKey = low == null ? null : MemorySegment.ofArray(low);
        this.at = at;
        this.merging = at != null;
    }

    /**
     * The records a read of the current entry's value falls back on: a snapshot's, or on a table those of
     * the commits begun since it opened (made when the first is seen), or null while there are none.
     */
    private Records records() {
        if (at == null && since.next != null) { // a reverse prefix scan's range is [low, from), else the bounds it was opened with
            at = new Unpublished(since, ends, table.inode.ino, low != null ? new Range(low, true, from, false, true) : Range.of(from, to, reverse));
        }
        return at;
    }

    /**
     * Repositions the cursor before the first key at or after {@code key} (in reverse: at or before it),
     * within the bounds it was opened with; {@link #next()} then moves onto that key.
     */
    public void seek(byte[] key) {
        Table.requireKey(key);
        table.requireOpen();
        byte[] s = key;
        if (from != null && (reverse ? compare(key, from) > 0 : compare(key, from) < 0)) {
            s = from;
        }
        cursor = table.tree().cursor(open(), s, to, reverse);
        recordsChecked = cursor.copies();
        held = false;
        treeDone = false;
        last = null;
        start = s;
        this.key = null;
        value = null;
    }

    /**
     * Moves to the next entry; false past the last one.
     *
     * @throws TableException TABLE_CLOSED if the table's handle was closed, CURSOR_CLOSED if this cursor was
     */
    public boolean next() {
        table.requireOpen();
        open();
        if (merging) {
            return mergedNext();
        }
        boolean found = treeNext();
        long copies = cursor.copies();
        if (copies == recordsChecked) {
            return found; // from a leaf copy the records were looked at after
        }
        recordsChecked = copies;
        if (records() == null) { // after the copy: a commit that changed the leaf copied linked itself first
            return found;
        }
        // a multi-key commit began since the cursor opened: hide it (and any later one) from here on, from
        // the key returned last, which the tree cursor saved before it took this copy
        merging = true;
        last = cursor.keyBeforeCopy();
        held = found;
        treeDone = !found;
        return mergedNext();
    }

    /**
     * Done with the cursor: its buffers go to the next cursor this thread opens. Every later call but
     * {@code close} throws {@link TableException} (CURSOR_CLOSED); segments it handed out are no longer
     * valid.
     */
    @Override
    public void close() {
        if (cursor != null) {
            cursor.close();
            cursor = null;
            leave();
        }
    }

    /** No longer counted as open: commits published from now on need not keep their records readable for it. */
    private void leave() {
        if (publication != null) {
            publication.leave(stripe);
        }
    }

    /** The tree's cursor, refusing a closed one. */
    private Cursor open() {
        if (cursor == null) {
            throw new TableException(TableException.Kind.CURSOR_CLOSED, "a cursor on table '" + table.name() + "' is closed");
        }
        return cursor;
    }

    private boolean treeNext() {
        while (cursor.next()) {
            if (low == null) {
                return true;
            }
            if (skipKey != null && compareKey(skipKey) == 0) {
                continue;
            }
            return compareKey(lowKey) >= 0;
        }
        return false;
    }

    /**
     * The next key of the tree or of the records, whichever comes first in the cursor's direction, as it
     * was in the cursor's view. The records are looked at after the tree: a change the tree copy lacks was
     * recorded before the copy was taken.
     */
    private boolean mergedNext() {
        for (;;) {
            if (!held && !treeDone) {
                treeDone = !treeNext();
                held = !treeDone;
            }
            byte[] t = held ? cursor.key() : null;
            byte[] u = nextRecorded(t);
            if (t == null && u == null) {
                return false;
            }
            boolean fromTree = t != null && (u == null || order(t, u) <= 0);
            byte[] k = fromTree ? t : u;
            if (fromTree) {
                held = false;
            }
            last = k;
            start = null;
            TableVersions.Undo e = at.at(k);
            if (e == null) {
                if (!fromTree) {
                    continue; // its records are all older than the view: the tree had it, or not, then
                }
                key = null;
                value = null;
                return true;
            }
            if (e.before == null) {
                continue; // absent in the view
            }
            key = k;
            value = e.before;
            return true;
        }
    }

    /** The first recorded key after {@link #last} in the cursor's direction with a record newer than the view, not past {@code t}. */
    private byte[] nextRecorded(byte[] t) {
        byte[] k = last != null ? at.higher(last) : start != null ? at.ceiling(start) : at.first();
        while (k != null && (t == null || at.order(k, t) <= 0)) {
            if (at.at(k) != null) {
                return k;
            }
            k = at.higher(k);
        }
        return null;
    }

    private int order(byte[] a, byte[] b) {
        return at.order(a, b);
    }

    private static int compare(byte[] a, byte[] b) {
        return Arrays.compareUnsigned(a, b);
    }

    /** The tree cursor's current key against {@code b}, read in place in its leaf copy (no copy per step). */
    private int compareKey(MemorySegment b) {
        int from = cursor.keyOffset();
        return Keys.compare(cursor.page(), from, from + cursor.keyLength(), b, 0, b.byteSize());
    }

    /** The current key (a copy). */
    public byte[] key() {
        Cursor c = open();
        return key != null ? key.clone() : c.key();
    }

    /**
     * The current value (a copy; a value kept out of line is read whole). On a table (not at a snapshot)
     * a medium value replaced or deleted since the cursor read its leaf is read as its key holds it now
     * (a commit hidden from the cursor by its records: as it was before): null if the key is gone.
     */
    public byte[] value() {
        return table.tables().decode(table, keySegment(), records(), stored().toArray(ValueLayout.JAVA_BYTE));
    }

    /** The current key, valid until the next move or close (a view of a table's cursor, nothing copied). */
    public MemorySegment keySegment() {
        Cursor c = open();
        return key != null ? MemorySegment.ofArray(key) : c.keySegment();
    }

    /**
     * The current value, valid until the next move or close: a view of a table's cursor, nothing copied, for a
     * value kept in the tree; for a value kept out of line (medium or blob), the cursor's buffer holding it
     * read whole (reused by the next such value, so a scan allocates none; null as {@link #value()}'s).
     */
    public MemorySegment valueSegment() {
        Cursor c = open();
        if (value == null) { // a value kept in the tree: one view of the leaf copy, made without an interim one
            MemorySegment page = c.page();
            int at = c.valueOffset(), n = c.valueLength();
            if (n > 0 && page.get(ValueLayout.JAVA_BYTE, at) == TableValueFormat.INLINE) {
                return page.asSlice(at + 1, n - 1);
            }
        }
        return storedValue();
    }

    /** {@link #valueSegment()} of a value from a record or kept out of line: apart, so that the common case inlines whole and its view is not made at all. */
    private MemorySegment storedValue() {
        MemorySegment m = stored();
        byte kind = TableValueFormat.kind(m, m.byteSize(), table.inode.ino);
        if (kind == TableValueFormat.INLINE) {
            return m.asSlice(1);
        }
        long length = kind == TableValueFormat.BLOB ? TableValueFormat.readBlob(m).length() : TableValueFormat.mediumLength(m);
        if (length <= MAX_READ_BUFFER) {
            MemorySegment buf = readBuffer((int) length);
            long n = value(buf);
            if (n < 0) {
                return null;
            }
            if (n <= buf.byteSize()) {
                return buf.asSlice(0, n);
            }
            // the key was given a longer value while it was read: read that whole
        }
        byte[] v = value();
        return v == null ? null : MemorySegment.ofArray(v);
    }

    /** Receives a value's bytes in pieces, in order ({@link #value(Pieces)}). */
    @FunctionalInterface
    public interface Pieces {
        /**
         * The next {@code length} bytes of the value: {@code bytes[offset, offset + length)}, valid only
         * during the call (not to be kept, nor written).
         */
        void accept(MemorySegment bytes, long offset, long length);
    }

    /**
     * Hands the current value to {@code pieces}, without copying it where it can: a value kept in the
     * tree as one piece of the cursor's copy of its leaf; a medium value whose blocks are cached (a piece
     * per block), or a blob whose file's pages are (a piece per run of consecutive frames, its CRC checked
     * in them), straight from the data page cache's frames, read-only, while a lock holds them (a free of
     * those blocks or of that file waits for it: {@code pieces} must be quick and must not use the volume);
     * otherwise as one piece of {@link #valueSegment()}. Returns the value's length, or -1 as {@link
     * #value(MemorySegment)} does (having handed nothing).
     */
    public long value(Pieces pieces) {
        Cursor c = open();
        if (value == null) { // the tree's entry: an inline value is handed straight from the leaf copy, no view made
            MemorySegment page = c.page();
            int at = c.valueOffset(), length = c.valueLength();
            if (length >= 1 && page.get(ValueLayout.JAVA_BYTE, at) == TableValueFormat.INLINE) {
                pieces.accept(page, at + 1, length - 1);
                return length - 1;
            }
        }
        MemorySegment m = stored();
        byte kind = TableValueFormat.kind(m, m.byteSize(), table.inode.ino);
        if (kind == TableValueFormat.INLINE) {
            pieces.accept(m, 1, m.byteSize() - 1);
            return m.byteSize() - 1;
        }
        if (kind == TableValueFormat.EXTENT) {
            TableValueFormat.Extent x = TableValueFormat.readExtent(m);
            TableExtents extents = table.tables().extents;
            // frames tagged as the stub's hold its bytes, as a read from them would copy; a miss fills them first
            if (extents.cached.lend(x, pieces) || extents.cache(x) && extents.cached.lend(x, pieces)) {
                return x.length();
            }
        }
        if (kind == TableValueFormat.BLOB) {
            TableValueFormat.Blob b = TableValueFormat.readBlob(m);
            if (table.tables().blobs.lend(b, pieces)) {
                return b.length();
            }
        }
        MemorySegment v = valueSegment();
        if (v == null) {
            return -1;
        }
        pieces.accept(v, 0, v.byteSize());
        return v.byteSize();
    }

    /** The buffer {@link #valueSegment} reads values kept out of line into, at least {@code length} bytes. */
    private MemorySegment readBuffer(int length) {
        if (readBuffer == null || readBuffer.byteSize() < length) {
            int blockSize = table.tables().blockSize();
            readBuffer = MemorySegment.ofArray(new byte[(int) Math.min(MAX_READ_BUFFER, ((long) length + blockSize - 1) / blockSize * blockSize)]);
        }
        return readBuffer;
    }

    /** Copies the current value into {@code out} (as much as fits) and returns its whole length (-1: as {@link #value()}'s null). */
    public long value(MemorySegment out) {
        return value(0, out);
    }

    /**
     * Copies bytes of the current value from {@code offset} into {@code out}, as many as fit (or as
     * remain), and returns its whole length (-1: as {@link #value()}'s null): a streaming read of a long
     * value a piece at a time, in the cursor's view (a snapshot's, for a snapshot's cursor).
     */
    public long value(long offset, MemorySegment out) {
        Table.requireOffset(offset);
        MemorySegment m = stored();
        return table.tables().copy(table, keySegment(), records(), m, m.byteSize(), offset, out);
    }

    /** The current entry's stored form ({@link TableValueFormat}). */
    private MemorySegment stored() {
        Cursor c = open();
        return value != null ? MemorySegment.ofArray(value) : c.valueSegment();
    }
}
