package dev.ferrite.dir;

import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Extent values whose device writes the log makes ({@link TableExtentWriteBack}): written in runs before
 * the checkpoint that names them (every crash state finds a key's value whole or the key as before), a
 * freed value's pending write landing before its blocks are taken again, and the budget past which a put
 * writes its value itself.
 */
@ExtendWith(TestSeed.class)
class TableExtentWriteBackTest {
    private static final long SEED = TestSeed.get(17);
    private static final int LENGTH = 16 * 1024;

    private static byte[] value(long seed) {
        byte[] v = new byte[LENGTH];
        new Random(seed).nextBytes(v);
        return v;
    }

    /**
     * Single puts of 16 KiB values committed NONE, then a sync: the log writes them, in fewer writes than
     * values, mostly straight from their frames (a fresh cache makes them side by side), and every crash after any flush since (with part of the next epoch's writes landed, or one
     * torn) recovers a prefix of the puts, each value exact (a read whose CRC does not match fails) and
     * the check clean.
     */
    @Test
    void theLogWritesPendingValuesInRunsBeforeTheCheckpointThatNamesThem() {
        recoverPuts(VolumeFixtures.OPTIONS, 4);
    }

    /** As above with a budget of 4 values: the puts that find it spent write the values pending. */
    @Test
    void valuesWrittenByPutsAtTheBudgetAreOnTheDeviceBeforeTheCheckpointThatNamesThem() {
        recoverPuts(VolumeFixtures.OPTIONS.withDataCacheBytes(64 * 4096L), 48);
    }

    /** {@code puts} single puts and a sync between, written in at most {@code writes} writes, recovered from every flush on. */
    private static void recoverPuts(VolumeOptions options, int writes) {
        Random rnd = new Random(SEED);
        int puts = 48, firstFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            try (Volume v = Volume.open(rec, options); Table t = v.tables().create("t")) {
                t.withDurability(Durability.NONE);
                t.put(b("first"), value(-1)); // the feature and the catalog, before the count
                v.sync();
                firstFlush = rec.flushCount();
                long[] before = v.tables().extents.writeBack.counts();
                for (int i = 0; i < puts; i++) {
                    t.put(b("k" + i), value(i));
                    if (i == puts / 2) {
                        v.sync(); // a checkpoint between: some values written by it, the rest by the last
                    }
                }
                assertTrue(v.tables().extents.writeBack.pendingBlocks() > 0, "the values after the first sync are pending");
                v.sync();
                long[] after = v.tables().extents.writeBack.counts();
                assertEquals(0, v.tables().extents.writeBack.pendingBlocks());
                assertEquals(puts, after[0] - before[0], "values written");
                assertTrue(after[1] - before[1] <= writes, "the writes for " + puts + " values: " + (after[1] - before[1]));
                long blocks = (long) puts * LENGTH / 4096;
                assertTrue(after[2] - before[2] <= blocks / 4, // the frames a fresh cache makes lie in order: most write from there
                        "blocks copied into the staging buffer: " + (after[2] - before[2]) + " of " + blocks);
            }
            assertCrashesRecoverAPrefix(rec, options, firstFlush, puts, rnd);
        }
    }

    /**
     * Every crash after any flush from {@code firstFlush} on (two samples each: part of the next epoch's
     * writes landed, or one torn) recovers a prefix of keys {@code k0..k(puts-1)}, each value exact (a read
     * whose CRC does not match fails), and checks clean.
     */
    private static void assertCrashesRecoverAPrefix(RecordingDevice rec, VolumeOptions options, int firstFlush, int puts, Random rnd) {
        int flushes = rec.flushCount();
        for (int s = 0; s < 2 * (flushes - firstFlush + 1); s++) {
            RecordingDevice.CrashState state = TableCrashTest.sampleAfter(rec, firstFlush - 1 + s / 2, rnd);
            String where = "seed " + SEED + ", crash " + state;
            try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, options)) {
                CheckReport report = v.namespace().check();
                assertTrue(report.clean(), where + ": " + report);
                try (Table t = v.tables().open("t")) {
                    int i = 0;
                    for (; i < puts; i++) {
                        byte[] got = t.get(b("k" + i)); // a CorruptionException if its blocks lack its bytes
                        if (got == null) {
                            break;
                        }
                        assertArrayEquals(value(i), got, where + ": k" + i);
                    }
                    for (int j = i; j < puts; j++) {
                        assertNull(t.get(b("k" + j)), where + ": k" + j + " after the missing k" + i);
                    }
                }
            }
        }
    }

    /**
     * A load of single puts past the background mark ({@code behindBlocks}: 512 blocks, 128 values, with a
     * 16 MiB data cache) is written by the background thread while no checkpoint asks for it, within the
     * budget (1,024 blocks), so that the sync after it has little left to write; every crash after any
     * flush since recovers a prefix of the puts, each value exact, the check clean.
     */
    @Test
    void aLoadPastTheBackgroundMarkIsWrittenBeforeACheckpointAsksForIt() throws Exception {
        VolumeOptions options = VolumeFixtures.OPTIONS.withDataCacheBytes(16L << 20);
        int puts = 200, firstFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            try (Volume v = Volume.open(rec, options); Table t = v.tables().create("t")) {
                t.withDurability(Durability.NONE);
                t.put(b("first"), value(-1));
                v.sync();
                firstFlush = rec.flushCount();
                TableExtentWriteBack wb = v.tables().extents.writeBack;
                assertEquals(512, wb.behindBlocks);
                long[] before = wb.counts();
                long checkpoints = v.journalStats().checkpoints();
                for (int i = 0; i < puts; i++) {
                    t.put(b("k" + i), value(i));
                }
                long deadline = System.nanoTime() + 10_000_000_000L;
                // the 128th value's room crosses the mark (512 blocks of 4-block values): the background write
                // takes at least the 127 registered before it
                while (wb.counts()[0] - before[0] < 127 && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                assertTrue(wb.counts()[0] - before[0] >= 127, (wb.counts()[0] - before[0]) + " values written in the background");
                assertTrue(v.valueWriteStats().inBackground() >= 127, "the volume's count of them: " + v.valueWriteStats());
                assertEquals(0, v.valueWriteStats().atBudget(), "none by puts at the budget (" + wb.budgetBlocks + " blocks)");
                assertEquals(checkpoints, v.journalStats().checkpoints(), "no checkpoint asked for them");
                v.sync();
                assertEquals(0, wb.pendingBlocks());
                assertEquals(puts, wb.counts()[0] - before[0], "values written, each once");
            }
            assertCrashesRecoverAPrefix(rec, options, firstFlush, puts, new Random(SEED));
        }
    }

    /**
     * Values whose frames a free handed back in reverse order (each value's blocks in frames that do not
     * lie in order) are copied into the staging buffer for their write, and those after them in frames
     * made side by side are written from their frames, in one write of the pending values: every value
     * reads back exact from the device after a remount.
     */
    @Test
    void valuesInScatteredFramesAreCopiedAndThoseSideBySideWrittenFromTheirFrames() {
        MemoryDevice dev = VolumeFixtures.formatted();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            for (int i = 0; i < 8; i++) {
                t.put(b("old" + i), value(100 + i));
            }
            v.sync();
            for (int i = 0; i < 8; i++) {
                assertTrue(t.delete(b("old" + i))); // written: their frames go back to the free list now
            }
            v.sync();
            TableExtentWriteBack wb = v.tables().extents.writeBack;
            long[] before = wb.counts();
            for (int i = 0; i < 16; i++) {
                t.put(b("k" + i), value(i)); // the first 8 take the freed frames, last freed first
            }
            v.sync();
            long[] after = wb.counts();
            assertEquals(16, after[0] - before[0], "values written");
            assertEquals(8 * LENGTH / 4096, after[2] - before[2], "blocks copied: those of the values in freed frames");
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            for (int i = 0; i < 16; i++) {
                assertArrayEquals(value(i), t.get(b("k" + i)), "k" + i + " read from the device");
            }
            assertTrue(v.namespace().check().clean());
        }
    }

    /**
     * Values that each fill a hole between values kept (as overwrites fill the holes of the values they
     * replaced), none next to another on the device: each is written from its frames, a write of its own,
     * with nothing copied into the staging buffer (a copy would have made the same writes); every value
     * reads back exact from the device after a remount.
     */
    @Test
    void valuesAloneOnTheDeviceAreWrittenFromTheirFrames() {
        MemoryDevice dev = VolumeFixtures.formatted();
        int holes = 12;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            for (int i = 0; i < 2 * holes + 1; i++) {
                t.put(b("old" + i), value(100 + i));
            }
            v.sync();
            for (int i = 1; i < 2 * holes; i += 2) {
                assertTrue(t.delete(b("old" + i))); // holes of a value's length between those kept
            }
            v.sync();
            v.sync(); // the frees durable: the holes usable
            TableExtentWriteBack wb = v.tables().extents.writeBack;
            long[] before = wb.counts();
            for (int i = 0; i < holes; i++) {
                t.put(b("k" + i), value(i)); // each takes a hole: the smallest free extent that holds it
            }
            v.sync();
            long[] after = wb.counts();
            assertEquals(holes, after[0] - before[0], "values written");
            assertEquals(holes, after[1] - before[1], "writes: one a value, none next to another");
            assertEquals(0, after[2] - before[2], "blocks copied into the staging buffer");
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            for (int i = 0; i < holes; i++) {
                assertArrayEquals(value(i), t.get(b("k" + i)), "k" + i + " read from the device");
            }
            for (int i = 0; i < 2 * holes + 1; i += 2) {
                assertArrayEquals(value(100 + i), t.get(b("old" + i)), "old" + i);
            }
            assertTrue(v.namespace().check().clean());
        }
    }

    /**
     * A value deleted while its write is pending: the write still lands (before the delete is durable, so
     * before its blocks can be taken again), its frames go, and a value that takes the blocks afterwards
     * reads back exact from the device after a remount.
     */
    @Test
    void aFreedValuesPendingWriteNeverLandsOverTheValueThatTakesItsBlocks() {
        MemoryDevice dev = VolumeFixtures.formatted();
        long block;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            t.put(b("a"), value(1));
            TableValueFormat.Extent x = TableValueFormat.readExtent(java.lang.foreign.MemorySegment.ofArray(t.storedValue(b("a"))));
            block = x.block();
            assertEquals(LENGTH / 4096, v.tables().extents.writeBack.pendingBlocks(), "a's write is pending");
            assertTrue(t.delete(b("a")));
            assertEquals(LENGTH / 4096, v.tables().extents.writeBack.pendingBlocks(), "a's write still goes ahead");
            v.sync(); // a written, then the free durable
            assertEquals(0, v.tables().extents.writeBack.pendingBlocks());
            assertEquals(0, v.tables().extents.cached.cachedBlocks(), "the freed value's frames are dropped once written");
            v.sync(); // its blocks no longer busy
            t.put(b("b"), value(2));
            TableValueFormat.Extent y = TableValueFormat.readExtent(java.lang.foreign.MemorySegment.ofArray(t.storedValue(b("b"))));
            assertEquals(block, y.block(), "b takes a's blocks");
            v.sync();
            t.put(b("c"), value(3)); // another checkpoint with a write of pending values
            v.sync();
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertNull(t.get(b("a")));
            assertArrayEquals(value(2), t.get(b("b")), "read from the device: the cache starts empty");
            assertArrayEquals(value(3), t.get(b("c")));
        }
    }

    /**
     * With a data cache of 64 frames (a budget of 16 pending blocks), a transaction of 20 puts of 16 KiB: the
     * put that finds the budget spent writes the pending values (4 at a time, adjacent: one write each time)
     * and leaves its own to the log, so no more than 16 blocks are ever pinned; all read back exact, before
     * and after a remount.
     */
    @Test
    void aPutAtTheBudgetWritesThePendingValuesInRuns() {
        MemoryDevice dev = VolumeFixtures.formatted();
        VolumeOptions options = VolumeFixtures.OPTIONS.withDataCacheBytes(64 * 4096L);
        try (Volume v = Volume.open(dev, options); Table t = v.tables().create("t")) {
            TableExtentWriteBack wb = v.tables().extents.writeBack;
            assertEquals(16, wb.budgetBlocks);
            try (WriteTransaction tx = v.begin(Durability.NONE)) {
                for (int i = 0; i < 20; i++) {
                    tx.put(t, b("k" + i), value(i));
                    assertTrue(wb.pendingBlocks() <= 16, "pinned after put " + i + ": " + wb.pendingBlocks());
                }
                tx.commit();
            }
            assertEquals(16, wb.counts()[0], "values written by puts at the budget");
            assertEquals(4, wb.counts()[1], "their writes");
            for (int i = 0; i < 20; i++) {
                assertArrayEquals(value(i), t.get(b("k" + i)), "k" + i);
            }
            v.sync();
            assertEquals(20, wb.counts()[0], "values written, the last 4 by the log");
            ValueWriteStats stats = v.valueWriteStats();
            assertEquals(new ValueWriteStats(20, 0, 16, 5, wb.counts()[2], 20L * LENGTH, stats.writeNanos()), stats, "the counts the volume reports");
            assertTrue(stats.writeNanos() > 0, "time spent in the writes: " + stats);
        }
        try (Volume v = Volume.open(dev, options); Table t = v.tables().open("t")) {
            for (int i = 0; i < 20; i++) {
                assertArrayEquals(value(i), t.get(b("k" + i)), "k" + i);
            }
        }
    }
}
