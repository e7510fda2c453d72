package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Reads of the tables' latest state never see part of a multi-key commit ({@link TablePublication}): a
 * commit stopped between its changes shows none of them to gets, reads into segments, containsKey and
 * cursors opened outside a snapshot, and all of them once it returns, while a cursor opened before it
 * ended never shows it; and writers committing stamped transactions over two tables, beside single
 * writes, never let a reader's gets go back from a commit it saw, nor a cursor show two commits of one
 * writer in one scan.
 */
@ExtendWith(TestSeed.class)
class TablePublicationTest {
    private static final long SEED = TestSeed.get(17);

    @Test
    void aCommitStoppedBetweenItsChangesShowsNoneOfThemUntilItEnds() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            a.withDurability(Durability.NONE);
            TreeMap<byte[], byte[]> before = new TreeMap<>(Arrays::compareUnsigned);
            for (int i = 0; i < 300; i++) {
                a.put(b(key(i)), b("old" + i));
                before.put(b(key(i)), b("old" + i));
            }
            c.put(b("only"), b("old"));
            Semaphore changed = new Semaphore(0), go = new Semaphore(0);
            v.tables().onGroupChange = () -> {
                changed.release();
                go.acquireUninterruptibly();
            };
            TableCursor opened = a.cursor(); // before the commit: never shows it
            assertTrue(opened.next());
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread committer = new Thread(() -> {
                try (WriteTransaction tx = v.begin(Durability.NONE)) {
                    tx.put(a, b(key(10)), b("new"));
                    tx.delete(a, b(key(150)));
                    tx.put(a, b("k0150x"), b("inserted"));
                    tx.put(a, b(key(290)), b("new"));
                    tx.put(c, b("only"), b("new"));
                    tx.commit();
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            committer.start();
            List<TableCursor> midApply = new ArrayList<>();
            try {
                checkEachChange(a, c, before, changed, go, midApply);
            } finally { // a failed check lets the commit go on, so that the volume closes
                v.tables().onGroupChange = null;
                go.release(5);
                committer.join(30_000);
            }
            assertNull(failed.get());
            assertArrayEquals(b("new"), a.get(b(key(10))));
            assertNull(a.get(b(key(150))));
            assertArrayEquals(b("inserted"), a.get(b("k0150x")));
            assertArrayEquals(b("new"), a.get(b(key(290))));
            assertArrayEquals(b("new"), c.get(b("only")));
            TreeMap<byte[], byte[]> after = new TreeMap<>(before);
            after.put(b(key(10)), b("new"));
            after.remove(b(key(150)));
            after.put(b("k0150x"), b("inserted"));
            after.put(b(key(290)), b("new"));
            assertView(after, a.cursor(), "a cursor opened after the commit");
            TreeMap<byte[], byte[]> rest = new TreeMap<>(before);
            rest.remove(before.firstKey());
            assertView(rest, opened, "a cursor opened before the commit, read on after it");
            for (int i = 0; i < midApply.size(); i++) {
                assertView(new TreeMap<>(before.headMap(before.lastKey(), false)).descendingMap(), midApply.get(i),
                        "a reverse cursor opened after change " + i + ", read on after the commit");
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A cursor looks at the commits' records once per leaf it copies, not per entry: one opened before a
     * commit and read on, a few entries at a time, across many leaves while the commit stops after each of
     * its changes (a key it already returned, keys in leaves ahead, a delete and an insert there) shows
     * every key once, in order, with its value from before the commit, and the same after it ended.
     */
    @Test
    void aCursorReadOnAcrossLeavesWhileACommitAppliesShowsNoneOfIt() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table a = v.tables().create("a")) {
            a.withDurability(Durability.NONE);
            TreeMap<byte[], byte[]> before = new TreeMap<>(Arrays::compareUnsigned);
            for (int i = 0; i < 2000; i++) { // about 40 to a leaf: 50 leaves
                byte[] value = Arrays.copyOf(b("old" + i), 100);
                a.put(b(key(i)), value);
                before.put(b(key(i)), value);
            }
            Semaphore changed = new Semaphore(0), go = new Semaphore(0);
            v.tables().onGroupChange = () -> {
                changed.release();
                go.acquireUninterruptibly();
            };
            var expected = before.entrySet().iterator();
            TableCursor c = a.cursor();
            readOn(c, expected, 5, "before the commit");
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread committer = new Thread(() -> {
                try (WriteTransaction tx = v.begin(Durability.NONE)) {
                    tx.put(a, b(key(2)), b("new")); // returned already
                    tx.put(a, b(key(1500)), b("new"));
                    tx.delete(a, b(key(1600)));
                    tx.put(a, b("k1600x"), b("inserted"));
                    tx.commit();
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            committer.start();
            try {
                for (int change = 0; change < 4; change++) {
                    assertTrue(changed.tryAcquire(30, TimeUnit.SECONDS), "change " + change + " never came");
                    readOn(c, expected, 450, "after change " + change + " of 4");
                    go.release();
                }
            } finally { // a failed check lets the commit go on, so that the volume closes
                v.tables().onGroupChange = null;
                go.release(4);
                committer.join(30_000);
            }
            assertNull(failed.get());
            readOn(c, expected, Integer.MAX_VALUE, "after the commit");
            assertFalse(c.next(), "more keys after the commit");
            c.close();
            assertArrayEquals(b("inserted"), a.get(b("k1600x")));
        }
    }

    /** Reads up to {@code n} entries of {@code c}, each the next of {@code expected}. */
    private static void readOn(TableCursor c, java.util.Iterator<java.util.Map.Entry<byte[], byte[]>> expected, int n, String when) {
        for (int i = 0; i < n && expected.hasNext(); i++) {
            var e = expected.next();
            assertTrue(c.next(), when + ": ended before " + new String(e.getKey()));
            assertEquals(new String(e.getKey()), new String(c.key()), when);
            assertArrayEquals(e.getValue(), c.value(), when + ": key " + new String(e.getKey()));
        }
    }

    /**
     * A table's records kept beside the transaction's sorted keys ({@link TablePublication.Listed}) answer
     * every lookup and every cursor's step as a sorted map of the same records does ({@link
     * TablePublication.Mapped}), whether the keys are recorded in order (as a commit applies them) or out
     * of it, partly or wholly: gets, and the nearest recorded key of ranges with open, closed, empty and
     * missing bounds, both directions.
     */
    @Test
    void recordsBesideTheSortedKeysAnswerAsASortedMapDoes() {
        Random rnd = new Random(SEED);
        for (int round = 0; round < 300; round++) {
            String where = "seed " + SEED + ", round " + round;
            TreeMap<byte[], Boolean> sorted = new TreeMap<>(Arrays::compareUnsigned);
            for (int n = 1 + rnd.nextInt(rnd.nextBoolean() ? 8 : 200); sorted.size() < n; ) {
                sorted.put(randomKey(rnd), true);
            }
            byte[][] keys = sorted.keySet().toArray(new byte[0][]);
            var listed = new TablePublication.Listed(keys);
            var mapped = new TablePublication.Mapped();
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < keys.length; i++) {
                order.add(i);
            }
            boolean inOrder = rnd.nextBoolean();
            if (!inOrder) {
                Collections.shuffle(order, rnd);
            }
            int recorded = rnd.nextInt(keys.length + 1);
            for (int r = 0; r < recorded; r++) {
                byte[] key = keys[order.get(r)];
                byte[] before = rnd.nextInt(4) == 0 ? null : b("v" + r);
                listed.record(rnd.nextBoolean() ? key : key.clone(), before); // the transaction's own array, or a copy
                mapped.record(key, before);
                if (rnd.nextInt(8) == 0) { // recorded again: the first record stays
                    listed.record(key, b("again"));
                    mapped.record(key, b("again"));
                }
            }
            String w = where + (inOrder ? ", in order" : ", shuffled") + ", " + recorded + " of " + keys.length + " recorded";
            for (int probe = 0; probe < 40; probe++) {
                byte[] key = rnd.nextBoolean() ? keys[rnd.nextInt(keys.length)] : randomKey(rnd);
                TableVersions.Undo l = listed.get(key), m = mapped.get(key);
                assertEquals(m == null, l == null, w + ": get " + HexFormat.of().formatHex(key));
                if (m != null) {
                    assertArrayEquals(m.before, l.before, w + ": get " + HexFormat.of().formatHex(key));
                }
                byte[] lo = rnd.nextInt(4) == 0 ? null : rnd.nextBoolean() ? keys[rnd.nextInt(keys.length)] : randomKey(rnd);
                byte[] hi = rnd.nextInt(4) == 0 ? null : rnd.nextBoolean() ? keys[rnd.nextInt(keys.length)] : randomKey(rnd);
                var range = new TableCursor.Range(lo, rnd.nextBoolean(), hi, rnd.nextBoolean(), rnd.nextBoolean());
                byte[] from = rnd.nextInt(3) == 0 ? null : key;
                boolean inclusive = rnd.nextBoolean();
                byte[] expected = mapped.nearest(range, from, inclusive), got = listed.nearest(range, from, inclusive);
                assertEquals(expected == null ? null : HexFormat.of().formatHex(expected), got == null ? null : HexFormat.of().formatHex(got),
                        w + ": nearest to " + (from == null ? "the start" : HexFormat.of().formatHex(from)) + (inclusive ? " inclusive" : "") + " in " + range);
            }
        }
    }

    /** A key of 1 to 3 bytes from a small alphabet: ranges and probes meet the recorded keys often. */
    private static byte[] randomKey(Random rnd) {
        byte[] k = new byte[1 + rnd.nextInt(3)];
        for (int i = 0; i < k.length; i++) {
            k[i] = (byte) (rnd.nextInt(6) * 50);
        }
        return k;
    }

    @Test
    void readersNeverSeePartOfACommit() throws Exception {
        stampedCommits(3, 300, 2);
    }

    @Test
    @Tag("stress")
    void readersNeverSeePartOfACommitLonger() throws Exception {
        stampedCommits(4, 5_000, 4);
    }

    /**
     * As {@link #readersNeverSeePartOfACommitLonger}, on a 32 MiB log, where several commits' groups apply at
     * once (on the fixtures' 4 MiB log each group's budget takes a quarter of it, and they mostly take turns).
     */
    @Test
    @Tag("stress")
    void readersNeverSeePartOfACommitOnALargeLog() throws Exception {
        MemoryDevice dev = MemoryDevice.create(16384, 4096);
        VolumeOptions options = VolumeFixtures.OPTIONS.withLogBlocks(8192);
        Volume.format(dev, options);
        stampedCommits(dev, options, 4, 5_000, 4);
    }

    /** At each of the commit's five changes, stopped there: every read shows none of them. */
    private static void checkEachChange(Table a, Table c, TreeMap<byte[], byte[]> before, Semaphore changed, Semaphore go,
                                        List<TableCursor> midApply) throws InterruptedException {
        for (int change = 0; change < 5; change++) {
            assertTrue(changed.tryAcquire(30, TimeUnit.SECONDS), "change " + change + " never came");
            String at = "after change " + change + " of 5";
            assertArrayEquals(b("old10"), a.get(b(key(10))), at + ": get of a changed key");
            assertArrayEquals(b("old150"), a.get(b(key(150))), at + ": get of a deleted key");
            assertTrue(a.containsKey(b(key(150))), at + ": a deleted key");
            assertNull(a.get(b("k0150x")), at + ": an inserted key");
            assertFalse(a.containsKey(b("k0150x")), at + ": an inserted key");
            byte[] into = new byte[16];
            assertEquals(5, a.get(MemorySegment.ofArray(b(key(10))), MemorySegment.ofArray(into)), at + ": read into a segment");
            assertArrayEquals(b("old10"), Arrays.copyOf(into, 5), at + ": read into a segment");
            assertEquals(6, a.valueLength(b(key(290))), at + ": a key changed last");
            assertArrayEquals(b("old"), c.get(b("only")), at + ": the other table's key");
            assertView(before, a.cursor(), at + ": a cursor opened now");
            TableCursor m = a.cursor(null, null, true);
            assertTrue(m.next());
            midApply.add(m); // goes on after the commit ended: still without it
            go.release();
        }
    }

    private static String key(int i) {
        return String.format("k%04d", i);
    }

    /** Asserts that {@code c} returns exactly {@code expected}'s entries (in its order), then closes it. */
    private static void assertView(java.util.SortedMap<byte[], byte[]> expected, TableCursor c, String where) {
        try (c) {
            for (var e : expected.entrySet()) {
                assertTrue(c.next(), where + ": ended before " + new String(e.getKey()));
                assertEquals(new String(e.getKey()), new String(c.key()), where);
                assertArrayEquals(e.getValue(), c.value(), where + ": key " + new String(e.getKey()));
            }
            assertFalse(c.next(), where + ": more keys");
        }
    }

    /** Keys per writer per table: interleaved with the other writers' in key order. */
    private static final int KEYS = 6;

    /**
     * {@code writers} threads each commit {@code commits} transactions writing stamp n (their n-th commit)
     * to each of their keys in both tables, putting their extra key on even stamps and deleting it on odd
     * ones; a single writer rewrites keys of its own meanwhile. {@code readers} threads read a writer's
     * keys one get at a time (never a stamp lower than one they saw of that writer) and scan a table (one
     * stamp per writer, its extra key there exactly on an even one).
     */
    private static void stampedCommits(int writers, int commits, int readers) throws Exception {
        stampedCommits(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS, writers, commits, readers);
    }

    private static void stampedCommits(MemoryDevice dev, VolumeOptions options, int writers, int commits, int readers) throws Exception {
        try (Volume v = Volume.open(dev, options);
             Table a = v.tables().create("a"); Table t2 = v.tables().create("b")) {
            Table[] tables = {a, t2};
            for (Table t : tables) {
                t.withDurability(Durability.NONE);
                for (int w = 0; w < writers; w++) {
                    for (int k = 0; k < KEYS; k++) {
                        t.put(writerKey(w, k, writers), stamp(0));
                    }
                    t.put(extraKey(w), stamp(0));
                }
            }
            AtomicBoolean done = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            AtomicLong reads = new AtomicLong(), scans = new AtomicLong();
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int id = w;
                threads.add(new Thread(() -> {
                    for (int n = 1; n <= commits && failed.get() == null; n++) {
                        try (WriteTransaction tx = v.begin(Durability.NONE)) {
                            for (Table t : tables) {
                                for (int k = 0; k < KEYS; k++) {
                                    tx.put(t, writerKey(id, k, writers), stamp(n));
                                }
                                if (n % 2 == 0) {
                                    tx.put(t, extraKey(id), stamp(n));
                                } else {
                                    tx.delete(t, extraKey(id));
                                }
                            }
                            tx.commit();
                        }
                    }
                }, "writer-" + w));
            }
            threads.add(new Thread(() -> { // single writes beside the commits, to keys of their own
                Random rnd = new Random(SEED * 31 + 999);
                for (long n = 1; !done.get(); n++) {
                    tables[rnd.nextInt(2)].put(b("s" + rnd.nextInt(50)), stamp(n));
                }
            }, "singles"));
            List<Thread> readerThreads = new ArrayList<>();
            for (int r = 0; r < readers; r++) {
                int id = r;
                readerThreads.add(new Thread(() -> {
                    Random rnd = new Random(SEED * 31 + 2000 + id);
                    while (!done.get() && failed.get() == null) {
                        if (rnd.nextInt(4) == 0) {
                            scan(tables[rnd.nextInt(2)], writers, rnd.nextBoolean());
                            scans.incrementAndGet();
                        } else {
                            gets(tables, rnd.nextInt(writers), writers, rnd);
                            reads.incrementAndGet();
                        }
                    }
                }, "reader-" + r));
            }
            List<Thread> all = new ArrayList<>(threads);
            all.addAll(readerThreads);
            for (Thread th : all) {
                th.setUncaughtExceptionHandler((th2, e) -> failed.compareAndSet(null, e));
                th.start();
            }
            for (int w = 0; w < writers; w++) {
                threads.get(w).join();
            }
            done.set(true);
            for (Thread th : all) {
                th.join(60_000);
            }
            if (failed.get() != null) {
                throw new AssertionError("seed " + SEED + ", after " + reads.get() + " get sequences and " + scans.get()
                        + " scans: " + failed.get().getMessage(), failed.get());
            }
            for (int w = 0; w < writers; w++) {
                for (Table t : tables) {
                    assertEquals(commits, stampOf(t.get(writerKey(w, 0, writers))), "writer " + w + "'s last commit in " + t);
                }
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static byte[] writerKey(int w, int k, int writers) {
        return b(String.format("w%05d", k * writers + w));
    }

    private static byte[] extraKey(int w) {
        return b(String.format("x%03d", w));
    }

    private static byte[] stamp(long n) {
        return ByteBuffer.allocate(8).putLong(n).array();
    }

    private static long stampOf(byte[] v) {
        return ByteBuffer.wrap(v).getLong();
    }

    /** Reads writer {@code w}'s keys in both tables one at a time, in random order, twice: no stamp below the highest seen. */
    private static void gets(Table[] tables, int w, int writers, Random rnd) {
        long seen = 0;
        byte[] into = new byte[8];
        for (int i = 0; i < 2 * (KEYS + 1) * 2; i++) {
            Table t = tables[rnd.nextInt(2)];
            int k = rnd.nextInt(KEYS + 1);
            byte[] key = k == KEYS ? extraKey(w) : writerKey(w, k, writers);
            byte[] v;
            if (rnd.nextBoolean()) {
                v = t.get(key);
            } else {
                long n = t.get(MemorySegment.ofArray(key), MemorySegment.ofArray(into));
                v = n < 0 ? null : into.clone();
            }
            if (v == null) {
                if (k != KEYS) {
                    fail(t + " key " + new String(key) + " is gone");
                }
                continue; // the extra key, deleted by an odd stamp: which one, its absence does not say
            }
            long n = stampOf(v);
            if (n < seen) {
                fail(t + " key " + new String(key) + " of writer " + w + " read stamp " + n + " after stamp " + seen
                        + " was read: part of a commit");
            }
            if (k == KEYS && n % 2 == 1) {
                fail(t + " extra key of writer " + w + " has odd stamp " + n);
            }
            seen = Math.max(seen, n);
        }
    }

    /** One scan of {@code t}: each writer's keys carry one stamp, and its extra key is there exactly when that stamp is even. */
    private static void scan(Table t, int writers, boolean reverse) {
        long[] stamps = new long[writers];
        Arrays.fill(stamps, -1);
        boolean[] extra = new boolean[writers];
        try (TableCursor c = t.cursor(null, null, reverse)) {
            while (c.next()) {
                String k = new String(c.key());
                if (k.startsWith("s")) {
                    continue;
                }
                long n = stampOf(c.value());
                int w = k.startsWith("x") ? Integer.parseInt(k.substring(1)) : Integer.parseInt(k.substring(1)) % writers;
                if (k.startsWith("x")) {
                    extra[w] = true;
                    if (n % 2 == 1) {
                        throw new AssertionError(t + " extra key of writer " + w + " with odd stamp " + n);
                    }
                }
                if (stamps[w] >= 0 && stamps[w] != n) {
                    throw new AssertionError(t + " scan (reverse " + reverse + "): writer " + w + "'s keys carry stamps "
                            + stamps[w] + " and " + n + " (at " + k + "): part of a commit");
                }
                stamps[w] = n;
            }
        }
        for (int w = 0; w < writers; w++) {
            if (extra[w] != (stamps[w] % 2 == 0)) {
                throw new AssertionError(t + " scan (reverse " + reverse + "): writer " + w + " at stamp " + stamps[w]
                        + " has its extra key " + (extra[w] ? "present" : "absent"));
            }
        }
    }
}
