package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Drops a big table (its tree is emptied a key per transaction, then taken down a block per transaction)
 * and crashes at sampled points of the drop ({@link CrashTest#sampledState}: after a flush with a random
 * subset of the next epoch's writes, some torn, or anywhere inside an epoch). Every recovered volume checks
 * clean; the table is gone, or (the crash came before the unlink was durable) still there whole; and
 * once the mount's orphan recovery has run (and a table still there is dropped again) the volume has
 * exactly the free blocks it had before the table was made. A second table, untouched, stays whole. The
 * same with a handle held open over the drop, the space freed by its last close, and a crash with the
 * handle still open (the unlink synced): the mount frees it.
 */
@ExtendWith(TestSeed.class)
class TableDropCrashTest {
    private static final long SEED = TestSeed.get(17);
    private static final String BIG = "big", KEEP = "keep";
    private static final int KEEP_KEYS = 100;
    /** Checkpoints every 64 KiB of changes, so that the drop spans many and a crash can stop it part way. */
    private static final VolumeOptions OPTIONS = VolumeFixtures.OPTIONS.withJournal(JournalOptions.defaults().withPushThreshold(64 << 10));

    @Test
    void aDropCrashedAnywhereIsFinishedByTheMount() {
        dropAndCrash(SEED, 30_000, VolumeFixtures.BLOCKS, 8, false);
    }

    @Test
    void aDropWithAHandleOpenCrashedAnywhereIsFinishedByTheMount() {
        dropAndCrash(SEED + 1, 10_000, VolumeFixtures.BLOCKS, 6, true);
    }

    @Test
    @Tag("stress")
    void aMillionKeyTable() {
        dropAndCrash(SEED, 1_000_000, 1 << 16, 16, false);
        dropAndCrash(SEED + 1, 200_000, 1 << 15, 10, true);
    }

    static byte[] key(int i) {
        return TableTest.b(String.format("key-%08d", i));
    }

    static byte[] value(int i) {
        return TableTest.b(i + "/" + Integer.toHexString(i * 0x9E3779B1));
    }

    private static void dropAndCrash(long seed, int keys, int blocks, int samples, boolean heldOpen) {
        Random rnd = new Random(seed);
        MemoryDevice dev = MemoryDevice.create(blocks, 4096);
        Volume.format(dev, VolumeFixtures.OPTIONS);
        long freeBefore;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            try (Table keep = v.tables().create(KEEP)) { // the catalog too, before the count
                for (int i = 0; i < KEEP_KEYS; i++) {
                    keep.withDurability(Durability.NONE).put(key(i), value(i));
                }
            }
            freeBefore = v.statfs().freeBlocks();
            try (Table big = v.tables().create(BIG)) {
                for (int i = 0; i < keys; ) {
                    try (WriteTransaction tx = v.begin(Durability.NONE)) {
                        for (int end = Math.min(keys, i + 2000); i < end; i++) {
                            tx.put(big, key(i), value(i));
                        }
                        tx.commit();
                    }
                }
            }
            assertTrue(v.statfs().freeBlocks() < freeBefore - keys / 200, "the table takes space");
        }
        try (RecordingDevice rec = RecordingDevice.wrap(dev)) {
            int firstFlush, openCrash = -1;
            try (Volume v = Volume.open(rec, OPTIONS)) {
                v.sync();
                firstFlush = rec.flushCount() - 1;
                if (heldOpen) {
                    Table big = v.tables().open(BIG);
                    v.tables().drop(BIG);
                    openCrash = SyncPoint.of(rec, v, v::sync);
                    assertArrayEquals(value(keys / 2), big.get(key(keys / 2)), "a dropped table stays readable while open");
                    big.close();
                } else {
                    v.tables().drop(BIG);
                }
                assertEquals(freeBefore, v.statfs().freeBlocks(), "the drop freed every block");
            }
            int lastFlush = rec.flushCount();
            assertTrue(lastFlush - firstFlush > 2, "the drop took several flushes: " + (lastFlush - firstFlush));
            List<RecordingDevice.CrashState> states = new ArrayList<>();
            states.add(rec.crashAfterFlush(firstFlush)); // nothing of the drop durable
            if (openCrash >= 0) {
                states.add(rec.crashAfterFlush(openCrash)); // unlinked, the handle still open, nothing freed
            }
            for (int s = 0; s < samples; s++) {
                states.add(CrashTest.sampledState(rec, rnd, s, firstFlush, lastFlush));
            }
            int whole = 0;
            for (RecordingDevice.CrashState state : states) {
                whole += recover(rec, state, keys, freeBefore, "seed " + seed + ", " + keys + " keys, crash " + state) ? 1 : 0;
            }
            assertTrue(whole >= 1 && whole < states.size(), "seed " + seed + ": the samples saw the table both whole and gone ("
                    + whole + " of " + states.size() + " whole)");
        }
    }

    /** Mounts the crash state and checks it; true if the table was still there (whole). */
    private static boolean recover(RecordingDevice rec, RecordingDevice.CrashState state, int keys, long freeBefore, String where) {
        try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, OPTIONS)) {
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), where + ": " + report);
            try (Table keep = v.tables().open(KEEP)) {
                assertWhole(keep, KEEP_KEYS, where + ", table " + KEEP);
            }
            boolean there = v.tables().exists(BIG);
            if (there) {
                try (Table big = v.tables().open(BIG)) {
                    assertWhole(big, keys, where + ", table " + BIG + " (its unlink not durable)");
                }
                v.tables().drop(BIG);
            }
            assertFalse(v.tables().exists(BIG), where);
            assertEquals(freeBefore, v.statfs().freeBlocks(), where + ": the free blocks after recovery" + (there ? " and a drop" : ""));
            report = v.namespace().check();
            assertTrue(report.clean(), where + ", after recovery: " + report);
            return there;
        }
    }

    private static void assertWhole(Table t, int keys, String where) {
        TableCursor c = t.cursor();
        for (int i = 0; i < keys; i++) {
            assertTrue(c.next(), where + ": ends before " + new String(key(i)));
            assertArrayEquals(key(i), c.key(), where);
            assertArrayEquals(value(i), c.value(), where + ": the value of " + new String(key(i)));
        }
        assertFalse(c.next(), where + ": holds more than " + keys + " keys");
    }
}
