package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.btree.CacheStats;
import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Medium values ({@link Table#MAX_INLINE} + 1 to {@link Table#MAX_MEDIUM} bytes), kept as chunks in the
 * volume's overflow tree, as on a volume without table extents (each volume formatted without wide B-tree cells,
 * as code from before extents formats it, and opened with extents switched off;
 * {@link TableExtentTest} has the extents): exact across the thresholds and remounts, whole, in part and streamed;
 * overwritten in every direction between inline, medium and blob with their chunks deleted at once
 * (snapshots keep the old bytes in memory); undone with a transaction that fails part way; read right by
 * readers racing an overwriting writer; freed with a dropped table, also across crashes; and checked
 * (a leaked or a missing chunk is a problem naming it). Read with one cursor over a value's chunks,
 * written and deleted in a few transactions, deleted by ranges in transactions split by their bytes, and
 * deleted all or nothing with a transaction's other changes across crashes.
 */
@ExtendWith(TestSeed.class)
class TableMediumTest {
    private static final long SEED = TestSeed.get(17);

    /** Opens {@code dev} keeping medium values in the overflow tree, as code from before table extents did. */
    static Volume open(dev.ferrite.io.BlockDevice dev) {
        Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
        v.tables().extents.enabled = false;
        return v;
    }

    private static byte[] random(Random rnd, int n) {
        byte[] v = new byte[n];
        rnd.nextBytes(v);
        return v;
    }

    /** The chunks in the volume's overflow tree. */
    static long chunks(Volume v) {
        BTree t = v.tables().overflow.tree(false);
        if (t == null) {
            return 0;
        }
        long n = 0;
        for (Cursor c = t.cursor(null, false); c.next(); ) {
            n++;
        }
        return n;
    }

    private static long blobs(Volume v) {
        long dir = v.tables().blobs.directory();
        return dir == 0 ? 0 : v.namespace().dirs.allEntries(dir).size();
    }

    private static byte kind(Table t, byte[] key) {
        byte[] s = t.storedValue(key);
        return s[0];
    }

    private static TableValueFormat.Medium medium(Table t, byte[] key) {
        return TableValueFormat.readMedium(MemorySegment.ofArray(t.storedValue(key)));
    }

    private static long chunksOf(int length) {
        return TableValueFormat.isMedium(length) ? (length + TableValueFormat.CHUNK - 1) / TableValueFormat.CHUNK : 0;
    }

    @Test
    void sizesAcrossTheThresholdsRoundTripWholeInPartAndStreamed() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formattedNarrow();
        int[] sizes = {959, 960, 961, 1919, 1920, 1921, 4096, 65_535, 65_536, 65_537};
        byte[] expectKind = {0, 2, 2, 2, 2, 2, 2, 2, 2, 1};
        byte[][] values = new byte[sizes.length][];
        long expectChunks = 0;
        try (Volume v = open(dev); Table t = v.tables().create("t")) {
            for (int i = 0; i < sizes.length; i++) {
                values[i] = random(rnd, sizes[i]);
                t.put(b("k" + i), values[i]);
                expectChunks += chunksOf(sizes[i]);
            }
            assertEquals(expectChunks, chunks(v));
            assertEquals(1, blobs(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = open(dev); Table t = v.tables().open("t")) {
            for (int i = 0; i < sizes.length; i++) {
                byte[] k = b("k" + i);
                String what = "size " + sizes[i];
                assertEquals(expectKind[i], kind(t, k), what);
                assertArrayEquals(values[i], t.get(k), what);
                assertEquals(sizes[i], t.valueLength(k), what);
                MemorySegment part = MemorySegment.ofArray(new byte[100]);
                assertEquals(sizes[i], t.get(MemorySegment.ofArray(k), part), what);
                assertArrayEquals(Arrays.copyOf(values[i], 100), part.toArray(ValueLayout.JAVA_BYTE), what);
                for (int piece : new int[] {1, 77, 960, 1000, 4097}) { // streamed: pieces across chunk boundaries
                    byte[] back = new byte[sizes[i]];
                    for (int at = 0; at < sizes[i]; at += piece) {
                        int n = Math.min(piece, sizes[i] - at);
                        assertEquals(sizes[i], t.read(MemorySegment.ofArray(k), at, MemorySegment.ofArray(back).asSlice(at, n)), what);
                    }
                    assertArrayEquals(values[i], back, what + " in pieces of " + piece);
                }
                byte[] tail = new byte[50]; // past the end: what remains
                assertEquals(sizes[i], t.read(MemorySegment.ofArray(k), sizes[i] - 10, MemorySegment.ofArray(tail)));
                assertArrayEquals(Arrays.copyOfRange(values[i], sizes[i] - 10, sizes[i]), Arrays.copyOf(tail, 10), what);
            }
            TableCursor c = t.cursor();
            int seen = 0;
            while (c.next()) {
                int i = Integer.parseInt(new String(c.key(), java.nio.charset.StandardCharsets.UTF_8).substring(1));
                assertArrayEquals(values[i], c.value());
                assertArrayEquals(values[i], c.valueSegment().toArray(ValueLayout.JAVA_BYTE));
                byte[] out = new byte[sizes[i]];
                assertEquals(sizes[i], c.value(MemorySegment.ofArray(out)));
                assertArrayEquals(values[i], out);
                seen++;
            }
            assertEquals(sizes.length, seen);
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void overwritesInEveryDirectionFreeTheOldValueAtOnce() {
        Random rnd = new Random(SEED);
        int[] classes = {100, 3000, 70_000}; // inline, medium, blob
        try (Volume v = open(VolumeFixtures.formattedNarrow()); Table t = v.tables().create("t")) {
            int n = 0;
            for (int from : classes) {
                for (int to : classes) {
                    byte[] k = b("k" + n++), first = random(rnd, from + n), second = random(rnd, to + n);
                    t.put(k, first);
                    assertFalse(t.putIfAbsent(k, random(rnd, to)));
                    assertArrayEquals(first, t.get(k));
                    t.put(k, second);
                    assertArrayEquals(second, t.get(k), from + " to " + to);
                    assertEquals(chunksOf(second.length), chunks(v), from + " to " + to + ": the old value's chunks are gone");
                    v.sync(); // doomed blobs go in the background, all before a sync returns
                    assertEquals(second.length > Table.MAX_MEDIUM ? 1 : 0, blobs(v), from + " to " + to);
                    VolumeFixtures.assertChecked(v.namespace());
                    assertTrue(t.delete(k));
                    assertEquals(0, chunks(v), from + " to " + to + ", deleted: its chunks are gone");
                }
            }
            for (int i = 0; i < 10; i++) {
                t.put(b("r" + i), random(rnd, 1000 + 700 * i));
            }
            assertTrue(t.putIfAbsent(b("r99"), random(rnd, 5000)));
            assertEquals(4, t.deleteRange(b("r2"), b("r6")));
            assertEquals(TableValueFormat.MEDIUM, kind(t, b("r1")));
            t.delete(MemorySegment.ofArray(b("r1")));
            long left = 0;
            for (int i : new int[] {0, 6, 7, 8, 9}) {
                left += chunksOf(1000 + 700 * i);
            }
            assertEquals(left + chunksOf(5000), chunks(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void transactionsMixSizesAndOneFailingPartWayLeavesEverythingAsItWas() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow());
             Table a = v.tables().create("a"); Table bt = v.tables().create("b")) {
            byte[] small = random(rnd, 50), mid = random(rnd, 20_000), big = random(rnd, 70_000), edge = random(rnd, Table.MAX_MEDIUM);
            try (WriteTransaction tx = v.begin(Durability.SYNC)) {
                tx.put(a, b("small"), small);
                tx.put(a, b("mid"), mid);
                tx.put(bt, b("big"), big);
                tx.put(bt, b("edge"), edge);
                tx.put(bt, b("mid"), mid);
                assertArrayEquals(mid, tx.get(bt, b("mid")));
                tx.commit();
            }
            assertArrayEquals(mid, a.get(b("mid")));
            assertArrayEquals(edge, bt.get(b("edge")));
            assertArrayEquals(big, bt.get(b("big")));
            long before = chunks(v);
            assertEquals(2 * chunksOf(mid.length) + chunksOf(edge.length), before);

            failPartWay(v, a, bt, rnd);
            assertArrayEquals(mid, a.get(b("mid")));
            assertArrayEquals(edge, bt.get(b("edge")));
            assertNull(a.get(b("new-mid")));
            assertEquals(before, chunks(v), "the chunks written are gone and those deleted are back");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A commit over {@code a} and {@code bt} that replaces a's medium value "mid", bt's "edge" by an inline
     * one and adds "new-mid", then fails part way (past its log share, or finding the log full) and so
     * undoes all that.
     */
    static void failPartWay(Volume v, Table a, Table bt, Random rnd) {
        a.withDurability(Durability.NONE);
        for (int i = 0; i < 40_000; i++) { // a wide tree: the inserts below land in most of its leaves
            a.put(random(rnd, 16), new byte[100]);
        }
        v.sync(); // the log holds the failing group and its undo, with their chunks, and nothing else
        WriteTransaction tx = v.begin(Durability.NONE);
        tx.put(a, b("mid"), random(rnd, 30_000)); // replaces a medium value (its chunks or blocks freed),
        tx.put(bt, b("edge"), new byte[10]);    // and another by an inline one,
        tx.put(a, b("new-mid"), random(rnd, 9000)); // a new one,
        for (int i = 0; i < 8500; i++) {             // then small inserts all over: the log share stops them part way
            tx.put(a, random(rnd, 12), new byte[1]);
        }
        TableException e = assertThrows(TableException.class, tx::commit);
        if (e.kind() != TableException.Kind.LOG_FULL) { // the log's own limit, when the AIL is slow to write home (a loaded machine)
            assertEquals(TableException.Kind.TOO_LARGE, e.kind());
            assertTrue(e.getMessage().contains("before they were all applied"), e.getMessage());
        }
    }

    @Test
    void aSnapshotKeepsOldMediumValuesWhileTheirChunksGoAtOnce() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow()); Table t = v.tables().create("t")) {
            byte[] old = random(rnd, 20_000), next = random(rnd, 30_000), gone = random(rnd, 3000);
            t.put(b("k"), old);
            t.put(b("gone"), gone);
            try (Snapshot s = v.tables().snapshot()) {
                t.put(b("k"), next);
                t.delete(b("gone"));
                try (WriteTransaction tx = v.begin(Durability.NONE)) {
                    tx.put(t, b("later"), random(rnd, 5000));
                    tx.commit();
                }
                assertEquals(chunksOf(next.length) + chunksOf(5000), chunks(v), "the old chunks go at once");
                assertArrayEquals(old, s.get(t, b("k")));
                assertArrayEquals(gone, s.get(t, b("gone")));
                assertNull(s.get(t, b("later")));
                assertArrayEquals(next, t.get(b("k")));
                TableCursor c = s.cursor(t, null, null, false);
                List<byte[]> seen = new ArrayList<>();
                while (c.next()) {
                    seen.add(c.value());
                }
                assertEquals(2, seen.size());
                assertArrayEquals(gone, seen.get(0));
                assertArrayEquals(old, seen.get(1));
                byte[] out = new byte[old.length];
                c = s.prefix(t, b("k"), true);
                assertTrue(c.next());
                assertEquals(old.length, c.value(MemorySegment.ofArray(out)));
                assertArrayEquals(old, out);
                VolumeFixtures.assertChecked(v.namespace());
            }
            assertEquals(0, v.tables().versions.entries());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** A value whose every 8 bytes hold its sequence number, xor their place: any aligned piece says whether it is one value's. */
    private static int patternedLength(long seq) {
        return seq % 5 == 0 ? 96 : 8 * (120 + (int) (seq * 977 % 2000));
    }

    private static byte[] patterned(long seq) {
        int len = patternedLength(seq);
        ByteBuffer bb = ByteBuffer.allocate(len);
        for (int j = 0; j < len / 8; j++) {
            bb.putLong(seq ^ j);
        }
        return bb.array();
    }

    /**
     * Requires the first {@code n} bytes of {@code piece}, read from {@code offset} of key {@code key}'s value
     * of {@code length} bytes, to be bytes of one value, one that key was given ({@code owners}: value number
     * to key) and of that length.
     */
    private static void requirePatterned(byte[] piece, int n, long offset, long length, int key, Map<Long, Integer> owners, String what) {
        if (n == 0) {
            return; // read past the end of a shorter value
        }
        ByteBuffer bb = ByteBuffer.wrap(piece, 0, n);
        long seq = bb.getLong(0) ^ (offset / 8);
        for (int j = 0; j < n / 8; j++) {
            if ((bb.getLong(8 * j) ^ (offset / 8 + j)) != seq) {
                throw new AssertionError(what + ": bytes of two values at " + (offset + 8L * j));
            }
        }
        if (!Integer.valueOf(key).equals(owners.get(seq)) || patternedLength(seq) != length) {
            throw new AssertionError(what + ": bytes of value " + seq + " (" + patternedLength(seq) + " bytes, key " + owners.get(seq)
                    + ") read as key " + key + "'s value of " + length + " bytes");
        }
    }

    /**
     * Also with the values in extents ({@link TableExtents}), the log forced every few writes so that freed
     * blocks are taken again while readers read them, their values cached ({@link TableExtentCache}) as they
     * are written and read; and so with a data page cache of 16 frames, too few for the values, so that
     * reads miss and fill frames while writers free and take their blocks.
     */
    @ParameterizedTest
    @ValueSource(strings = {"chunks", "extents", "extents, small cache"})
    void readersRacingAnOverwritingWriterNeverSeeWrongBytes(String kind) throws Exception {
        Random rnd = new Random(SEED);
        int keys = 6, writes = 400;
        boolean inExtents = !kind.equals("chunks");
        MemoryDevice dev = VolumeFixtures.formattedNarrow();
        VolumeOptions options = kind.endsWith("small cache") ? VolumeFixtures.OPTIONS.withDataCacheBytes(PageCache.MIN_FRAMES * 4096L)
                : VolumeFixtures.OPTIONS;
        try (Volume v = inExtents ? Volume.open(dev, options) : open(dev); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            Map<Long, Integer> owners = new ConcurrentHashMap<>(); // each value's key, set before its put
            for (int k = 0; k < keys; k++) {
                owners.put(1L + k, k);
                t.put(b("k" + k), patterned(1 + k));
            }
            AtomicBoolean done = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            List<Thread> readers = new ArrayList<>();
            List<Semaphore> turns = new ArrayList<>(); // a reader's pass per write at most: the writer keeps its share of 2 cores
            for (int r = 0; r < 2; r++) {
                long seed = SEED + r;
                Semaphore turn = new Semaphore(0);
                turns.add(turn);
                readers.add(Thread.ofPlatform().start(() -> {
                    Random mine = new Random(seed);
                    byte[] piece = new byte[1024];
                    try {
                        while (!done.get()) {
                            if (!turn.tryAcquire(10, TimeUnit.MILLISECONDS)) {
                                continue;
                            }
                            int ki = mine.nextInt(keys);
                            byte[] k = b("k" + ki);
                            byte[] whole = t.get(k);
                            requirePatterned(whole, whole.length, 0, whole.length, ki, owners, "get");
                            long offset = 8L * mine.nextInt(1000);
                            long len = t.read(MemorySegment.ofArray(k), offset, MemorySegment.ofArray(piece));
                            requirePatterned(piece, (int) Math.max(0, Math.min(piece.length, len - offset)), offset, len, ki, owners,
                                    "read at " + offset);
                            MemorySegment out = MemorySegment.ofArray(new byte[70_000]);
                            int n = t.get(MemorySegment.ofArray(k), out);
                            requirePatterned(out.toArray(ValueLayout.JAVA_BYTE), n, 0, n, ki, owners, "get into a segment");
                            TableCursor c = t.cursor();
                            while (c.next()) {
                                byte[] cv = c.value();
                                requirePatterned(cv, cv.length, 0, cv.length, c.key()[1] - '0', owners, "cursor");
                            }
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, e);
                    }
                }));
            }
            try {
                for (long seq = keys + 1; seq <= writes && failed.get() == null; seq++) {
                    if (seq % 7 == 0) {
                        try (WriteTransaction tx = v.begin(Durability.NONE)) { // two at once
                            int k1 = rnd.nextInt(keys), k2 = rnd.nextInt(keys);
                            owners.put(seq, k1);
                            tx.put(t, b("k" + k1), patterned(seq));
                            owners.put(++seq, k2);
                            tx.put(t, b("k" + k2), patterned(seq));
                            tx.commit();
                        }
                    } else {
                        int k = rnd.nextInt(keys);
                        owners.put(seq, k);
                        t.put(b("k" + k), patterned(seq));
                    }
                    if (inExtents && seq % 5 == 0) {
                        v.sync(); // the frees durable: their blocks no longer busy
                    }
                    for (Semaphore turn : turns) {
                        if (turn.availablePermits() < 2) {
                            turn.release();
                        }
                    }
                }
            } finally {
                done.set(true);
                for (Thread r : readers) {
                    r.join();
                }
            }
            if (failed.get() != null) {
                throw new AssertionError("seed " + SEED + ": " + failed.get(), failed.get());
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void droppingATableFreesItsMediumValues() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow())) {
            long free = 0;
            for (int round = 0; round < 3; round++) { // the first round grows the catalog and makes the overflow tree
                try (Table t = v.tables().create("t")) {
                    for (int i = 0; i < 30; i++) {
                        t.put(b("k" + i), random(rnd, 1000 + 2000 * i));
                    }
                    if (round == 0) {
                        t.deleteRange(null, null);
                    }
                    if (round == 2) { // dropped with a handle open: freed at its last close
                        v.tables().drop("t");
                        assertTrue(chunks(v) > 0);
                        assertEquals(1000, t.get(b("k0")).length, "a dropped table's handle still reads it");
                        VolumeFixtures.assertChecked(v.namespace());
                    }
                }
                if (round < 2) {
                    v.tables().drop("t");
                }
                assertEquals(0, chunks(v), "round " + round + ": the dropped table's chunks");
                VolumeFixtures.assertChecked(v.namespace());
                if (round == 0) {
                    free = v.statfs().freeBlocks();
                }
            }
            assertEquals(free, v.statfs().freeBlocks(), "the dropped tables' medium values are free again");
        }
    }

    /** A table of medium values dropped and crashed at every flush: each recovered volume checks clean, with no chunk left once the drop is done. */
    @Test
    void aDropCutShortByACrashFinishesWithoutLeaksOrDoubleFrees() {
        Random rnd = new Random(SEED);
        int firstFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formattedNarrow())) {
            try (Volume v = open(rec)) {
                try (Table keep = v.tables().create("keep")) {
                    keep.put(b("x"), random(rnd, 4000)); // makes the catalog and the overflow tree
                }
                try (Table t = v.tables().create("t")) {
                    t.withDurability(Durability.NONE);
                    for (int i = 0; i < 40; i++) {
                        t.put(b("k" + i), random(rnd, 1000 + 1500 * i));
                    }
                }
                v.sync();
                firstFlush = rec.flushCount();
                v.tables().drop("t");
                v.sync();
            }
            int flushes = rec.flushCount();
            List<Integer> points = new ArrayList<>();
            for (int k = firstFlush - 1; k < flushes; k++) {
                points.add(k);
            }
            Collections.shuffle(points, rnd);
            for (int k : points.subList(0, Math.min(12, points.size()))) {
                List<RecordingDevice.Event> next = k + 1 <= flushes ? rec.epochWrites(k + 1) : List.of();
                List<Integer> picked = new ArrayList<>();
                for (RecordingDevice.Event e : next) {
                    if (rnd.nextInt(3) == 0) {
                        picked.add(e.index());
                    }
                }
                RecordingDevice.CrashState state = rec.crashAfterFlush(k, picked.stream().mapToInt(Integer::intValue).toArray());
                try (MemoryDevice crashed = rec.materialize(state); Volume v = open(crashed)) {
                    String where = "seed " + SEED + ", crash " + state;
                    CheckReport report = v.namespace().check();
                    assertTrue(report.clean(), where + ": " + report);
                    long expected = chunksOf(4000);
                    if (v.tables().exists("t")) {
                        try (Table t = v.tables().open("t")) {
                            for (int i = 0; i < 40; i++) {
                                assertEquals(1000 + 1500 * i, t.get(b("k" + i)).length, where);
                                expected += chunksOf(1000 + 1500 * i);
                            }
                        }
                    }
                    assertEquals(expected, chunks(v), where + ": chunks"); // and the check accounts for every block

                }
            }
        }
    }

    @Test
    void theCheckNamesALeakedChunkAndAMissingOne() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow()); Table t = v.tables().create("t")) {
            t.put(b("a"), random(rnd, 3000));
            t.put(b("b"), random(rnd, 2500));
            TableOverflow overflow = v.tables().overflow;
            TableValueFormat.Medium stray = new TableValueFormat.Medium(medium(t, b("b")).id() + 100, 1500, 0);
            overflow.write(stray, MemorySegment.ofArray(new byte[1500]));
            CheckReport report = v.namespace().check();
            assertFalse(report.clean(), "a leaked value's chunks: " + report);
            assertTrue(report.toString().contains("chunk 0 of medium value " + stray.id() + " (960 bytes) belongs to no table's value: leaked"), report.toString());
            assertTrue(report.toString().contains("chunk 1 of medium value " + stray.id() + " (540 bytes)"), report.toString());
            overflow.delete(stray);
            VolumeFixtures.assertChecked(v.namespace());

            TableValueFormat.Medium a = medium(t, b("a"));
            MemorySegment key = MemorySegment.ofArray(new byte[TableValueFormat.CHUNK_KEY]);
            TableValueFormat.chunkKey(key, a.id(), 1);
            BTree tree = overflow.tree(false);
            try (Handle h = v.namespace().openInode(overflow.inode());
                 Txn txn = Txn.begin(tree.cache(), 2 + tree.reservation())) { // chunk 1 of "a" lost
                Inode o = h.inode;
                o.lock();
                try {
                    v.namespace().records.lockRecord(txn, o.ino);
                    assertTrue(tree.delete(txn, key));
                    txn.commit();
                } finally {
                    o.unlock();
                }
            }
            report = v.namespace().check();
            assertTrue(report.toString().contains("key 61 names medium value " + a.id() + " of 3000 bytes in 4 chunks but the overflow tree"
                    + " (inode " + overflow.inode() + ") holds 3 of them"), report.toString());
            CorruptionException e = assertThrows(CorruptionException.class, () -> t.get(b("a")));
            assertTrue(e.getMessage().contains("key 61 names medium value " + a.id() + " of 3000 bytes in 4 chunks, which are missing"), e.getMessage());
            e = assertThrows(CorruptionException.class, () -> t.read(MemorySegment.ofArray(b("a")), 1000, MemorySegment.ofArray(new byte[10])));
            assertTrue(e.getMessage().contains("key 61 names medium value " + a.id()), e.getMessage());
            byte[] other = new byte[10]; // the chunks around the lost one still read
            assertEquals(3000, t.read(MemorySegment.ofArray(b("a")), 2000, MemorySegment.ofArray(other)));
            assertEquals(2500, t.get(b("b")).length);
        }
    }

    /** Block lookups of the volume's cache (hits and misses) so far. */
    private static long lookups(Volume v) {
        CacheStats s = v.cacheStats();
        return s.hits() + s.misses();
    }

    /**
     * A medium value is read with one cursor over its chunk keys, a cache lookup per leaf of chunks, not a
     * lookup (a descent) per chunk: in a get, a streamed read and a scan.
     */
    @Test
    void aValueIsReadByOneCursorOverItsChunks() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow()); Table t = v.tables().create("t")) {
            byte[][] values = new byte[6][];
            for (int i = 0; i < values.length; i++) {
                values[i] = random(rnd, Table.MAX_MEDIUM);
                t.put(b("k" + i), values[i]);
            }
            long chunks = chunksOf(Table.MAX_MEDIUM);
            for (int i = 0; i < values.length; i++) {
                long before = lookups(v);
                assertArrayEquals(values[i], t.get(b("k" + i)));
                long used = lookups(v) - before;
                assertTrue(used <= chunks / 2, "a get of " + chunks + " chunks looked up " + used + " blocks");
                byte[] part = new byte[20_000];
                before = lookups(v);
                assertEquals(Table.MAX_MEDIUM, t.read(MemorySegment.ofArray(b("k" + i)), 30_000, MemorySegment.ofArray(part)));
                used = lookups(v) - before;
                assertArrayEquals(Arrays.copyOfRange(values[i], 30_000, 50_000), part);
                assertTrue(used <= chunks / 6, "a read of 21 chunks looked up " + used + " blocks");
            }
            long before = lookups(v);
            TableCursor c = t.cursor();
            for (int i = 0; i < values.length; i++) {
                assertTrue(c.next());
                assertArrayEquals(values[i], c.value());
            }
            assertFalse(c.next());
            long used = lookups(v) - before;
            assertTrue(used <= values.length * chunks / 2, "a scan of " + values.length * chunks + " chunks looked up " + used + " blocks");
        }
    }

    /** A 64 KiB value's 69 chunks go in, and out again, in a few journal transactions, not one each. */
    @Test
    void aValuesChunksChangeInAFewTransactions() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow()); Table t = v.tables().create("t")) {
            for (int i = 0; i < 20; i++) { // a tree of a few levels
                t.put(b("w" + i), random(rnd, Table.MAX_MEDIUM));
            }
            byte[] value = random(rnd, Table.MAX_MEDIUM);
            long before = v.journal().stats().commits();
            t.put(b("k"), value);
            long puts = v.journal().stats().commits() - before;
            assertTrue(puts <= 12, "a put of " + chunksOf(value.length) + " chunks made " + puts + " transactions");
            assertArrayEquals(value, t.get(b("k")));
            before = v.journal().stats().commits();
            assertTrue(t.delete(b("k")));
            long deletes = v.journal().stats().commits() - before;
            assertTrue(deletes <= 12, "a delete of " + chunksOf(value.length) + " chunks made " + deletes + " transactions");
            assertNull(t.get(b("k")));
            assertEquals(20 * chunksOf(Table.MAX_MEDIUM), chunks(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A deleteRange over more medium values than one of its transactions takes (here a 4 MiB log: 256 KiB
     * of values each, which the undo holds in memory) deletes them all, in several transactions, with
     * every chunk.
     */
    @Test
    void aDeleteRangeOfManyMediumValuesSplitsItsTransactionsByTheirBytes() {
        Random rnd = new Random(SEED);
        try (Volume v = open(VolumeFixtures.formattedNarrow()); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            byte[] value = random(rnd, Table.MAX_MEDIUM);
            for (int i = 0; i < 24; i++) {
                t.put(b(String.format("k%02d", i)), value);
            }
            t.put(b("z"), b("inline"));
            assertEquals(25, t.deleteRange(null, null));
            assertEquals(0, chunks(v));
            assertNull(t.get(b("k00")));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A transaction deleting a 64 KiB value (its chunks, in a few transactions of the group) and putting
     * other keys, a medium one among them, crashed at sampled points around its commit: every recovered
     * volume checks clean and holds either the state before it or after it, whole, with exactly the chunks
     * its values name; after the flush that made its SYNC commit durable, the state after it.
     */
    @Test
    void aDeleteOfA64KiBValueWithOtherPutsIsAllOrNothingAcrossCrashes() {
        Random rnd = new Random(SEED);
        byte[] big = random(rnd, Table.MAX_MEDIUM), mid = random(rnd, 5000);
        byte[][] small = new byte[20][];
        int firstFlush, durableAt;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formattedNarrow())) {
            try (Volume v = open(rec); Table t = v.tables().create("t")) {
                t.put(b("big"), big);
                firstFlush = rec.flushCount();
                WriteTransaction tx = v.begin(Durability.SYNC);
                tx.delete(t, b("big"));
                tx.put(t, b("mid"), mid);
                for (int i = 0; i < small.length; i++) {
                    small[i] = random(rnd, 100);
                    tx.put(t, b("s" + i), small[i]);
                }
                durableAt = SyncPoint.of(rec, v, tx::commit);
            }
            int flushes = rec.flushCount();
            for (int k = firstFlush - 1; k < flushes; k++) {
                for (int sample = 0; sample < 3; sample++) {
                    List<RecordingDevice.Event> next = k + 1 <= flushes ? rec.epochWrites(k + 1) : List.of();
                    RecordingDevice.CrashState state;
                    if (sample < 2 || next.isEmpty()) {
                        List<Integer> picked = new ArrayList<>();
                        for (RecordingDevice.Event e : next) {
                            if (rnd.nextInt(3) == 0) {
                                picked.add(e.index());
                            }
                        }
                        Collections.shuffle(picked, rnd);
                        state = rec.crashAfterFlush(k, picked.stream().mapToInt(Integer::intValue).toArray());
                    } else {
                        RecordingDevice.Event torn = next.get(rnd.nextInt(next.size()));
                        java.util.BitSet sectors = new java.util.BitSet();
                        for (int i = 0; i < torn.sectorCount(); i++) {
                            if (rnd.nextBoolean()) {
                                sectors.set(i);
                            }
                        }
                        state = rec.crashTornAt(torn.index(), sectors);
                    }
                    try (MemoryDevice crashed = rec.materialize(state); Volume v = open(crashed);
                         Table t = v.tables().open("t")) {
                        String where = "seed " + SEED + ", crash " + state;
                        CheckReport report = v.namespace().check();
                        assertTrue(report.clean(), where + ": " + report);
                        byte[] gotBig = t.get(b("big"));
                        boolean after = gotBig == null;
                        assertTrue(after || k < durableAt, where + ": the commit was durable at flush " + durableAt);
                        if (after) {
                            assertArrayEquals(mid, t.get(b("mid")), where);
                            for (int i = 0; i < small.length; i++) {
                                assertArrayEquals(small[i], t.get(b("s" + i)), where);
                            }
                            assertEquals(chunksOf(mid.length), chunks(v), where + ": chunks after the commit");
                        } else {
                            assertArrayEquals(big, gotBig, where);
                            assertNull(t.get(b("mid")), where);
                            for (int i = 0; i < small.length; i++) {
                                assertNull(t.get(b("s" + i)), where);
                            }
                            assertEquals(chunksOf(big.length), chunks(v), where + ": chunks before the commit");
                        }
                    }
                }
            }
        }
    }
}
