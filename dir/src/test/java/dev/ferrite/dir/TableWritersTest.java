package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Single writes to one table apply side by side ({@code Tables#single}): proven by two writes meeting
 * inside their applies; then many writers putting and deleting their own and shared keys of one table,
 * with write transactions among them and snapshots opened and read throughout, against models; and
 * concurrent single writes crashed, each SYNC one present once acknowledged.
 *
 * <p>{@code -Dferrite.seed=N} fixes each writer's sequence of operations, not how the threads interleave.
 */
@ExtendWith(TestSeed.class)
class TableWritersTest {
    private static final long SEED = TestSeed.get(17);
    private static final int OWN_KEYS = 400, SHARED_KEYS = 64;

    /**
     * A single write finding the log without space waits for it with the table left. This thread holds the
     * log's space in open transactions; with the write waiting, a writer that holds its reservation (as a
     * tree reserve's refill does) takes the table exclusively. Waiting entered, the write waits for space
     * only that writer can give back, and the writer for the write to leave: it never gets in.
     */
    @Test
    void aSingleWriteWaitsForLogSpaceWithTheTableLeft() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (int i = 0; i < 200; i++) {
                t.put(TableTest.b("k" + i), TableTest.b("v" + i));
            }
            assertTrue(LogFullWriter.getsIn(v, t.inode, first -> { }, () -> t.put(TableTest.b("k1"), TableTest.b("new"))),
                    "a writer holding log space waited for a put that waited for log space inside the table");
            assertArrayEquals(TableTest.b("new"), t.get(TableTest.b("k1")));
        }
    }

    /**
     * Two single writes to one table, each waiting inside its apply for the other to get there too. With
     * the table's writes applied one at a time, the second never gets in while the first waits: the
     * first's wait times out.
     */
    @Test
    void twoSingleWritesToOneTableApplyAtOnce() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (int i = 0; i < 200; i++) {
                t.put(TableTest.b("k" + i), TableTest.b("v" + i));
            }
            v.tables().onApply = meetInsideApply("the other single write to the table never came into its apply beside this one");
            byte[] put = TableTest.b("k1");
            byte[] deleted = keyOfAnotherStripe(t, put);
            List<Future<?>> writes = new ArrayList<>();
            try (ExecutorService pool = Executors.newFixedThreadPool(2)) {
                writes.add(pool.submit(() -> t.put(put, TableTest.b("one"))));
                writes.add(pool.submit(() -> t.delete(deleted)));
            }
            v.tables().onApply = null;
            for (Future<?> f : writes) {
                f.get();
            }
            assertArrayEquals(TableTest.b("one"), t.get(put));
            assertNull(t.get(deleted));
            assertEquals(199, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A drop racing with two writers of the table (its handle open): a put that began after the drop
     * returned is refused (TABLE_CLOSED), and once a writer was refused it is refused from then on; the
     * writers learn of the drop from the table's inode in memory ({@link Inode#unlinked}), not from its
     * record. A table made next, in the dropped table's inode if it is free by then, takes puts.
     */
    @Test
    void aDropRacingWithWritersRefusesEveryPutAfterIt() throws Exception {
        Random rnd = new Random(SEED);
        for (int round = 0; round < 20; round++) {
            String where = "seed " + SEED + ", round " + round;
            try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS)) {
                Table t = v.tables().create("t").withDurability(Durability.NONE);
                long ino = t.inode.ino;
                AtomicBoolean dropped = new AtomicBoolean();
                int dropAfter = rnd.nextInt(2_000);
                List<Future<Integer>> writers = new ArrayList<>();
                try (ExecutorService pool = Executors.newFixedThreadPool(2)) {
                    for (int w = 0; w < 2; w++) {
                        int me = w;
                        writers.add(pool.submit(() -> {
                            boolean refused = false;
                            int taken = 0;
                            for (int i = 0, last = Integer.MAX_VALUE; i < last; i++) { // to a few puts past the first refusal
                                assertTrue(i < 1_000_000, where + ": no put was refused");
                                boolean after = dropped.get();
                                try {
                                    t.put(TableTest.b("w" + me + "-" + i), new byte[64]);
                                    assertFalse(after, where + ": a put begun after the drop returned was taken");
                                    assertFalse(refused, where + ": a put was taken after one was refused");
                                    taken++;
                                } catch (TableException e) {
                                    assertEquals(TableException.Kind.TABLE_CLOSED, e.kind(), where + ": " + e.getMessage());
                                    last = refused ? last : i + 100;
                                    refused = true;
                                }
                            }
                            return taken;
                        }));
                    }
                    while (t.count() < dropAfter && writers.stream().noneMatch(Future::isDone)) {
                        Thread.onSpinWait();
                    }
                    v.tables().drop("t");
                    dropped.set(true);
                }
                long taken = 0;
                for (Future<Integer> f : writers) {
                    taken += f.get();
                }
                assertEquals(taken, t.count(), where + ": the dropped table holds every put taken");
                t.close(); // the last handle: the table is freed
                try (Table u = v.tables().create("u")) {
                    u.put(TableTest.b("k"), TableTest.b("v")); // refused (TABLE_CLOSED) if it took the dropped table's word for it
                    assertArrayEquals(TableTest.b("v"), u.get(TableTest.b("k")), where + ": table u, inode " + u.inode.ino + " (t's was " + ino + ")");
                }
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    /**
     * A write transaction of one key's change is a single write: it comes into its apply beside a single
     * write to another key of the table that waits there for it, SYNC, ASYNC and NONE alike, and is durable
     * as its durability says. Applied as a transaction (the table held exclusively) it never gets in: the
     * single write's wait times out.
     */
    @Test
    void aTransactionOfOneKeyAppliesBesideSingleWrites() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (int i = 0; i < 200; i++) {
                t.put(TableTest.b("k" + i), TableTest.b("v" + i));
            }
            for (Durability d : Durability.values()) {
                v.tables().onApply = meetInsideApply("the " + d + " transaction of one key never came into its apply beside the single write");
                byte[] single = TableTest.b("k1");
                byte[] inTx = keyOfAnotherStripe(t, single);
                long forcesBefore = v.journalStats().forces();
                List<Future<?>> writes = new ArrayList<>();
                try (ExecutorService pool = Executors.newFixedThreadPool(2)) {
                    writes.add(pool.submit(() -> t.put(single, TableTest.b("single-" + d))));
                    writes.add(pool.submit(() -> {
                        try (WriteTransaction tx = v.begin(d)) {
                            tx.put(t, inTx, TableTest.b("tx-" + d));
                            tx.commit();
                        }
                    }));
                }
                v.tables().onApply = null;
                for (Future<?> f : writes) {
                    f.get();
                }
                assertArrayEquals(TableTest.b("single-" + d), t.get(single));
                assertArrayEquals(TableTest.b("tx-" + d), t.get(inTx));
                if (d == Durability.SYNC) {
                    assertTrue(v.journalStats().forces() > forcesBefore, "the SYNC transaction forced the log");
                }
            }
            assertEquals(200, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A single write to a key waits inside its apply while a second write to the same key starts: the
     * second must wait outside until the first is done (the key's stripe), or the prior values snapshots
     * read could be recorded out of version order. Without the stripes the second comes in.
     */
    @Test
    void twoSingleWritesToOneKeyApplyOneAtATime() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            byte[] k = TableTest.b("key");
            CountDownLatch firstInside = new CountDownLatch(1), release = new CountDownLatch(1);
            AtomicInteger inside = new AtomicInteger(), most = new AtomicInteger();
            v.tables().onApply = () -> {
                most.accumulateAndGet(inside.incrementAndGet(), Math::max);
                firstInside.countDown();
                await(release);
                inside.decrementAndGet();
            };
            Thread first = new Thread(() -> t.put(k, TableTest.b("first")));
            first.start();
            assertTrue(firstInside.await(20, TimeUnit.SECONDS), "the first write never came into its apply");
            Thread second = new Thread(() -> t.put(k, TableTest.b("second")));
            second.start();
            awaitBlocked(List.of(second)); // waiting for the stripe, or (wrongly) inside its apply
            int both = most.get();
            release.countDown();
            first.join();
            second.join();
            v.tables().onApply = null;
            assertEquals(1, both, "a second write to the key came into its apply while the first was inside");
            assertArrayEquals(TableTest.b("second"), t.get(k));
        }
    }

    /**
     * Sixteen single writes held inside their applies, or waiting to come in, at once: those inside have
     * claimed no more blocks than the tree's reserve can give, so that their splits cannot run it dry,
     * and some had to wait. Admitting every writer, the claims pass the reserve.
     */
    @Test
    void writersInsideTheirAppliesNeverClaimMoreThanTheReserveHolds() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (int i = 0; i < 500; i++) {
                t.put(TableTest.b("k" + i), new byte[40]);
            }
            CountDownLatch release = new CountDownLatch(1);
            AtomicInteger inside = new AtomicInteger();
            v.tables().onApply = () -> {
                inside.incrementAndGet();
                await(release);
            };
            List<Thread> writers = new ArrayList<>();
            for (int w = 0; w < 16; w++) {
                byte[] k = TableTest.b("new-" + w);
                writers.add(new Thread(() -> t.put(k, new byte[40])));
            }
            writers.forEach(Thread::start);
            awaitBlocked(writers);
            long claimed = t.inode.writers() & Inode.CLAIMS;
            long usable = v.namespace().dirs.room(t.inode, false) >>> 32;
            int in = inside.get();
            release.countDown();
            for (Thread w : writers) {
                w.join();
            }
            v.tables().onApply = null;
            assertTrue(claimed <= usable, in + " writers inside claimed " + claimed + " blocks of a reserve of " + usable);
            assertTrue(in >= 2 && in < 16, in + " of 16 writers inside at once");
            assertEquals(516, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A write transaction that holds its table (one deleting a range, whose keys are found as it applies)
     * waits until the single write inside its apply has left (its undo, its reads of medium values and the
     * reserve's upkeep rely on no other change), and single writes wait while it applies. Taking only the
     * table's lock, the transaction applies while the single write is still inside. (Transactions of
     * keys alone apply beside single writes: {@code TableTransactionsTest}.)
     */
    @Test
    void aWriteTransactionHoldingItsTableWaitsForTheSingleWritesInside() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            CountDownLatch singleInside = new CountDownLatch(1), release = new CountDownLatch(1);
            v.tables().onApply = () -> {
                singleInside.countDown();
                await(release);
            };
            Thread single = new Thread(() -> t.put(TableTest.b("single"), TableTest.b("1")));
            single.start();
            assertTrue(singleInside.await(20, TimeUnit.SECONDS), "the single write never came into its apply");
            v.tables().onApply = null;
            Thread group = new Thread(() -> {
                try (WriteTransaction tx = v.begin(Durability.NONE)) {
                    tx.put(t, TableTest.b("group-a"), TableTest.b("2"));
                    tx.put(t, TableTest.b("group-b"), TableTest.b("3"));
                    tx.deleteRange(t, TableTest.b("r"), TableTest.b("s")); // none there: it only makes the commit hold the table
                    tx.commit();
                }
            });
            group.start();
            awaitBlocked(List.of(group));
            boolean appliedBeside = t.containsKey(TableTest.b("group-a"));
            release.countDown();
            single.join();
            group.join();
            assertFalse(appliedBeside, "the write transaction applied while a single write was inside its apply");
            assertEquals(3, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A snapshot sees every write that ended before it opened, though a write that took a version before
     * them is still applying: it waits for that one rather than taking a version below it. The case the
     * writers above met: with a snapshot open, write X (held inside its apply) and then write P take
     * versions, P ends; the snapshot closes, and write F takes the fast path (no version, no record) and
     * ends. A snapshot opened now at the version below X's leaves P out but shows F, written after it.
     */
    @Test
    void aSnapshotSeesEveryWriteThatEndedBeforeItOpened() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Tables tables = v.tables();
            byte[] x = TableTest.b("x"), p = TableTest.b("p"), f = TableTest.b("f");
            CountDownLatch xInside = new CountDownLatch(1), release = new CountDownLatch(1);
            Snapshot first = tables.snapshot();
            Thread writerX = new Thread(() -> t.put(x, TableTest.b("x")));
            tables.onApply = () -> {
                if (Thread.currentThread() == writerX) {
                    xInside.countDown();
                    await(release);
                }
            };
            writerX.start();
            assertTrue(xInside.await(20, TimeUnit.SECONDS), "write x never came into its apply");
            t.put(p, TableTest.b("p")); // a version after x's
            first.close();
            assertFalse(tables.versions.anyOpen());
            t.put(f, TableTest.b("f")); // the fast path
            Snapshot[] second = new Snapshot[1];
            Thread opener = new Thread(() -> second[0] = tables.snapshot());
            opener.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (opener.getState() != Thread.State.TERMINATED && opener.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(System.nanoTime() < deadline, "the snapshot neither opened nor waited");
                Thread.onSpinWait();
            }
            release.countDown();
            writerX.join();
            opener.join();
            tables.onApply = null;
            try (Snapshot s = second[0]) {
                assertArrayEquals(TableTest.b("f"), s.get(t, f));
                assertArrayEquals(TableTest.b("p"), s.get(t, p), "the snapshot misses write p, which ended before it opened (write f, after p, is in it)");
            }
        }
    }

    /**
     * A table whose inode record no longer holds a tree (damage) refuses a single write with a
     * CorruptionException naming the record's block, rather than asking for a reserve step that an
     * inline record never needs, for ever.
     */
    @Test
    void aTableRecordWithoutATreeIsCorruptionForASingleWrite() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(TableTest.b("k"), TableTest.b("v"));
            Namespace ns = v.namespace();
            try (Txn txn = Txn.begin(v.cache(), 2)) {
                Buffer b = ns.records.lockRecord(txn, t.inode.ino);
                int rec = ns.records.rec(t.inode.ino);
                InodeFormat.setFork(b.data(), rec, InodeFormat.FORK_INLINE);
                txn.log(b, rec, InodeFormat.INLINE);
                txn.commit();
            }
            CorruptionException e = assertTimeoutPreemptively(java.time.Duration.ofSeconds(20),
                    () -> assertThrows(CorruptionException.class, () -> t.put(TableTest.b("k2"), TableTest.b("v"))));
            assertTrue(e.getMessage().contains("holds no tree"), e.getMessage());
        }
    }

    /** Waits (20 s at most) for {@code latch}, inside a write's apply. */
    /** A hook for {@code Tables#onApply}: two applies wait for each other inside; failing with {@code never} if the other does not come. */
    private static Runnable meetInsideApply(String never) {
        CyclicBarrier both = new CyclicBarrier(2);
        return () -> {
            try {
                both.await(20, TimeUnit.SECONDS);
            } catch (TimeoutException | BrokenBarrierException e) {
                throw new AssertionError(never, e);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        };
    }

    /** A key "kN" of {@code t} from k150 up whose stripe is not {@code key}'s: one stripe's writes are one at a time. */
    private static byte[] keyOfAnotherStripe(Table t, byte[] key) {
        int other = 150;
        while (KeyStripes.of(t.inode.ino, MemorySegment.ofArray(TableTest.b("k" + other))) == KeyStripes.of(t.inode.ino, MemorySegment.ofArray(key))) {
            other++;
        }
        return TableTest.b("k" + other);
    }

    private static void await(CountDownLatch latch) {
        try {
            assertTrue(latch.await(20, TimeUnit.SECONDS), "the test never let the write go on");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    /** Waits (20 s at most) until each of {@code threads} is blocked (parked in a lock, a latch or a backoff) or done. */
    private static void awaitBlocked(List<Thread> threads) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!threads.stream().allMatch(th -> th.getState() == Thread.State.WAITING || th.getState() == Thread.State.TIMED_WAITING
                || th.getState() == Thread.State.TERMINATED)) {
            assertTrue(System.nanoTime() < deadline, "writers still running: " + threads.stream().map(Thread::getState).toList());
            Thread.onSpinWait();
        }
    }

    @Test
    void writersOfOneTableMatchTheirModelsAndSnapshotsHoldStill() throws Exception {
        writeAndSnapshot(SEED, 4, 1500);
    }

    @Test
    @Tag("stress")
    void eightWritersOfOneTableLonger() throws Exception {
        writeAndSnapshot(SEED, 8, 20000);
    }

    // ------------------------------------------------------------------ writers with snapshots

    /** One operation of a writer: on its own key (a model replays these), or on a shared key. */
    private record Op(int kind, int key, byte[] value, int[] txKeys, byte[][] txValues) {
        static final int PUT = 0, DELETE = 1, PUT_IF_ABSENT = 2, TX = 3, SHARED_PUT = 4, SHARED_DELETE = 5;

        boolean own() {
            return kind <= TX;
        }

        @Override
        public String toString() {
            return switch (kind) {
                case PUT -> "put " + key;
                case DELETE -> "delete " + key;
                case PUT_IF_ABSENT -> "putIfAbsent " + key;
                case TX -> "transaction over " + Arrays.toString(txKeys);
                case SHARED_PUT -> "shared put " + key;
                default -> "shared delete " + key;
            };
        }
    }

    private static byte[] ownKey(int w, int k) {
        return TableTest.b(String.format("o%02d-%04d", w, k));
    }

    private static byte[] sharedKey(int k) {
        return TableTest.b(String.format("s%03d", k));
    }

    private static byte[] counterKey(int w) {
        return TableTest.b(String.format("c%02d", w));
    }

    /** Writer {@code w}'s operations, fixed by the seed alone. */
    private static List<Op> ops(long seed, int w, int n) {
        Random r = new Random(seed * 31 + w);
        List<Op> ops = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long tag = (long) w << 32 | i;
            int k = r.nextInt(OWN_KEYS), p = r.nextInt(100);
            if (p < 30) {
                int s = r.nextInt(SHARED_KEYS);
                ops.add(p < 22 ? new Op(Op.SHARED_PUT, s, TableConcurrencyTest.value(sharedKey(s), tag, r), null, null)
                        : new Op(Op.SHARED_DELETE, s, null, null, null));
            } else if (p < 33) {
                int[] keys = {r.nextInt(OWN_KEYS), r.nextInt(OWN_KEYS), r.nextInt(OWN_KEYS)};
                byte[][] values = new byte[3][];
                for (int j = 0; j < 3; j++) {
                    values[j] = r.nextInt(4) == 0 ? null : TableConcurrencyTest.value(ownKey(w, keys[j]), tag, r);
                }
                ops.add(new Op(Op.TX, 0, null, keys, values));
            } else if (p < 60) {
                ops.add(new Op(Op.DELETE, k, null, null, null));
            } else if (p < 68) {
                ops.add(new Op(Op.PUT_IF_ABSENT, k, TableConcurrencyTest.value(ownKey(w, k), tag, r), null, null));
            } else {
                ops.add(new Op(Op.PUT, k, TableConcurrencyTest.value(ownKey(w, k), tag, r), null, null));
            }
        }
        return ops;
    }

    /** Applies own operation {@code op} of writer {@code w} to its model; returns what the table call must answer. */
    private static boolean apply(TreeMap<byte[], byte[]> model, int w, Op op) {
        switch (op.kind()) {
            case Op.PUT -> model.put(ownKey(w, op.key()), op.value());
            case Op.DELETE -> {
                return model.remove(ownKey(w, op.key())) != null;
            }
            case Op.PUT_IF_ABSENT -> {
                return model.putIfAbsent(ownKey(w, op.key()), op.value()) == null;
            }
            case Op.TX -> {
                for (int j = 0; j < op.txKeys().length; j++) {
                    byte[] k = ownKey(w, op.txKeys()[j]);
                    if (op.txValues()[j] == null) {
                        model.remove(k);
                    } else {
                        model.put(k, op.txValues()[j]);
                    }
                }
            }
            default -> throw new IllegalArgumentException("not an own operation: " + op);
        }
        return true;
    }

    /**
     * Writers put, delete and putIfAbsent their own keys (checking each answer against their model,
     * every own operation followed by a put of the writer's count of them), and put and delete shared
     * keys; one own operation in thirty is a write transaction of three keys. Meanwhile a reader opens
     * snapshots: in each, every writer's keys are its model after the count the snapshot shows, or one
     * more (the operation after the count's put may be applied or not), every shared value is whole, and a
     * second read of the snapshot, after writers went on, finds the same. At the end the table holds each
     * writer's model, each shared key holds some writer's last write of it, and the volume checks clean,
     * also after a remount.
     */
    private static void writeAndSnapshot(long seed, int writers, int n) throws Exception {
        MemoryDevice dev = VolumeFixtures.formatted();
        List<List<Op>> ops = new ArrayList<>();
        for (int w = 0; w < writers; w++) {
            ops.add(ops(seed, w, n));
        }
        List<TreeMap<byte[], byte[]>> finals = new ArrayList<>();
        String where = "seed " + seed;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Table table = v.tables().create("t");
            AtomicBoolean done = new AtomicBoolean();
            AtomicInteger snapshots = new AtomicInteger();
            List<Future<TreeMap<byte[], byte[]>>> running = new ArrayList<>();
            Future<?> reader;
            try (ExecutorService pool = Executors.newFixedThreadPool(writers + 1)) {
                for (int w = 0; w < writers; w++) {
                    int id = w;
                    running.add(pool.submit(() -> write(v, id, ops.get(id), seed)));
                }
                reader = pool.submit(() -> {
                    try {
                        while (!done.get()) {
                            checkSnapshot(v, table, ops, where);
                            snapshots.incrementAndGet();
                        }
                    } finally {
                        done.set(true);
                    }
                    return null;
                });
                try {
                    for (Future<TreeMap<byte[], byte[]>> f : running) {
                        finals.add(f.get());
                    }
                } finally {
                    done.set(true);
                }
            }
            reader.get();
            assertTrue(snapshots.get() > 0, where + ": no snapshot was read");
            checkFinal(table, ops, finals, where);
            VolumeFixtures.assertChecked(v.namespace());
            table.close();
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table table = v.tables().open("t")) {
            checkFinal(table, ops, finals, where + ", remounted");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** Writer {@code w}'s run, through a handle of its own; returns its model of its own keys. */
    private static TreeMap<byte[], byte[]> write(Volume v, int w, List<Op> ops, long seed) {
        TreeMap<byte[], byte[]> model = new TreeMap<>(Arrays::compareUnsigned);
        Random r = new Random(seed * 97 + w);
        try (Table t = v.tables().open("t")) {
            int own = 0;
            for (int i = 0; i < ops.size(); i++) {
                Op op = ops.get(i);
                t.withDurability(r.nextInt(8) == 0 ? Durability.ASYNC : Durability.NONE);
                String where = "seed " + seed + ": writer " + w + " operation " + i + " " + op;
                boolean expected = op.own() ? apply(model, w, op) : true;
                switch (op.kind()) {
                    case Op.PUT -> t.put(ownKey(w, op.key()), op.value());
                    case Op.DELETE -> assertEquals(expected, t.delete(ownKey(w, op.key())), where);
                    case Op.PUT_IF_ABSENT -> assertEquals(expected, t.putIfAbsent(ownKey(w, op.key()), op.value()), where);
                    case Op.TX -> {
                        try (WriteTransaction tx = v.begin(Durability.NONE)) {
                            for (int j = 0; j < op.txKeys().length; j++) {
                                byte[] k = ownKey(w, op.txKeys()[j]);
                                if (op.txValues()[j] == null) {
                                    tx.delete(t, k);
                                } else {
                                    tx.put(t, k, op.txValues()[j]);
                                }
                            }
                            tx.commit();
                        }
                    }
                    case Op.SHARED_PUT -> t.put(sharedKey(op.key()), op.value());
                    case Op.SHARED_DELETE -> t.delete(sharedKey(op.key()));
                    default -> throw new IllegalStateException(where);
                }
                if (op.own()) {
                    t.put(counterKey(w), ByteBuffer.allocate(4).putInt(0, ++own).array());
                }
            }
        }
        return model;
    }

    /** A snapshot read twice, with writers going on between, against the writers' models. */
    private static void checkSnapshot(Volume v, Table table, List<List<Op>> ops, String where) {
        try (Snapshot s = v.tables().snapshot()) {
            TreeMap<byte[], byte[]> first = scan(s, table);
            for (int w = 0; w < ops.size(); w++) {
                byte[] count = first.get(counterKey(w));
                int c = count == null ? 0 : ByteBuffer.wrap(count).getInt();
                TreeMap<byte[], byte[]> mine = new TreeMap<>(first.subMap(ownKey(w, 0), true, ownKey(w, OWN_KEYS), false));
                TreeMap<byte[], byte[]> model = new TreeMap<>(Arrays::compareUnsigned);
                int replayed = 0, applied = 0;
                for (int i = 0; i < ops.get(w).size() && applied < c; i++) {
                    Op op = ops.get(w).get(i);
                    if (op.own()) {
                        apply(model, w, op);
                        applied++;
                    }
                    replayed = i + 1;
                }
                String at = where + ": snapshot " + s.version() + ", writer " + w + " at count " + c;
                if (!sameEntries(model, mine)) {
                    int next = replayed;
                    while (next < ops.get(w).size() && !ops.get(w).get(next).own()) {
                        next++;
                    }
                    assertTrue(next < ops.get(w).size(), at + ": its keys differ from its model, with no operation after");
                    String atCount = diff(model, mine, s, table);
                    apply(model, w, ops.get(w).get(next));
                    assertTrue(sameEntries(model, mine), at + ": its keys are neither its model at the count (" + atCount
                            + ") nor one operation later, " + ops.get(w).get(next) + " (" + diff(model, mine, s, table) + ")");
                }
            }
            for (Map.Entry<byte[], byte[]> e : first.subMap(sharedKey(0), true, sharedKey(SHARED_KEYS), false).entrySet()) {
                TableConcurrencyTest.checkValue("t", e.getKey(), e.getValue());
            }
            TreeMap<byte[], byte[]> again = scan(s, table);
            assertTrue(sameEntries(first, again), where + ": snapshot " + s.version() + " changed while it was open");
        }
    }

    /** The first few keys where {@code found} differs from {@code model}, each with what the snapshot's get says. */
    private static String diff(TreeMap<byte[], byte[]> model, TreeMap<byte[], byte[]> found, Snapshot s, Table table) {
        List<String> out = new ArrayList<>();
        TreeMap<byte[], byte[]> keys = new TreeMap<>(Arrays::compareUnsigned);
        keys.putAll(model);
        keys.putAll(found);
        for (byte[] k : keys.keySet()) {
            byte[] m = model.get(k), f = found.get(k);
            if (!Arrays.equals(m, f) && out.size() < 4) {
                out.add(new String(k) + ": model " + tagOf(m) + ", scan " + tagOf(f) + ", get " + tagOf(s.get(table, k)));
            }
        }
        return out.toString();
    }

    private static String tagOf(byte[] v) {
        if (v == null) {
            return "absent";
        }
        long tag = ByteBuffer.wrap(v).getLong(0);
        return "w" + (tag >>> 32) + "#" + (int) tag;
    }

    private static TreeMap<byte[], byte[]> scan(Snapshot s, Table table) {
        TreeMap<byte[], byte[]> m = new TreeMap<>(Arrays::compareUnsigned);
        TableCursor c = s.cursor(table, null, null, false);
        while (c.next()) {
            m.put(c.key(), c.value());
        }
        return m;
    }

    private static boolean sameEntries(TreeMap<byte[], byte[]> a, TreeMap<byte[], byte[]> b) {
        if (a.size() != b.size()) {
            return false;
        }
        var ia = a.entrySet().iterator();
        var ib = b.entrySet().iterator();
        while (ia.hasNext()) {
            var x = ia.next();
            var y = ib.next();
            if (!Arrays.equals(x.getKey(), y.getKey()) || !Arrays.equals(x.getValue(), y.getValue())) {
                return false;
            }
        }
        return true;
    }

    /** Each writer's keys are its model; each shared key holds the last write of it by one of the writers. */
    private static void checkFinal(Table t, List<List<Op>> ops, List<TreeMap<byte[], byte[]>> finals, String where) {
        TreeMap<byte[], byte[]> all = new TreeMap<>(Arrays::compareUnsigned);
        TableCursor c = t.cursor();
        while (c.next()) {
            all.put(c.key(), c.value());
        }
        for (int w = 0; w < ops.size(); w++) {
            TreeMap<byte[], byte[]> mine = new TreeMap<>(all.subMap(ownKey(w, 0), true, ownKey(w, OWN_KEYS), false));
            assertTrue(sameEntries(finals.get(w), mine), where + ": writer " + w + "'s keys are not its model: "
                    + mine.size() + " keys, the model " + finals.get(w).size());
        }
        for (int k = 0; k < SHARED_KEYS; k++) {
            Map<Integer, byte[]> last = new HashMap<>(); // writer -> its last write of the key (null: a delete)
            for (int w = 0; w < ops.size(); w++) {
                for (Op op : ops.get(w)) {
                    if (!op.own() && op.key() == k) {
                        last.put(w, op.value());
                    }
                }
            }
            byte[] found = all.get(sharedKey(k));
            boolean someone = last.isEmpty() && found == null;
            for (byte[] candidate : last.values()) {
                someone |= Arrays.equals(candidate, found);
            }
            assertTrue(someone, where + ": shared key " + k + " holds " + (found == null ? "nothing" : found.length + " bytes")
                    + ", no writer's last write of it");
        }
    }

    // ------------------------------------------------------------------ crashes

    @Test
    void concurrentSingleWritesAreDurableOnceAcknowledgedAndWholeAfterCrashes() throws Exception {
        crashConcurrentWrites(SEED, 4, 60, 6, 10);
    }

    @Test
    @Tag("stress")
    void concurrentSingleWritesCrashedLonger() throws Exception {
        crashConcurrentWrites(SEED, 8, 400, 30, 60);
    }

    /**
     * Writers put new keys of their own into one table and delete ones they put before (not SYNC: a SYNC
     * put's key stays, to be looked for), each write SYNC, ASYNC or NONE. At the flush after which a SYNC
     * write returned (and at every later one sampled), each acknowledged SYNC put is there with its value
     * and each acknowledged SYNC delete's key is gone; at sampled crash points (a flush with some of the
     * next epoch's writes, torn or not, or inside an epoch) every key present holds a whole value of a
     * put made, and the volume checks clean.
     */
    private static void crashConcurrentWrites(long seed, int writers, int perWriter, int ackedStates, int sampled) throws Exception {
        Random rnd = new Random(seed);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            List<long[]> acked = Collections.synchronizedList(new ArrayList<>()); // {writer, i, 0 put / 1 delete, flush index}
            int firstFlush;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                v.tables().create("t").close();
                v.sync();
                firstFlush = rec.flushCount() - 1;
                List<Future<?>> done = new ArrayList<>();
                try (ExecutorService pool = Executors.newFixedThreadPool(writers)) {
                    for (int w = 0; w < writers; w++) {
                        int id = w;
                        done.add(pool.submit(() -> {
                            Random r = new Random(seed * 31 + id);
                            List<Integer> deletable = new ArrayList<>();
                            try (Table t = v.tables().open("t")) {
                                for (int i = 0; i < perWriter; i++) {
                                    Durability d = Durability.values()[r.nextInt(3)];
                                    t.withDurability(d);
                                    if (!deletable.isEmpty() && r.nextInt(3) == 0) {
                                        int k = deletable.remove(r.nextInt(deletable.size()));
                                        assertTrue(t.delete(crashKey(id, k)));
                                        if (d == Durability.SYNC) {
                                            acked.add(new long[] {id, k, 1, rec.flushCount() - 1});
                                        }
                                    } else {
                                        byte[] k = crashKey(id, i);
                                        t.put(k, TableConcurrencyTest.value(k, i, r));
                                        if (d == Durability.SYNC) {
                                            acked.add(new long[] {id, i, 0, rec.flushCount() - 1});
                                        } else {
                                            deletable.add(i);
                                        }
                                    }
                                }
                            }
                            return null;
                        }));
                    }
                }
                for (Future<?> f : done) {
                    f.get();
                }
            }
            assertTrue(acked.size() > writers * perWriter / 6, "SYNC writes: " + acked.size());
            for (CrashTest.Crash crash : CrashTest.ackedAndSampled(rec, rnd, acked.stream().map(a -> (int) a[3]).toList(),
                    ackedStates, sampled, firstFlush)) {
                RecordingDevice.CrashState state = crash.state();
                String where = "seed " + seed + ", crash " + state;
                try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS);
                     Table t = v.tables().open("t")) {
                    TableCursor c = t.cursor();
                    while (c.next()) {
                        TableConcurrencyTest.checkValue("t", c.key(), c.value());
                    }
                    int flush = crash.afterFlush();
                    synchronized (acked) {
                        for (long[] a : acked) {
                            if (a[3] <= flush) {
                                byte[] k = crashKey((int) a[0], (int) a[1]);
                                String what = where + ": the acknowledged SYNC " + (a[2] == 0 ? "put" : "delete") + " of " + new String(k);
                                if (a[2] == 0) {
                                    assertTrue(t.containsKey(k), what + " is lost");
                                } else {
                                    assertFalse(t.containsKey(k), what + " is lost");
                                }
                            }
                        }
                    }
                    CheckReport report = v.namespace().check();
                    assertTrue(report.clean(), where + ": " + report);
                } catch (RuntimeException e) {
                    fail(where + ": " + e, e);
                }
            }
        }
    }

    /**
     * A SYNC transaction of one key that changes nothing (a delete of an absent key, an insert-if-absent of a
     * present one) is still a sync: the commits made before it, here with {@code NONE}, survive a crash
     * right after it returns, as they do after a SYNC group that changes nothing.
     */
    @Test
    void aSyncTransactionOfOneKeyThatChangesNothingMakesEarlierCommitsDurable() throws Exception {
        for (int shape = 0; shape < 2; shape++) {
            try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
                int flush;
                try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                    v.sync();
                    t.put(TableTest.b("present"), TableTest.b("1"));
                    v.sync();
                    try (WriteTransaction tx = v.begin(Durability.NONE)) {
                        tx.put(t, TableTest.b("a"), TableTest.b("2"));
                        tx.put(t, TableTest.b("b"), TableTest.b("3"));
                        tx.commit();
                    }
                    try (WriteTransaction tx = v.begin(Durability.SYNC)) {
                        if (shape == 0) {
                            tx.delete(t, TableTest.b("absent"));
                        } else {
                            tx.putIfAbsent(t, TableTest.b("present"), TableTest.b("9"));
                        }
                        tx.commit();
                    }
                    flush = rec.flushCount() - 1;
                }
                try (MemoryDevice crashed = rec.materialize(rec.crashAfterFlush(flush)); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS);
                     Table t = v.tables().open("t")) {
                    String where = (shape == 0 ? "a delete of an absent key" : "an insert-if-absent of a present key");
                    assertTrue(t.containsKey(TableTest.b("a")) && t.containsKey(TableTest.b("b")),
                            "the NONE commit before a SYNC transaction of " + where + " is lost");
                }
            }
        }
    }

    private static byte[] crashKey(int w, int i) {
        return TableTest.b(String.format("w%02d-%05d", w, i));
    }
}
