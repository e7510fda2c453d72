package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Checkpoints of several records each, their payload checksummed step by step as it is formatted and
 * combined with the header's: recovered whole after a crash, and discarded whole when their last record
 * is torn (the checkpoint before them replayed).
 */
class LargeCheckpointTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 2048);
    static final int ITEMS = 300;
    static final int PER_TX = 30;
    /** Whole items never go home early, and nothing presses for log space: the log alone holds both checkpoints. */
    static final JournalOptions OPTIONS = JournalOptions.defaults().withPushThreshold(4L << 20).withRelogLimit(BS);

    @Test
    void multiRecordCheckpointsAreRecoveredAfterACrash() {
        try (MemoryDevice crashed = twoCheckpoints(false); TestReplayer rep = new TestReplayer(crashed);
             Journal j = Journal.open(crashed, G, OPTIONS, rep)) {
            assertEquals(2, j.recovery().checkpointsReplayed(), j.recovery().toString());
            assertTrue(j.recovery().recordsScanned() >= 6, "each checkpoint spans several records: " + j.recovery());
            assertValues(crashed, 2);
        }
    }

    @Test
    void aTornLastRecordDiscardsItsWholeCheckpoint() {
        try (MemoryDevice crashed = twoCheckpoints(true); TestReplayer rep = new TestReplayer(crashed);
             Journal j = Journal.open(crashed, G, OPTIONS, rep)) {
            assertEquals(1, j.recovery().checkpointsReplayed(), j.recovery().toString());
            assertNotNull(j.recovery().discarded(), j.recovery().toString());
            assertValues(crashed, 1);
        }
    }

    /** Logs every item whole with value 1, forces; again with 2; then copies the device as a crash would leave it. */
    private static MemoryDevice twoCheckpoints(boolean tearLastRecord) {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(3072, BS)) {
            Journal.format(base, G);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, G, OPTIONS, rep)) {
                TestItem[] items = new TestItem[ITEMS];
                for (int i = 0; i < ITEMS; i++) {
                    items[i] = new TestItem(1 + i, BS, arena);
                }
                for (long value = 1; value <= 2; value++) {
                    long seq = 0;
                    for (int first = 0; first < ITEMS; first += PER_TX) {
                        Transaction tx = j.begin(Reservation.items(PER_TX));
                        for (int i = first; i < first + PER_TX; i++) {
                            items[i].lock.lock();
                            for (int c = 0; c < TestItem.counters(BS); c++) {
                                items[i].image().set(U64, TestItem.offset(c), value * 1000 + i);
                            }
                            tx.log(items[i], TestItem.DATA_OFF, BS - TestItem.DATA_OFF);
                        }
                        seq = tx.commit();
                        for (int i = first; i < first + PER_TX; i++) {
                            items[i].lock.unlock();
                        }
                    }
                    j.force(seq);
                }
                assertEquals(2, j.stats().checkpoints(), "one checkpoint per value");
                assertEquals(0, j.stats().ailWrittenBack(), "nothing went home: the log alone holds the values");
                MemoryDevice copy = base.copy("crashed");
                if (tearLastRecord) { // its last sector never reached the device: an older cycle's stamp is there
                    long head = j.writer().headLsn();
                    long lastBlock = G.areaStart() + Lsn.block(head) - 1;
                    MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                    copy.read(lastBlock, b);
                    b.set(U32, BS - LogRecordFormat.SECTOR, Lsn.cycle(head) - 1);
                    copy.write(lastBlock, b);
                }
                return copy;
            }
        }
    }

    private static void assertValues(MemoryDevice d, long value) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            for (int i = 0; i < ITEMS; i++) {
                d.read(1 + i, b);
                for (int c = 0; c < TestItem.counters(BS); c++) {
                    assertEquals(value * 1000 + i, b.get(U64, TestItem.offset(c)), "item " + i + ", counter " + c);
                }
            }
        }
    }
}
