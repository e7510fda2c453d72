package dev.ferrite.dir;

import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiFunction;

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
 * Write transactions of several keys apply side by side ({@code Tables#apply}): two on one table, and two
 * on two tables, meet between their changes inside their groups; one that changes a key another holds
 * waits for it to end and then wins; and writers committing random transactions over two tables at once,
 * with readers, snapshots and rollbacks among them, leave the tables as their models say, equal where
 * every transaction wrote both, never showing part of a commit, and the check clean, also after a remount.
 *
 * <p>{@code -Dferrite.seed=N} fixes each writer's sequence of transactions, not how the threads interleave.
 */
@ExtendWith(TestSeed.class)
class TableTransactionsTest {
    private static final long SEED = TestSeed.get(29);
    /**
     * A 32 MiB log: each group's share of it takes at least its budget (a quarter of the fixtures' 4 MiB
     * log, where multi-key commits take turns), so several groups fit in a quarter of this one.
     */
    private static final VolumeOptions LARGE_LOG = VolumeFixtures.OPTIONS.withLogBlocks(8192);

    private static MemoryDevice largeLog() {
        MemoryDevice dev = MemoryDevice.create(16384, 4096);
        Volume.format(dev, LARGE_LOG);
        return dev;
    }

    /**
     * Two transactions of three keys each on one table wait, after their first change, for the other to
     * get there too. With multi-key commits applied one at a time (the table held, the volume's group
     * lock), the second never starts its group while the first waits: the first's wait times out.
     */
    @Test
    void twoTransactionsOnOneTableApplyAtOnce() throws Exception {
        try (Volume v = Volume.open(largeLog(), LARGE_LOG); Table t = v.tables().create("t")) {
            meetBetweenChanges(v, t, t);
        }
    }

    /** As above, each transaction over the same two tables, and then over a table each. */
    @Test
    void twoTransactionsOnTwoTablesApplyAtOnce() throws Exception {
        try (Volume v = Volume.open(largeLog(), LARGE_LOG);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            meetBetweenChanges(v, a, c);
            meetBetweenChanges(v, a, a);
            meetBetweenChanges(v, c, c);
        }
    }

    /** Two threads commit transactions to {@code first} and {@code second} that meet after their first change. */
    private static void meetBetweenChanges(Volume v, Table first, Table second) throws Exception {
        CyclicBarrier both = new CyclicBarrier(2);
        Set<Thread> met = ConcurrentHashMap.newKeySet();
        v.tables().onGroupChange = () -> {
            if (met.add(Thread.currentThread())) {
                try {
                    both.await(10, TimeUnit.SECONDS);
                } catch (TimeoutException | BrokenBarrierException e) {
                    throw new AssertionError("the other transaction never came into its group beside this one", e);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            }
        };
        AtomicReference<Throwable> failed = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int n = 0; n < 2; n++) {
            String w = "w" + n;
            Table one = n == 0 ? first : second, other = n == 0 ? second : first;
            Thread th = new Thread(() -> {
                try (WriteTransaction tx = v.begin(Durability.SYNC)) {
                    tx.put(one, b(w + "-x"), b("1"));
                    tx.put(one, b(w + "-y"), b("2"));
                    tx.put(other, b(w + "-z"), b("3"));
                    tx.commit();
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join(TimeUnit.SECONDS.toMillis(60));
        }
        v.tables().onGroupChange = null;
        if (failed.get() != null) {
            throw new AssertionError("tables " + first.name() + " and " + second.name() + ": " + failed.get(), failed.get());
        }
        for (int n = 0; n < 2; n++) {
            Table one = n == 0 ? first : second, other = n == 0 ? second : first;
            assertArrayEquals(b("1"), one.get(b("w" + n + "-x")));
            assertArrayEquals(b("2"), one.get(b("w" + n + "-y")));
            assertArrayEquals(b("3"), other.get(b("w" + n + "-z")));
        }
        VolumeFixtures.assertChecked(v.namespace());
    }

    /**
     * A transaction of two keys commits while a single write to another key of its table waits inside its
     * apply: it enters the table beside it, as single writes do. Holding the table, it would wait for the
     * single write to leave, which waits for the test's release: the commit does not return in time.
     */
    @Test
    void aTransactionAppliesBesideASingleWriteInside() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            CountDownLatch singleInside = new CountDownLatch(1), release = new CountDownLatch(1);
            v.tables().onApply = () -> {
                singleInside.countDown();
                await(release);
            };
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread single = new Thread(() -> t.put(b("single"), b("1")));
            single.start();
            await(singleInside);
            v.tables().onApply = null;
            Thread tx = new Thread(() -> commit(v, t, failed, "2", "tx-a", "tx-b"));
            tx.start();
            tx.join(TimeUnit.SECONDS.toMillis(20));
            boolean committed = !tx.isAlive();
            release.countDown();
            single.join();
            tx.join();
            assertNull(failed.get(), () -> String.valueOf(failed.get()));
            assertTrue(committed, "the transaction waited for the single write inside its apply");
            assertEquals(3, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A transaction holding a key (stopped inside its group after its changes) keeps a second transaction
     * that changes that key out until it ends; the second then applies, and its value is the one left: the
     * later commit wins. A third transaction, of other keys, applies meanwhile. The volume counts the one
     * wait ({@link Volume#stripeStats}).
     */
    @Test
    void aTransactionChangingAHeldKeyWaitsAndWins() throws Exception {
        try (Volume v = Volume.open(largeLog(), LARGE_LOG); Table t = v.tables().create("t")) {
            StripeStats before = v.stripeStats();
            CountDownLatch inside = new CountDownLatch(1), go = new CountDownLatch(1);
            AtomicReference<Thread> first = new AtomicReference<>();
            v.tables().onGroupChange = () -> {
                if (Thread.currentThread() == first.get()) {
                    inside.countDown();
                    await(go);
                }
            };
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread one = new Thread(() -> commit(v, t, failed, "one", "shared", "a1", "a2"));
            first.set(one);
            one.start();
            await(inside);
            Thread two = new Thread(() -> commit(v, t, failed, "two", "b1", "shared", "b2"));
            two.start();
            Thread three = new Thread(() -> commit(v, t, failed, "three", "c1", "c2"));
            three.start();
            three.join(TimeUnit.SECONDS.toMillis(20));
            assertFalse(three.isAlive(), "a transaction of other keys waited for the one stopped in its group");
            assertArrayEquals(b("three"), t.get(b("c1")));
            awaitBlocked(two);
            assertNull(t.get(b("b1")), "the transaction that changes a held key applied part of itself meanwhile");
            assertNull(t.get(b("shared")), "a read saw the stopped transaction's change");
            go.countDown();
            one.join(TimeUnit.SECONDS.toMillis(20));
            two.join(TimeUnit.SECONDS.toMillis(20));
            v.tables().onGroupChange = null;
            assertNull(failed.get(), () -> String.valueOf(failed.get()));
            assertArrayEquals(b("two"), t.get(b("shared")), "the later commit wins");
            assertArrayEquals(b("one"), t.get(b("a1")));
            assertArrayEquals(b("two"), t.get(b("b2")));
            StripeStats after = v.stripeStats();
            assertEquals(1, after.keyWaits() - before.keyWaits(), "key stripe waits: " + before + " -> " + after);
            assertTrue(after.keyWaitNanos() > before.keyWaitNanos(), "the wait took no time: " + after);
            assertEquals(before.nameWaits(), after.nameWaits(), "no name was created");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A transaction waiting for a key another holds (stopped inside its group) holds none of its other keys
     * meanwhile ({@code KeyStripes#lockAll}): a single write to a key of the waiting transaction whose
     * stripe comes before the held key's commits at once, and the waiting transaction applies after the
     * stopped one ends and wins. Holding the stripes it took before the held one, as it did, it kept that
     * single write out until the stopped transaction ended.
     */
    @Test
    void aTransactionWaitingForAHeldKeyHoldsNoneOfItsOtherKeys() throws Exception {
        try (Volume v = Volume.open(largeLog(), LARGE_LOG); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            long ino = t.inode.ino;
            String held = null, low = null; // the waiting transaction takes low's stripe first, then held's
            for (int i = 0; held == null; i++) {
                held = KeyStripes.of(ino, b("held" + i)) > KeyStripes.KEY_STRIPES / 2 ? "held" + i : null;
            }
            int heldStripe = KeyStripes.of(ino, b(held));
            for (int i = 0; low == null; i++) {
                low = KeyStripes.of(ino, b("low" + i)) < heldStripe ? "low" + i : null;
            }
            CountDownLatch inside = new CountDownLatch(1), go = new CountDownLatch(1);
            AtomicReference<Thread> first = new AtomicReference<>();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            String h = held, l = low;
            Thread one = daemon(() -> commit(v, t, failed, "one", h, "a1", "a2"));
            first.set(one);
            v.tables().onGroupChange = () -> {
                if (Thread.currentThread() == first.get()) {
                    inside.countDown();
                    await(go);
                }
            };
            Thread two = daemon(() -> commit(v, t, failed, "two", l, h));
            try {
                one.start();
                await(inside);
                two.start();
                awaitBlocked(two);
                Thread single = daemon(() -> t.put(b(l), b("single")));
                single.start();
                single.join(TimeUnit.SECONDS.toMillis(20));
                assertFalse(single.isAlive(), "a single write of " + l + " waited for the transaction waiting for " + h);
                assertArrayEquals(b("single"), t.get(b(l)));
                assertNull(t.get(b(h)), "a read saw part of the stopped transaction");
            } finally {
                go.countDown();
                one.join(TimeUnit.SECONDS.toMillis(20));
                two.join(TimeUnit.SECONDS.toMillis(20));
                v.tables().onGroupChange = null;
            }
            assertFalse(one.isAlive() || two.isAlive(), "a transaction never ended");
            assertNull(failed.get(), () -> String.valueOf(failed.get()));
            assertArrayEquals(b("two"), t.get(b(l)), "the later commit wins");
            assertArrayEquals(b("two"), t.get(b(h)));
            assertArrayEquals(b("one"), t.get(b("a1")));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * Writers committing batches of random keys out of a few (nearly every two share a key, so they wait
     * for each other) leave a state that one order of the commits explains: each key holds the value of
     * the last commit that wrote it, and each snapshot taken meanwhile shows every commit up to some point
     * of each writer whole and nothing after it. Each writer also writes a key of its own in every batch,
     * which tells how far a snapshot sees it; every "a before b" the final state and the snapshots imply,
     * with each writer's own order, must form no cycle. Every 50th key's change a commit applies holds its
     * keys a millisecond longer, so that the others' batches park on them: commits fast enough to finish
     * inside a waiter's spins left none parked in one run of four.
     */
    @Test
    void batchesSharingKeysMatchOneOrderOfTheirCommits() throws Exception {
        int writers = 4, commits = 150, keys = 120, batch = 16;
        try (Volume v = Volume.open(largeLog(), LARGE_LOG); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            AtomicInteger changes = new AtomicInteger();
            v.tables().onGroupChange = () -> {
                if (changes.incrementAndGet() % 50 == 0) {
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
                }
            };
            StripeStats before = v.stripeStats();
            int[][][] written = new int[writers][commits + 1][]; // each commit's keys
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            List<long[][]> snapshots = new ArrayList<>(); // per snapshot: each writer's commit seen, then each key's (writer, commit)
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int me = w;
                threads.add(new Thread(() -> {
                    Random r = new Random(SEED * 17 + me);
                    try {
                        for (int n = 1; n <= commits && failed.get() == null; n++) {
                            int[] ks = r.ints(0, keys).distinct().limit(batch).sorted().toArray();
                            written[me][n] = ks;
                            try (WriteTransaction tx = v.begin(Durability.NONE)) {
                                tx.put(t, b("own" + me), stamp(me, n));
                                for (int k : ks) {
                                    tx.put(t, b(String.format("k%03d", k)), stamp(me, n));
                                }
                                tx.commit();
                            }
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, new AssertionError("writer " + me + " (seed " + SEED + ")", e));
                    }
                }, "writer-" + w));
            }
            Thread reader = new Thread(() -> {
                try {
                    while (!stop.get() && failed.get() == null) {
                        try (Snapshot s = v.tables().snapshot()) {
                            snapshots.add(read(s::get, t, writers, keys));
                        }
                        Thread.sleep(1);
                    }
                } catch (Throwable e) {
                    failed.compareAndSet(null, new AssertionError("reader", e));
                }
            });
            threads.forEach(Thread::start);
            reader.start();
            for (Thread th : threads) {
                th.join();
            }
            stop.set(true);
            reader.join();
            if (failed.get() != null) {
                throw new AssertionError(failed.get().getMessage(), failed.get());
            }
            List<long[][]> states = new ArrayList<>(snapshots);
            states.add(read(Table::get, t, writers, keys));
            assertOneOrder(states, written, writers, commits);
            StripeStats after = v.stripeStats();
            assertTrue(after.keyWaits() > before.keyWaits(), "no commit waited for another's key: " + before + " -> " + after);
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** Reads a table's state as a snapshot or the latest: each writer's commit its own key shows (0: none), then each key's writer and commit (-1: absent). */
    private static long[][] read(BiFunction<Table, byte[], byte[]> get, Table t, int writers, int keys) {
        long[] seen = new long[writers];
        for (int w = 0; w < writers; w++) {
            byte[] got = get.apply(t, b("own" + w));
            seen[w] = got == null ? 0 : ByteBuffer.wrap(got).getLong(4);
        }
        long[] values = new long[2 * keys];
        for (int k = 0; k < keys; k++) {
            byte[] got = get.apply(t, b(String.format("k%03d", k)));
            values[2 * k] = got == null ? -1 : ByteBuffer.wrap(got).getInt(0);
            values[2 * k + 1] = got == null ? -1 : ByteBuffer.wrap(got).getLong(4);
        }
        return new long[][] {seen, values};
    }

    /**
     * Each state (writers' commits seen, keys' values) explained by one order of all commits: a key holds
     * the value of the last commit it sees that wrote it (or is absent if none did), and the order keeps each
     * writer's commits in turn. Builds the edges those imply and fails on a cycle.
     */
    private static void assertOneOrder(List<long[][]> states, int[][][] written, int writers, int commits) {
        int nodes = writers * (commits + 1);
        List<Set<Integer>> after = new ArrayList<>();
        for (int i = 0; i < nodes; i++) {
            after.add(new HashSet<>());
        }
        for (int w = 0; w < writers; w++) {
            for (int n = 2; n <= commits; n++) {
                after.get(w * (commits + 1) + n - 1).add(w * (commits + 1) + n);
            }
        }
        for (long[][] state : states) {
            long[] seen = state[0], values = state[1];
            for (int k = 0; k < values.length / 2; k++) {
                int vw = (int) values[2 * k];
                long vn = values[2 * k + 1];
                if (vw >= 0) {
                    assertTrue(vn <= seen[vw], "key " + k + " holds writer " + vw + "'s commit " + vn + ", past its own key's " + seen[vw] + ": part of a commit");
                    assertTrue(Arrays.binarySearch(written[vw][(int) vn], k) >= 0, "key " + k + " holds a commit that did not write it");
                }
                for (int w = 0; w < writers; w++) {
                    for (int n = 1; n <= seen[w]; n++) {
                        if (Arrays.binarySearch(written[w][n], k) < 0 || w == vw && n == vn) {
                            continue;
                        }
                        assertTrue(vw >= 0, "key " + k + " absent, though writer " + w + "'s commit " + n + " wrote it and is seen: part of a commit");
                        after.get(w * (commits + 1) + n).add(vw * (commits + 1) + (int) vn); // a commit seen that wrote k came before k's value
                    }
                }
            }
        }
        int[] into = new int[nodes];
        for (Set<Integer> s : after) {
            for (int j : s) {
                into[j]++;
            }
        }
        ArrayDeque<Integer> ready = new ArrayDeque<>();
        for (int i = 0; i < nodes; i++) {
            if (into[i] == 0) {
                ready.add(i);
            }
        }
        int ordered = 0;
        while (!ready.isEmpty()) {
            int i = ready.poll();
            ordered++;
            for (int j : after.get(i)) {
                if (--into[j] == 0) {
                    ready.add(j);
                }
            }
        }
        assertEquals(nodes, ordered, "no one order of the commits explains the final state and the snapshots (seed " + SEED + ")");
    }

    private static Thread daemon(Runnable r) {
        Thread th = new Thread(r);
        th.setDaemon(true);
        return th;
    }

    /**
     * A transaction stopped inside its group after its changes holds its keys' stripes: a single write to
     * another key of its table commits meanwhile, one to a key it changed waits (and nothing shows of either
     * change) until the transaction ends, and then wins. Holding the table, as before, the transaction
     * kept out the single write to the other key too.
     */
    @Test
    void aSingleWriteToAKeyAnApplyingTransactionHoldsWaitsAndWins() throws Exception {
        try (Volume v = Volume.open(largeLog(), LARGE_LOG); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE); // a SYNC write's force would wait for the open group
            CountDownLatch inside = new CountDownLatch(1), go = new CountDownLatch(1);
            AtomicReference<Thread> first = new AtomicReference<>();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread one = new Thread(() -> commit(v, t, failed, "one", "shared", "a1", "a2"));
            first.set(one);
            v.tables().onGroupChange = () -> {
                if (Thread.currentThread() == first.get()) {
                    inside.countDown();
                    await(go);
                }
            };
            one.start();
            await(inside);
            Thread other = new Thread(() -> t.put(b("c1"), b("other")));
            other.start();
            other.join(TimeUnit.SECONDS.toMillis(20));
            assertFalse(other.isAlive(), "a single write of another key waited for the transaction stopped in its group");
            assertArrayEquals(b("other"), t.get(b("c1")));
            Thread held = new Thread(() -> t.put(b("shared"), b("single")));
            held.start();
            awaitBlocked(held);
            assertNull(t.get(b("shared")), "a read saw part of the stopped transaction, or the single write");
            go.countDown();
            one.join(TimeUnit.SECONDS.toMillis(20));
            held.join(TimeUnit.SECONDS.toMillis(20));
            v.tables().onGroupChange = null;
            assertNull(failed.get(), () -> String.valueOf(failed.get()));
            assertArrayEquals(b("single"), t.get(b("shared")), "the later write wins");
            assertArrayEquals(b("one"), t.get(b("a1")));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static void commit(Volume v, Table t, AtomicReference<Throwable> failed, String value, String... keys) {
        try (WriteTransaction tx = v.begin(Durability.NONE)) {
            for (String k : keys) {
                tx.put(t, b(k), b(value));
            }
            tx.commit();
        } catch (Throwable e) {
            failed.compareAndSet(null, e);
        }
    }

    /**
     * A transaction of values for the tree that replaces a value kept out of line (a medium one, in an
     * extent) cannot apply side by side (the extent's free must go with the key's change): it undoes what
     * it did and applies holding the table. The values are all there, the old one's blocks free (the check
     * counts them), and a snapshot opened before still reads the medium value whole.
     */
    @Test
    void aTransactionThatMeetsAValueKeptOutOfLineAppliesHoldingItsTable() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            byte[] medium = new byte[5000];
            new Random(SEED).nextBytes(medium);
            t.put(b("m"), medium);
            t.put(b("z"), b("old"));
            try (Snapshot before = v.tables().snapshot()) {
                AtomicReference<Throwable> failed = new AtomicReference<>();
                commit(v, t, failed, "new", "a", "m", "z");
                assertNull(failed.get(), () -> String.valueOf(failed.get()));
                assertArrayEquals(b("new"), t.get(b("a")));
                assertArrayEquals(b("new"), t.get(b("m")));
                assertArrayEquals(b("new"), t.get(b("z")));
                assertArrayEquals(medium, before.get(t, b("m")));
                assertNull(before.get(t, b("a")));
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * Writers commit random transactions at once over two tables (SYNC, ASYNC and NONE; some rolled back):
     * each writes its stamp to every key of its own in both tables (interleaved with the other writers' in
     * key order, so they share leaves), puts its extra key on even stamps and deletes it on odd ones, and
     * writes a value to a few random shared keys in both tables. Readers meanwhile: a cursor on each table
     * shows one stamp per writer (never part of a commit), a snapshot reads each shared key equal in both
     * tables, a get never returns a stamp below one it saw. At the end: every table as the models say, the
     * shared keys equal in both, the check clean; again after a remount.
     */
    @Test
    void concurrentTransactionsOverTwoTablesMatchTheirModels() throws Exception {
        runWriters(3, 600);
    }

    @Test
    @Tag("stress")
    void concurrentTransactionsOverTwoTablesMatchTheirModelsStress() throws Exception {
        runWriters(6, 4000);
    }

    private static final int OWN = 6, SHARED = 200, PICK = 5;

    private void runWriters(int writers, int commits) throws Exception {
        MemoryDevice dev = largeLog();
        long[] stamps = new long[writers];
        try (Volume v = Volume.open(dev, LARGE_LOG); Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            Table[] both = {a, c};
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int me = w;
                threads.add(new Thread(() -> {
                    Random r = new Random(SEED * 31 + me);
                    Durability[] ds = Durability.values();
                    try {
                        for (int n = 1; n <= commits && failed.get() == null; n++) {
                            boolean rollback = r.nextInt(10) == 0;
                            try (WriteTransaction tx = v.begin(ds[r.nextInt(ds.length)])) {
                                for (Table t : both) {
                                    for (int k = 0; k < OWN; k++) {
                                        tx.put(t, own(me, k, writers), stamp(me, n));
                                    }
                                    if (n % 2 == 0) {
                                        tx.put(t, extra(me), stamp(me, n));
                                    } else {
                                        tx.delete(t, extra(me));
                                    }
                                }
                                for (int p = 0; p < PICK; p++) {
                                    byte[] k = shared(r.nextInt(SHARED));
                                    byte[] value = stamp(me, n);
                                    for (Table t : both) {
                                        tx.put(t, k, value);
                                    }
                                }
                                if (rollback) {
                                    tx.rollback();
                                    n--; // its stamp is the next commit's
                                    continue;
                                }
                                tx.commit();
                            }
                            stamps[me] = n;
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, new AssertionError("writer " + me + " (seed " + SEED + ")", e));
                    }
                }, "writer-" + w));
            }
            for (int rd = 0; rd < 2; rd++) {
                int reader = rd;
                threads.add(new Thread(() -> {
                    long[] seen = new long[writers];
                    Random r = new Random(SEED + 1000 + reader);
                    try {
                        while (!stop.get() && failed.get() == null) {
                            Table t = both[r.nextInt(2)];
                            scanWhole(t, writers, r.nextBoolean());
                            try (Snapshot s = v.tables().snapshot()) {
                                for (int i = 0; i < SHARED; i += 7) {
                                    byte[] k = shared(i);
                                    assertArrayEquals(s.get(a, k), s.get(c, k), "snapshot: a shared key differs in a and c");
                                }
                            }
                            int w = r.nextInt(writers);
                            for (int k = 0; k < OWN; k++) {
                                byte[] got = t.get(own(w, k, writers));
                                long st = got == null ? 0 : ByteBuffer.wrap(got).getLong(4);
                                if (st < seen[w]) {
                                    fail(t.name() + " key " + k + " of writer " + w + " read stamp " + st + " after stamp " + seen[w] + ": part of a commit");
                                }
                                seen[w] = st;
                            }
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, new AssertionError("reader " + reader + " (seed " + SEED + ")", e));
                    }
                }, "reader-" + rd));
            }
            threads.forEach(Thread::start);
            for (int w = 0; w < writers; w++) {
                threads.get(w).join();
            }
            stop.set(true);
            for (Thread th : threads) {
                th.join();
            }
            if (failed.get() != null) {
                throw new AssertionError(failed.get().getMessage(), failed.get());
            }
            assertModels(a, c, writers, stamps, commits);
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, LARGE_LOG); Table a = v.tables().open("a"); Table c = v.tables().open("c")) {
            assertModels(a, c, writers, stamps, commits);
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** Each writer's keys at its last stamp in both tables, its extra key there on an even one, the shared keys equal in both. */
    private static void assertModels(Table a, Table c, int writers, long[] stamps, int commits) {
        for (Table t : new Table[] {a, c}) {
            for (int w = 0; w < writers; w++) {
                assertEquals(commits, stamps[w], "writer " + w + "'s commits");
                for (int k = 0; k < OWN; k++) {
                    assertArrayEquals(stamp(w, stamps[w]), t.get(own(w, k, writers)), t.name() + " key " + k + " of writer " + w + " (seed " + SEED + ")");
                }
                byte[] e = t.get(extra(w));
                if (stamps[w] % 2 == 0) {
                    assertArrayEquals(stamp(w, stamps[w]), e, t.name() + " extra key of writer " + w);
                } else {
                    assertNull(e, t.name() + " extra key of writer " + w);
                }
            }
        }
        TreeMap<byte[], byte[]> inA = contents(a), inC = contents(c);
        assertEquals(inA.size(), inC.size(), "keys in a and c");
        for (int i = 0; i < SHARED; i++) {
            byte[] k = shared(i);
            assertArrayEquals(inA.get(k), inC.get(k), "shared key " + i + " in a and c (seed " + SEED + ")");
        }
    }

    /** A cursor over {@code t}: one stamp per writer across its own keys and its extra key (there exactly on an even stamp). */
    private static void scanWhole(Table t, int writers, boolean reverse) {
        long[] stamp = new long[writers];
        boolean[] extra = new boolean[writers];
        try (TableCursor cur = t.cursor(null, null, reverse)) {
            while (cur.next()) {
                byte[] k = cur.key();
                if (k[0] != 'o' && k[0] != 'x') {
                    continue;
                }
                ByteBuffer v = ByteBuffer.wrap(cur.value());
                int w = v.getInt();
                long s = v.getLong();
                if (k[0] == 'x') {
                    extra[w] = true;
                }
                if (stamp[w] != 0 && stamp[w] != s) {
                    fail("scan of " + t.name() + " (reverse " + reverse + "): writer " + w + "'s keys carry stamps " + stamp[w] + " and " + s + ": part of a commit");
                }
                stamp[w] = s;
            }
        }
        for (int w = 0; w < writers; w++) {
            if (stamp[w] != 0 && extra[w] != (stamp[w] % 2 == 0)) {
                fail("scan of " + t.name() + ": writer " + w + " at stamp " + stamp[w] + " with its extra key " + (extra[w] ? "there" : "missing"));
            }
        }
    }

    private static TreeMap<byte[], byte[]> contents(Table t) {
        TreeMap<byte[], byte[]> m = new TreeMap<>(Arrays::compareUnsigned);
        try (TableCursor cur = t.cursor()) {
            while (cur.next()) {
                m.put(cur.key(), cur.value());
            }
        }
        return m;
    }

    /** Writer {@code w}'s key {@code k}, interleaved with the other writers' in key order. */
    private static byte[] own(int w, int k, int writers) {
        return b(String.format("o%05d", k * writers + w));
    }

    /**
     * A transaction's change reaches the tree through its thread's buffers, and its records keep the
     * transaction's own key: batches of 1,000 random puts of 64-byte values over 20,000 keys allocate
     * under 500 bytes a put on the committing thread (the best of five rounds of ten batches, once warm).
     * Wrapping each key and each stored value in a segment, and copying each key again for the records,
     * took 1,166 bytes a put here (364 without).
     */
    @Test
    void aBatchOfPutsAllocatesUnderHalfAKilobyteAPut() throws Exception {
        double best = bytesAllocatedPerPut(20_000, 64, 1000);
        assertTrue(best < 500, "batches of 1,000 puts allocated " + best + " bytes per put, expected under 500 (seed " + SEED + ")");
    }

    /**
     * A commit copies each key's prior value (its undo's, and latest-state reads' while it applies) into a
     * spare array of its thread's last commits ({@code TableCommit#recycle}): batches of 100 puts of 1 KiB
     * values over 2,000 keys, nearly all overwrites, allocate under 700 bytes a put on the committing
     * thread. A new array for each prior value took 1,233 bytes a put here.
     */
    @Test
    void aBatchOfOneKibOverwritesReusesItsPriorValuesArrays() throws Exception {
        double best = bytesAllocatedPerPut(2_000, 1024, 100);
        assertTrue(best < 700, "batches of 100 puts of 1 KiB allocated " + best + " bytes per put, expected under 700 (seed " + SEED + ")");
    }

    /**
     * A transaction copies the values it is given off the heap ({@link StagedValues}), into buffers it gives
     * back when it ends: batches of 100 puts of 16 KiB values over 500 keys allocate under 2 KiB a put on the
     * committing thread (the best of five rounds of ten batches, once warm), where a copy on the heap was
     * 16 KiB a put; a transaction that kept its buffers would run the pool dry within the first rounds and
     * copy onto the heap again.
     */
    @Test
    void aBatchOfSixteenKibValuesCopiesThemOffTheHeap() throws Exception {
        double best = bytesAllocatedPerPut(500, 16384, 100);
        assertTrue(best < 2048, "batches of 100 puts of 16 KiB allocated " + best + " bytes per put, expected under 2,048 (seed " + SEED + ")");
    }

    /**
     * Bytes the committing thread allocates per put in batches of {@code perBatch} random puts of {@code
     * valueLength}-byte values over {@code keyCount} keys: the best of rounds 10-14 of ten batches each (warm:
     * the tree's keys all in, the engine's buffers made, the JIT done). The check is clean after, and every
     * staging buffer back.
     */
    private static double bytesAllocatedPerPut(int keyCount, int valueLength, int perBatch) throws ReflectiveOperationException {
        VolumeOptions options = LARGE_LOG.withCacheBytes(64L << 20);
        Object mx = ManagementFactory.getThreadMXBean();
        Method allocated = Class.forName("com.sun.management.ThreadMXBean").getMethod("getCurrentThreadAllocatedBytes");
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096)) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options); Table t = v.tables().create("t")) {
                byte[][] keys = new byte[keyCount][];
                for (int i = 0; i < keys.length; i++) {
                    keys[i] = b(String.format("key%012d", i));
                }
                byte[] value = new byte[valueLength];
                Random random = new Random(SEED);
                double best = Double.MAX_VALUE;
                int idle = Tables.stagingAvailable();
                for (int round = 0; round < 15; round++) {
                    long from = (Long) allocated.invoke(mx);
                    for (int batch = 0; batch < 10; batch++) {
                        try (WriteTransaction tx = v.begin(Durability.NONE)) {
                            for (int i = 0; i < perBatch; i++) {
                                value[0] = (byte) i;
                                tx.put(t, keys[random.nextInt(keys.length)], value);
                            }
                            tx.commit();
                        }
                    }
                    if (round >= 10) {
                        best = Math.min(best, ((Long) allocated.invoke(mx) - from) / (10.0 * perBatch));
                    }
                }
                System.out.println("batches of " + perBatch + " puts of " + valueLength + " bytes: " + best + " bytes allocated per put");
                assertEquals(idle, Tables.stagingAvailable(), "every staging buffer back");
                CheckReport report = v.namespace().check();
                assertTrue(report.clean(), "seed " + SEED + ":\n" + report);
                return best;
            }
        }
    }

    private static byte[] extra(int w) {
        return b(String.format("x%03d", w));
    }

    private static byte[] shared(int i) {
        return b(String.format("s%04d", i));
    }

    private static byte[] stamp(int w, long n) {
        return ByteBuffer.allocate(12).putInt(w).putLong(n).array();
    }

    private static void await(CountDownLatch latch) {
        try {
            assertTrue(latch.await(20, TimeUnit.SECONDS), "never let go on");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    /** Waits (20 s at most) until {@code th} is blocked (waiting) or done. */
    private static void awaitBlocked(Thread th) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (th.getState() != Thread.State.WAITING && th.getState() != Thread.State.BLOCKED && th.getState() != Thread.State.TERMINATED) {
            assertTrue(System.nanoTime() < deadline, "the second transaction still running: " + th.getState());
            Thread.onSpinWait();
        }
    }
}
