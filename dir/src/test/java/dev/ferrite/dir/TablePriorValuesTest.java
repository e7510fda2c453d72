package dev.ferrite.dir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The prior values a transaction's commit copies (for its undo and for latest-state reads while it
 * applies) go into the committing thread's spare arrays of its last commits ({@code TableCommit#recycle})
 * once nothing can read them: reads racing such commits (gets, gets into a segment, snapshots' gets) never
 * return another key's value nor go back from a commit they saw. The allocation itself:
 * {@code TableTransactionsTest.aBatchOfOneKibOverwritesReusesItsPriorValuesArrays}.
 */
@ExtendWith(TestSeed.class)
class TablePriorValuesTest {
    private static final long SEED = TestSeed.get(17);

    /**
     * A cursor opened while a commit applies reads that commit's prior values after it ended: the commit
     * must keep them from its thread's next commit, which would otherwise copy its own prior values into
     * the same arrays. Reusing them whenever no snapshot was open (the cursor's count ignored), it failed
     * "key 0's owner ==> expected: <0> but was: <15>": the cursor read another key's value.
     */
    @Test
    void aCursorOpenedWhileACommitAppliedKeepsReadingItsPriorValuesAfterTheNextCommit() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            int keys = 16;
            for (int k = 0; k < keys; k++) {
                t.put(key(k), value(k, 0));
            }
            Semaphore changed = new Semaphore(0), go = new Semaphore(0);
            AtomicBoolean hold = new AtomicBoolean();
            v.tables().onGroupChange = () -> {
                if (hold.getAndSet(false)) {
                    changed.release();
                    go.acquireUninterruptibly();
                }
            };
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Semaphore second = new Semaphore(0);
            Thread committer = new Thread(() -> { // one thread: one engine, whose spares each commit reuses
                try {
                    commitStamp(v, t, keys, 1); // its prior values (stamp 0) become spares
                    hold.set(true);
                    commitStamp(v, t, keys, 2); // stopped after its first change; its prior values are stamp 1's
                    second.acquireUninterruptibly();
                    commitStamp(v, t, keys, 3); // copies its prior values (stamp 2) into spares
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            committer.start();
            TableCursor c;
            try {
                assertTrue(changed.tryAcquire(30, TimeUnit.SECONDS), "the second commit never came to its first change");
                c = t.cursor(); // while the second commit applies: shows neither it nor any after it
            } finally {
                go.release();
            }
            try (TableCursor cursor = c) {
                second.release();
                committer.join(30_000);
                assertNull(failed.get());
                int k = 0;
                while (cursor.next()) {
                    ByteBuffer b = ByteBuffer.wrap(cursor.value());
                    assertEquals(k, b.getInt(), "key " + k + "'s owner");
                    assertEquals(1, b.getLong(), "key " + k + "'s stamp through the cursor");
                    k++;
                }
                assertEquals(keys, k);
            }
            assertEquals(3, ByteBuffer.wrap(t.get(key(0))).getLong(4));
        }
    }

    /** Puts stamp {@code stamp} to keys 0 to {@code keys - 1} of {@code t} in one transaction. */
    private static void commitStamp(Volume v, Table t, int keys, long stamp) {
        try (WriteTransaction tx = v.begin(Durability.NONE)) {
            for (int k = 0; k < keys; k++) {
                tx.put(t, key(k), value(k, stamp));
            }
            tx.commit();
        }
    }

    @Test
    void readsRacingCommitsThatReuseTheirArraysSeeOnlyTheirKeysValuesInCommitOrder() throws Exception {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            int keys = 64, commits = 6000;
            for (int k = 0; k < keys; k++) {
                t.put(key(k), value(k, 0));
            }
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<String> failure = new AtomicReference<>();
            Runnable reader = () -> {
                SplittableRandom r = new SplittableRandom(SEED + Thread.currentThread().threadId());
                long[] seen = new long[keys];
                byte[] out = new byte[200];
                while (!stop.get() && failure.get() == null) {
                    int k = r.nextInt(keys);
                    byte[] got;
                    switch (r.nextInt(64) == 0 ? 2 : r.nextInt(2)) { // few snapshots: while one is open commits reuse nothing
                        case 0 -> got = t.get(key(k));
                        case 1 -> {
                            int n = t.get(java.lang.foreign.MemorySegment.ofArray(key(k)), java.lang.foreign.MemorySegment.ofArray(out));
                            got = Arrays.copyOf(out, n);
                        }
                        default -> {
                            try (Snapshot s = v.tables().snapshot()) { // a snapshot's get reads the applying commits' records too
                                got = s.get(t, key(k));
                            }
                        }
                    }
                    ByteBuffer b = ByteBuffer.wrap(got);
                    int owner = b.getInt();
                    long stamp = b.getLong();
                    if (owner != k || got.length != 100) {
                        failure.compareAndSet(null, "key " + k + " read a value of key " + owner + " (" + got.length + " bytes, stamp "
                                + stamp + ", seed " + SEED + ")");
                    } else if (stamp < seen[k]) {
                        failure.compareAndSet(null, "key " + k + " read stamp " + stamp + " after stamp " + seen[k] + " (seed " + SEED + ")");
                    }
                    seen[k] = Math.max(seen[k], stamp);
                }
            };
            Thread[] readers = {new Thread(reader, "reader-0"), new Thread(reader, "reader-1"), new Thread(reader, "reader-2")};
            for (Thread th : readers) {
                th.start();
            }
            SplittableRandom r = new SplittableRandom(SEED);
            try {
                for (int c = 1; c <= commits && failure.get() == null; c++) {
                    try (WriteTransaction tx = v.begin(Durability.NONE)) {
                        int first = r.nextInt(keys);
                        for (int i = 0; i < 16; i++) { // every key of a commit its stamp: each prior value one of the last commit's
                            int k = (first + i * 3) % keys;
                            tx.put(t, key(k), value(k, c));
                        }
                        tx.commit();
                    }
                }
            } finally {
                stop.set(true);
                for (Thread th : readers) {
                    th.join();
                }
            }
            assertNull(failure.get());
            assertEquals(keys, t.count());
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), "seed " + SEED + ":\n" + report);
        }
    }

    private static byte[] key(int k) {
        return String.format("k%05d", k).getBytes();
    }

    /** Key {@code k}'s value of commit {@code stamp}: the key, the stamp, padding to 100 bytes. */
    private static byte[] value(int k, long stamp) {
        return ByteBuffer.allocate(100).putInt(k).putLong(stamp).array();
    }
}
