package dev.ferrite.dir;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Snapshots: a snapshot's view of every table never changes while writers go on (single writes, write
 * transactions, deleted ranges), its cursors return exactly that view forward, in reverse and by prefix,
 * checked against models taken at each snapshot's opening; concurrent transfers between two tables keep
 * their sum in every snapshot, read twice the same while writers run; and closing the snapshots lets every
 * recorded prior value go.
 */
@ExtendWith(TestSeed.class)
class TableSnapshotTest {
    private static final long SEED = TestSeed.get(17);

    @Test
    void aSnapshotKeepsItsViewWhileEverythingChanges() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            a.withDurability(Durability.NONE);
            for (int i = 0; i < 500; i++) {
                a.put(b("k" + i), b("v" + i));
            }
            c.put(b("only"), b("c"));
            try (Snapshot s = v.tables().snapshot()) {
                a.put(b("k1"), b("changed"));
                a.delete(b("k2"));
                a.put(b("new"), b("inserted"));
                a.deleteRange(b("k3"), b("k4"));
                try (WriteTransaction tx = v.begin(Durability.NONE)) {
                    tx.put(a, b("k5"), b("in a transaction"));
                    tx.delete(c, b("only"));
                    tx.commit();
                }
                assertArrayEquals(b("v1"), s.get(a, b("k1")));
                assertArrayEquals(b("v2"), s.get(a, b("k2")));
                assertNull(s.get(a, b("new")));
                assertArrayEquals(b("v35"), s.get(a, b("k35")));
                assertArrayEquals(b("v5"), s.get(a, b("k5")));
                assertArrayEquals(b("c"), s.get(c, b("only")));
                assertArrayEquals(b("changed"), a.get(b("k1")), "the table itself moved on");
                assertNull(c.get(b("only")));
                TreeMap<byte[], byte[]> then = new TreeMap<>(Arrays::compareUnsigned);
                for (int i = 0; i < 500; i++) {
                    then.put(b("k" + i), b("v" + i));
                }
                assertView(then, s, a, null);
                assertTrue(v.tables().versions.entries() > 0);
            }
            a.put(b("k6"), b("after")); // prunes what no snapshot needs
            assertEquals(0, v.tables().versions.entries(), "records kept after every snapshot closed");
            Snapshot closed = v.tables().snapshot();
            closed.close();
            assertEquals(TableException.Kind.TRANSACTION_DONE,
                    assertThrows(TableException.class, () -> closed.get(a, b("k1"))).kind());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A snapshot opening while single writes are inside their apply on the fast path (no snapshot open when
     * they began: no version, nothing recorded) waits until every one of them has finished, then sees all
     * their deletes: opening beside one it would show a change half applied without a record of the value
     * before. Fails if {@code TableVersions#open} does not wait for the fast path's count.
     */
    @Test
    void aSnapshotOpensOnceTheFastWritesInsideHaveFinished() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            int writers = 4; // deletes: each claims room in the tree's reserve for its merge, which four fit in beside each other
            for (int w = 0; w < writers; w++) {
                t.put(b("w" + w), b("before"));
            }
            CountDownLatch inside = new CountDownLatch(writers), release = new CountDownLatch(1);
            v.tables().onApply = () -> {
                inside.countDown();
                awaitLatch(release);
            };
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                byte[] key = b("w" + w);
                Thread th = new Thread(() -> t.delete(key));
                th.setDaemon(true);
                threads.add(th);
                th.start();
            }
            awaitLatch(inside);
            v.tables().onApply = null;
            AtomicReference<Snapshot> opened = new AtomicReference<>();
            CountDownLatch open = new CountDownLatch(1);
            Thread opener = new Thread(() -> {
                opened.set(v.tables().snapshot());
                open.countDown();
            });
            opener.setDaemon(true);
            opener.start();
            assertFalse(open.await(300, TimeUnit.MILLISECONDS), "the snapshot opened beside the writes inside their apply");
            release.countDown();
            awaitLatch(open);
            try (Snapshot s = opened.get()) {
                for (int w = 0; w < writers; w++) {
                    assertNull(s.get(t, b("w" + w)), "w" + w);
                }
            }
            for (Thread th : threads) {
                th.join(TimeUnit.SECONDS.toMillis(20));
                assertFalse(th.isAlive(), "a writer did not finish");
            }
        }
    }

    private static void awaitLatch(CountDownLatch latch) {
        try {
            assertTrue(latch.await(20, TimeUnit.SECONDS), "never let go on");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    /** Random writes to two tables with snapshots opened and closed among them, each checked against the model of its moment. */
    @Test
    void snapshotsMatchTheModelsOfTheirMoment() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            Table[] tables = {a, c};
            List<TreeMap<byte[], byte[]>> model = List.of(new TreeMap<>(Arrays::compareUnsigned), new TreeMap<>(Arrays::compareUnsigned));
            record Open(Snapshot s, List<TreeMap<byte[], byte[]>> then) {
            }
            List<Open> open = new ArrayList<>();
            for (int step = 0; step < 1500; step++) {
                int r = rnd.nextInt(100);
                if (r < 4) {
                    List<TreeMap<byte[], byte[]>> copy = List.of(new TreeMap<>(model.get(0)), new TreeMap<>(model.get(1)));
                    open.add(new Open(v.tables().snapshot(), copy));
                } else if (r < 7 && !open.isEmpty()) {
                    open.remove(rnd.nextInt(open.size())).s().close();
                } else {
                    try (WriteTransaction tx = v.begin(Durability.NONE)) {
                        for (int n = 1 + rnd.nextInt(4); n > 0; n--) {
                            int t = rnd.nextInt(2);
                            byte[] k = {(byte) rnd.nextInt(40)};
                            if (rnd.nextInt(4) == 0) {
                                tx.delete(tables[t], k);
                                model.get(t).remove(k);
                            } else {
                                byte[] val = new byte[rnd.nextInt(20)];
                                rnd.nextBytes(val);
                                tx.put(tables[t], k, val);
                                model.get(t).put(k, val);
                            }
                        }
                        tx.commit();
                    }
                }
                if (step % 50 == 0) {
                    for (Open o : open) {
                        for (int t = 0; t < 2; t++) {
                            assertView(o.then().get(t), o.s(), tables[t], "seed " + SEED + " step " + step);
                        }
                    }
                }
            }
            for (Open o : open) {
                o.s().close();
            }
            a.put(b("x"), b("y"));
            assertEquals(0, v.tables().versions.entries());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static void assertView(TreeMap<byte[], byte[]> then, Snapshot s, Table t, String where) {
        List<byte[]> keys = new ArrayList<>();
        TableCursor c = s.cursor(t, null, null, false);
        while (c.next()) {
            keys.add(c.key());
            assertArrayEquals(then.get(c.key()), c.value(), where);
        }
        assertEquals(then.size(), keys.size(), where + ": keys " + keys.size());
        int i = 0;
        for (byte[] k : then.keySet()) {
            assertArrayEquals(k, keys.get(i++), where);
            assertArrayEquals(then.get(k), s.get(t, k), where);
        }
        List<byte[]> reversed = new ArrayList<>();
        TableCursor r = s.cursor(t, null, null, true);
        while (r.next()) {
            reversed.add(r.key());
        }
        assertEquals(keys.size(), reversed.size(), where);
        if (!keys.isEmpty()) {
            byte[] mid = keys.get(keys.size() / 2);
            TableCursor sought = s.cursor(t, null, null, false);
            sought.seek(mid);
            for (byte[] k : then.tailMap(mid, true).keySet()) {
                assertTrue(sought.next(), where);
                assertArrayEquals(k, sought.key(), where + ": after a seek");
            }
            assertFalse(sought.next(), where);
            TableCursor back = s.cursor(t, null, null, true);
            back.seek(mid);
            for (byte[] k : then.headMap(mid, true).descendingKeySet()) {
                assertTrue(back.next(), where);
                assertArrayEquals(k, back.key(), where + ": after a reverse seek");
            }
            assertFalse(back.next(), where);
        }
        for (int j = 0; j < keys.size(); j++) {
            assertArrayEquals(keys.get(j), reversed.get(keys.size() - 1 - j), where);
        }
        if (!then.isEmpty()) {
            byte[] first = then.firstKey();
            byte[] p = {first[0]};
            List<byte[]> expected = new ArrayList<>(then.subMap(p, true, Table.successor(p) == null ? new byte[] {(byte) 0xFF, (byte) 0xFF} : Table.successor(p), false).keySet());
            TableCursor pc = s.prefix(t, p, true);
            for (byte[] k : expected.reversed()) {
                assertTrue(pc.next(), where);
                assertArrayEquals(k, pc.key(), where);
            }
            assertFalse(pc.next(), where);
        }
    }

    /**
     * Writers move amounts between accounts of two tables in transactions; readers open snapshots and
     * sum both tables twice: the total never changes, and a snapshot reads the same both times.
     */
    @Test
    void concurrentTransfersKeepTheirSumInEverySnapshot() throws Exception {
        int accounts = 64, writers = 2, readers = 3; // readers opening and closing snapshots all the time: races between them show
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            Table[] tables = {a, c};
            try (WriteTransaction tx = v.begin(Durability.NONE)) {
                for (int i = 0; i < accounts; i++) {
                    tx.put(a, b("acct" + i), amount(1000));
                    tx.put(c, b("acct" + i), amount(1000));
                }
                tx.commit();
            }
            long total = 2L * accounts * 1000;
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            AtomicLong snapshots = new AtomicLong();
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                long seed = SEED + w;
                threads.add(new Thread(() -> {
                    Random rnd = new Random(seed);
                    while (!stop.get()) {
                        Table from = tables[rnd.nextInt(2)], to = tables[rnd.nextInt(2)];
                        byte[] fk = b("acct" + rnd.nextInt(accounts)), tk = b("acct" + rnd.nextInt(accounts));
                        if (from == to && Arrays.equals(fk, tk)) {
                            continue;
                        }
                        // each writer owns its transfers' reads only through the tables' locks at commit: serialize per pair by
                        // reading and writing in one transaction on a writer-private lock, so amounts stay exact
                        synchronized (tables) {
                            try (WriteTransaction tx = v.begin(Durability.NONE)) {
                                long x = value(tx.get(from, fk)), y = value(tx.get(to, tk));
                                long m = rnd.nextInt(50);
                                tx.put(from, fk, amount(x - m));
                                tx.put(to, tk, amount(y + m));
                                tx.commit();
                            }
                        }
                    }
                }));
            }
            for (int r = 0; r < readers; r++) {
                threads.add(new Thread(() -> {
                    while (!stop.get()) {
                        try (Snapshot s = v.tables().snapshot()) {
                            long first = sum(s, tables), second = sum(s, tables);
                            if (first != total || second != first) {
                                throw new AssertionError("snapshot " + s.version() + " sums to " + first + " then " + second
                                        + ", not " + total + " (seed " + SEED + ")");
                            }
                            snapshots.incrementAndGet();
                        }
                    }
                }));
            }
            for (Thread t : threads) {
                t.setUncaughtExceptionHandler((th, e) -> failed.compareAndSet(null, e));
                t.start();
            }
            long deadline = System.nanoTime() + 1_500_000_000L;
            while (System.nanoTime() < deadline && failed.get() == null) {
                Thread.sleep(20);
            }
            stop.set(true);
            for (Thread t : threads) {
                t.join(30_000);
            }
            if (failed.get() != null) {
                throw new AssertionError(failed.get());
            }
            assertTrue(snapshots.get() > 0);
            try (Snapshot s = v.tables().snapshot()) {
                assertEquals(total, sum(s, tables));
            }
            a.put(b("x"), amount(0));
            a.delete(b("x"));
            assertEquals(0, v.tables().versions.entries());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static byte[] amount(long x) {
        return ByteBuffer.allocate(8).putLong(x).array();
    }

    private static long value(byte[] v) {
        return ByteBuffer.wrap(v).getLong();
    }

    private static long sum(Snapshot s, Table[] tables) {
        long sum = 0;
        for (Table t : tables) {
            TableCursor c = s.cursor(t, null, null, false);
            while (c.next()) {
                sum += value(c.value());
            }
        }
        return sum;
    }

}
