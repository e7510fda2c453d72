package dev.ferrite.dir;

import java.util.Arrays;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.JournalOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A table's block reserve under deletes of values of about 1 KiB (three to a leaf, so nearly every delete
 * merges a leaf and frees it into the reserve): once past its high mark the reserve goes back to its fill
 * mark in one spill, a batch of blocks to the free-space trees in one transaction, not a transaction per
 * block; and churn crashed at sampled points (subsets of the next epoch's writes, torn writes) leaves each
 * recovered volume checking clean, with exactly the free blocks it had before the table was made once its
 * keys are deleted and the table dropped: no block leaked or handed out twice.
 */
@ExtendWith(TestSeed.class)
class TableReserveTest {
    private static final long SEED = TestSeed.get(23);
    private static final int KEYS = 2_000;
    /** Checkpoints every 64 KiB of changes, so that the deletes span many flushes. */
    private static final VolumeOptions OPTIONS = VolumeFixtures.OPTIONS.withJournal(JournalOptions.defaults().withPushThreshold(64 << 10));

    static byte[] key(int i) {
        return TableTest.b(String.format("key-%08d", i));
    }

    static byte[] value(int i) {
        byte[] v = new byte[1000];
        Arrays.fill(v, (byte) i);
        v[0] = (byte) (i >>> 8);
        return v;
    }

    private static int reserve(Volume v, Table t) {
        int area = v.namespace().records.rec(t.inode.ino) + InodeFormat.INLINE;
        return v.namespace().records.readRecord(t.inode.ino, (b, r) -> DirEntryFormat.reserveCount(b, area));
    }

    private static int[] shuffled(Random rnd) {
        return shuffled(rnd, KEYS);
    }

    private static int[] shuffled(Random rnd, int keys) {
        int[] order = new int[keys];
        for (int i = 0; i < keys; i++) {
            order[i] = i;
        }
        for (int i = keys - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            int x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        return order;
    }

    private static void fill(Table t) {
        fill(t, KEYS);
    }

    private static void fill(Table t, int keys) {
        for (int i = 0; i < keys; i++) {
            t.withDurability(Durability.NONE).put(key(i), value(i));
        }
    }

    @Test
    void aReservePastItsHighMarkSpillsToItsFillMarkInOneGo() {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096)) {
            Volume.format(dev, VolumeFixtures.OPTIONS);
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
                try (Table keep = v.tables().create("keep")) {
                    keep.put(key(0), value(0)); // the catalog, before the count
                }
                long freeBefore = v.statfs().freeBlocks();
                try (Table t = v.tables().create("t")) {
                    fill(t);
                    int before = reserve(v, t), spills = 0;
                    for (int i : shuffled(rnd)) {
                        assertTrue(t.withDurability(Durability.NONE).delete(key(i)), "seed " + SEED + ": delete " + i);
                        int now = reserve(v, t);
                        assertTrue(now <= DirContents.RESERVE_HIGH + t.tree().height() + 2, "seed " + SEED + ": reserve " + now);
                        if (now < before) {
                            spills++;
                            // the spill came before the delete, whose merge may then add what it claimed
                            assertTrue(now <= DirContents.RESERVE_FILL + t.tree().height() + 2, "seed " + SEED + " delete " + i
                                    + ": the reserve went from " + before + " to " + now + " blocks, not back to its fill mark "
                                    + DirContents.RESERVE_FILL);
                        }
                        before = now;
                    }
                    assertTrue(spills > 0, "seed " + SEED + ": the deletes spilled the reserve");
                }
                v.tables().drop("t");
                assertEquals(freeBefore, v.statfs().freeBlocks(), "seed " + SEED + ": the dropped table's blocks are free again");
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    /** {@code v}'s check clean, else fails naming {@code where}. */
    private static void assertClean(Volume v, String where) {
        CheckReport report = v.namespace().check();
        assertTrue(report.clean(), where + ": " + report);
    }

    /** Drops table "t" of {@code v} (emptied): the free blocks are {@code freeBefore} again and the check clean. */
    private static void assertDroppedExactly(Volume v, long freeBefore, String where) {
        v.tables().drop("t");
        assertEquals(freeBefore, v.statfs().freeBlocks(), where + ": the free blocks once the table is emptied and dropped");
        assertClean(v, where + ", after the drop");
    }

    /** The groups (a bit each) of the blocks in {@code t}'s reserve. */
    private static long reserveGroups(Volume v, Table t) {
        int area = v.namespace().records.rec(t.inode.ino) + InodeFormat.INLINE;
        return v.namespace().records.readRecord(t.inode.ino, (b, r) -> {
            long groups = 0;
            for (int k = DirEntryFormat.reserveCount(b, area) - 1; k >= 0; k--) {
                groups |= 1L << v.geometry().agOfBlock(DirEntryFormat.reserveEntry(b, area, k));
            }
            return groups;
        });
    }

    /**
     * A table larger than its group, its leaves in several groups: the leaves its deletes' merges free
     * come back to the reserve from all of them, and each spill still takes the reserve back to its fill
     * mark, freeing every group's blocks in one transaction (their AGFs in group order). A spill that
     * freed one group's blocks a transaction (as it did) left the others' in the reserve, so that the
     * next spill came a few merges later: 3.8 blocks a spill instead of 9 for 100,000 deletes of 1 KiB
     * values in four groups. Crashed at sampled points of the deletes, each recovered volume checks clean
     * and has every block back once the table is emptied and dropped.
     */
    @Test
    void aSpillFreesTheBlocksOfEveryGroupInOneTransaction() {
        int keys = 6_000;
        Random rnd = new Random(SEED + 3);
        MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096); // four groups of about 2,000 blocks
        long freeBefore = formatWithTable(dev, keys);
        int[] order = shuffled(rnd, keys);
        try (RecordingDevice rec = RecordingDevice.wrap(dev)) {
            int firstFlush;
            try (Volume v = Volume.open(rec, OPTIONS); Table t = v.tables().open("t")) {
                v.sync();
                firstFlush = rec.flushCount() - 1;
                int before = reserve(v, t), spills = 0, across = 0;
                long groups = reserveGroups(v, t);
                for (int k = 0; k < keys; k++) {
                    int i = order[k];
                    assertTrue(t.withDurability(Durability.NONE).delete(key(i)), "seed " + (SEED + 3) + ": delete " + i);
                    int now = reserve(v, t);
                    if (now < before) {
                        spills++;
                        across += Long.bitCount(groups) > 1 ? 1 : 0;
                        // the spill came before the delete, whose merges may then add a leaf and its parent
                        assertTrue(now <= DirContents.RESERVE_FILL + 2, "seed " + (SEED + 3) + " delete " + i + ": the reserve of blocks in groups "
                                + Long.toBinaryString(groups) + " went from " + before + " to " + now + " blocks, not back to its fill mark "
                                + DirContents.RESERVE_FILL);
                    }
                    before = now;
                    groups = reserveGroups(v, t);
                    if (k % 500 == 499) {
                        v.sync();
                    }
                }
                assertTrue(across > spills / 2, "seed " + (SEED + 3) + ": " + across + " of " + spills + " spills met blocks of several groups");
            }
            assertSampledCrashesRecover(rec, rnd, SEED + 3, 6, firstFlush, rec.flushCount(), keys, freeBefore);
        }
    }

    /**
     * A spill of a table's reserve runs beside a single write inside the table (one with a claim of 4
     * blocks for a split, as a put holds to its commit): deletes fill the reserve past its high mark with
     * the leaves their merges free, and the next delete spills it and finishes while that writer stays
     * inside, leaving it the usable blocks it may take. A spill that kept the writers out
     * ({@link Inode#lockExclusive}), as tables' did, waits for the writer to leave, which it does only
     * after that delete.
     */
    @Test
    void aSpillRunsBesideAWriterInside() throws Exception {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096)) {
            Volume.format(dev, VolumeFixtures.OPTIONS);
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t0 = v.tables().create("t")) {
                Table t = t0.withDurability(Durability.NONE);
                fill(t);
                int[] order = shuffled(rnd);
                int deleted = 0;
                int claim = v.namespace().dirs.enter(t.inode, 4, false);
                try {
                    while (reserve(v, t) <= DirContents.RESERVE_HIGH) {
                        assertTrue(deleted < KEYS - 1, "seed " + SEED + ": the deletes' merges never filled the reserve");
                        assertTrue(t.delete(key(order[deleted++])));
                    }
                    int usable = v.namespace().records.readRecord(t.inode.ino, (b, r) -> DirAllocator.usable(v.cache(), b,
                            r + InodeFormat.INLINE, DirEntryFormat.RESERVE_CAPACITY));
                    byte[] next = key(order[deleted++]);
                    java.util.concurrent.FutureTask<Boolean> delete = new java.util.concurrent.FutureTask<>(() -> t.delete(next));
                    Thread.ofPlatform().start(delete);
                    try {
                        assertTrue(delete.get(20, java.util.concurrent.TimeUnit.SECONDS));
                    } catch (java.util.concurrent.TimeoutException e) {
                        throw new AssertionError("seed " + SEED + ": the spill waited for the writer inside the table", e);
                    }
                    assertTrue(reserve(v, t) <= DirContents.RESERVE_HIGH, "seed " + SEED + ": the reserve was not spilled");
                    int after = v.namespace().records.readRecord(t.inode.ino, (b, r) -> DirAllocator.usable(v.cache(), b,
                            r + InodeFormat.INLINE, DirEntryFormat.RESERVE_CAPACITY));
                    assertTrue(after >= Math.min(usable, DirContents.RESERVE_FILL), "seed " + SEED
                            + ": the spill took usable blocks the writer inside may need: " + usable + " then " + after);
                } finally {
                    t.inode.leave(claim);
                }
                assertEquals(KEYS - deleted, t.count(), "seed " + SEED);
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    /**
     * A refill of a table's reserve runs beside a single write inside the table (one with a claim of 4
     * blocks, as a put holds to its commit): puts on another thread split leaves (three 1,000-byte values
     * to a leaf) until the reserve has been refilled several times, and finish while that writer stays
     * inside. A refill that kept the writers out ({@link Inode#lockExclusive}), as tables' did, waits for
     * the writer to leave, which it does only after those puts; with two threads writing, each refill
     * waited so for the other's change and commit.
     */
    @Test
    void aRefillRunsBesideAWriterInside() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096)) {
            Volume.format(dev, VolumeFixtures.OPTIONS);
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t0 = v.tables().create("t")) {
                Table t = t0.withDurability(Durability.NONE);
                int claim = v.namespace().dirs.enter(t.inode, 4, false);
                int[] refills = {0};
                try {
                    java.util.concurrent.FutureTask<Void> puts = new java.util.concurrent.FutureTask<>(() -> {
                        int before = reserve(v, t);
                        for (int i = 0; i < 300; i++) {
                            t.put(key(i), value(i));
                            int now = reserve(v, t);
                            refills[0] += now > before ? 1 : 0; // puts only take blocks: a rise is a refill
                            before = now;
                        }
                        return null;
                    });
                    Thread.ofPlatform().start(puts);
                    try {
                        puts.get(20, java.util.concurrent.TimeUnit.SECONDS);
                    } catch (java.util.concurrent.TimeoutException e) {
                        throw new AssertionError("a refill waited for the writer inside the table", e);
                    }
                } finally {
                    t.inode.leave(claim);
                }
                assertTrue(refills[0] >= 3, "the puts refilled the reserve " + refills[0] + " times");
                assertEquals(300, t.count());
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    /**
     * Formats {@code dev} with a table "keep" of one key (the catalog, before the count) and a table "t"
     * of {@code keys} values; returns the free blocks before "t" was made.
     */
    private static long formatWithTable(MemoryDevice dev, int keys) {
        Volume.format(dev, VolumeFixtures.OPTIONS);
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            try (Table keep = v.tables().create("keep")) {
                keep.put(key(0), value(0));
            }
            long freeBefore = v.statfs().freeBlocks();
            try (Table t = v.tables().create("t")) {
                fill(t, keys);
            }
            return freeBefore;
        }
    }

    @Test
    void churnCrashedAnywhereLeavesTheSpaceExact() {
        Random rnd = new Random(SEED + 1);
        MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096);
        long freeBefore = formatWithTable(dev, KEYS);
        int[] order = shuffled(rnd);
        try (RecordingDevice rec = RecordingDevice.wrap(dev)) {
            int firstFlush;
            try (Volume v = Volume.open(rec, OPTIONS); Table t = v.tables().open("t")) {
                v.sync();
                firstFlush = rec.flushCount() - 1;
                for (int k = 0; k < KEYS; k++) {
                    int i = order[k];
                    t.withDurability(Durability.NONE).delete(key(i));
                    if (k % 3 == 0 && k < KEYS / 2) {
                        t.withDurability(Durability.NONE).put(key(i), value(i + 1)); // back, changed: churn
                    }
                    if (k % 200 == 199) {
                        v.sync();
                    }
                }
            }
            assertSampledCrashesRecover(rec, rnd, SEED + 1, 8, firstFlush, rec.flushCount(), KEYS, freeBefore);
        }
    }

    /**
     * {@code states} crash states of {@code rec} sampled between its flushes {@code firstFlush} and
     * {@code lastFlush} (subsets of an epoch's writes, torn writes): each recovered volume checks clean,
     * each of the {@code keys} keys absent or holding one of its values (a churn's {@code value(i + 1)}
     * too), and once they are deleted and the table dropped the free blocks are {@code freeBefore}.
     */
    private static void assertSampledCrashesRecover(RecordingDevice rec, Random rnd, long seed, int states, int firstFlush, int lastFlush,
                                                    int keys, long freeBefore) {
        for (int s = 0; s < states; s++) {
            RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, s, firstFlush, lastFlush);
            String where = "seed " + seed + ", crash " + state;
            try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, OPTIONS)) {
                assertClean(v, where);
                try (Table t = v.tables().open("t")) {
                    for (int i = 0; i < keys; i++) {
                        byte[] got = t.get(key(i));
                        if (got != null && !Arrays.equals(got, value(i))) {
                            assertArrayEquals(value(i + 1), got, where + ": key " + i);
                        }
                        t.withDurability(Durability.NONE).delete(key(i));
                    }
                    assertNull(t.get(key(keys / 2)), where);
                }
                assertDroppedExactly(v, freeBefore, where);
            }
        }
    }

    /** The heights of every group's free-space trees, summed: a root split in any of them raises it. */
    private static int freeSpaceHeights(Volume v) {
        int h = 0;
        for (int g = 0; g < v.geometry().agCount(); g++) {
            h += v.group(g).space.bno.height() + v.group(g).space.cnt.height();
        }
        return h;
    }

    /**
     * The spill that splits a free-space root: the deletes' leaves, returned a batch per spill in random
     * order, fragment the group's free space until one batch raises its by-block or by-size tree (what
     * {@code FreeSpace.ROOT_SPLIT_ITEMS} reserves for). That delete alone in its epoch, crashed at sampled
     * points of it (subsets, torn writes), recovers to a volume that checks clean, holds the key or not
     * and every other key as before, and has every block back once the table is emptied and dropped.
     * Groups of 8,192 blocks and 8,000 keys: enough leaves that their random frees leave more free
     * extents than one free-space leaf holds.
     */
    @Test
    void aSpillThatRaisesAFreeSpaceTreeRecoversExactly() {
        int keys = 8_000;
        Random rnd = new Random(SEED + 2);
        MemoryDevice dev = MemoryDevice.create(4 * VolumeFixtures.BLOCKS, 4096);
        long freeBefore = formatWithTable(dev, keys);
        int[] order = shuffled(rnd, keys);
        try (RecordingDevice rec = RecordingDevice.wrap(dev)) {
            int raisedAt = -1, firstFlush = -1, lastFlush = -1;
            try (Volume v = Volume.open(rec, OPTIONS); Table t = v.tables().open("t")) {
                int heights = freeSpaceHeights(v), reserve = reserve(v, t);
                for (int k = 0; k < keys && raisedAt < 0; k++) {
                    v.sync();
                    int flush = rec.flushCount() - 1;
                    assertTrue(t.withDurability(Durability.NONE).delete(key(order[k])), "seed " + (SEED + 2) + ": delete " + order[k]);
                    int h = freeSpaceHeights(v), r = reserve(v, t);
                    if (h > heights && r < reserve) {
                        raisedAt = k;
                        firstFlush = flush;
                        v.sync();
                        lastFlush = rec.flushCount();
                    }
                    heights = h;
                    reserve = r;
                }
                assertTrue(raisedAt >= 0, "seed " + (SEED + 2) + ": no spill raised a free-space tree in " + keys + " deletes");
                VolumeFixtures.assertChecked(v.namespace());
            }
            for (int s = 0; s < 6; s++) {
                RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, s, firstFlush, lastFlush);
                String where = "seed " + (SEED + 2) + ", the spill at delete " + raisedAt + ", crash " + state;
                try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, OPTIONS)) {
                    assertClean(v, where);
                    try (Table t = v.tables().open("t")) {
                        for (int k = 0; k < keys; k++) {
                            int i = order[k];
                            byte[] got = t.get(key(i));
                            if (k < raisedAt) {
                                assertNull(got, where + ": key " + i + " deleted before the spill's epoch");
                            } else if (k > raisedAt || got != null) {
                                assertArrayEquals(value(i), got, where + ": key " + i);
                            }
                            t.withDurability(Durability.NONE).delete(key(i));
                        }
                    }
                    assertDroppedExactly(v, freeBefore, where);
                }
            }
        }
    }
}
