package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Logical records that initialise blocks, as the journal sees them: an ordered item
 * ({@link Transaction#logOrdered}) is logged as an op without ranges and still goes home through the AIL;
 * recovery replays the items a replayer marks {@link Replayer#replaysFirst} before the rest of their
 * checkpoint whatever order the checkpoint lists them in, and refuses an item whose blocks
 * ({@link Replayer#blocks}) reach into the log.
 */
class OrderedItemTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 64);
    static final int RECORD_TYPE = 9;

    /** A logical record: a few bytes, never written home. */
    static final class Record extends LogItem {
        final MemorySegment bytes = MemorySegment.ofArray(new byte[64]);

        Record(long home) {
            super(home, RECORD_TYPE);
        }

        @Override
        protected MemorySegment image() {
            return bytes;
        }

        @Override
        protected boolean tryLock() {
            return true;
        }

        @Override
        protected void unlock() {
        }

        @Override
        protected void stamp(MemorySegment copy, long lsn) {
            throw new AssertionError("a record is never written home");
        }

        @Override
        protected boolean isStale() {
            return true;
        }
    }

    /** Replays test items as {@link TestReplayer} does and records, records the order of everything it replays. */
    static final class Ordering implements Replayer {
        final TestReplayer inner;
        final int recordBlocks;
        final List<Integer> types = new ArrayList<>();

        Ordering(BlockDevice dev, int recordBlocks) {
            inner = new TestReplayer(dev);
            this.recordBlocks = recordBlocks;
        }

        @Override
        public boolean replaysFirst(int type) {
            return type == RECORD_TYPE;
        }

        @Override
        public int blocks(ReplayItem item) {
            return item.type() == RECORD_TYPE ? recordBlocks : 1;
        }

        @Override
        public boolean replay(ReplayItem item) {
            types.add(item.type());
            return item.type() == RECORD_TYPE || inner.replay(item);
        }

        @Override
        public void finish() {
            inner.finish();
        }
    }

    /**
     * Commits, in one transaction, a record for block {@code recordHome} (joined first) and a change of
     * a test item at block 100, forces it, and returns a copy of the device as the crash leaves it.
     */
    private static MemoryDevice crashAfterRecord(long recordHome, Arena arena) {
        try (MemoryDevice dev = MemoryDevice.create(2048, BS)) {
            Journal.format(dev, G);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena);
                it.lock.lock();
                try {
                    Transaction tx = j.begin(Reservation.items(2));
                    tx.log(new Record(recordHome), 0, 16);
                    it.add(tx, 0, 5);
                    j.force(tx.commit());
                } finally {
                    it.lock.unlock();
                }
                return dev.copy("crashed");
            }
        }
    }

    @Test
    void recordsReplayBeforeTheRestOfTheirCheckpoint() {
        try (Arena arena = Arena.ofShared(); MemoryDevice crashed = crashAfterRecord(200, arena)) {
            Ordering ordering = new Ordering(crashed, 1);
            Journal.open(crashed, G, JournalOptions.defaults(), ordering).close();
            assertEquals(List.of(RECORD_TYPE, TestItem.TYPE), ordering.types, "the record, joined first, is listed after the"
                    + " item in its checkpoint, and must still be replayed first");
        }
    }

    @Test
    void aRecordWhoseBlocksReachIntoTheLogIsRefused() {
        try (Arena arena = Arena.ofShared(); MemoryDevice crashed = crashAfterRecord(G.start() - 4, arena)) {
            CorruptionException e = assertThrows(CorruptionException.class,
                    () -> Journal.open(crashed, G, JournalOptions.defaults(), new Ordering(crashed, 8)).close());
            assertTrue(e.getMessage().contains("home blocks [996, +8) lie outside the device or inside the log"), e.getMessage());
            assertThrows(CorruptionException.class, () -> Journal.open(crashed, G, JournalOptions.defaults(), new Ordering(crashed, 0)).close(),
                    "a record the replayer finds malformed");
            Ordering fits = new Ordering(crashed, 4); // [996, 1000): just clear of the log
            Journal.open(crashed, G, JournalOptions.defaults(), fits).close();
            assertEquals(2, fits.types.size());
        }
    }

    @Test
    void anOrderedItemIsLoggedWithoutBytesAndGoesHomeThroughTheAil() {
        try (Arena arena = Arena.ofShared(); MemoryDevice dev = MemoryDevice.create(2048, BS)) {
            Journal.format(dev, G);
            TestItem it = new TestItem(300, BS, arena);
            it.image().set(U64, TestItem.offset(1), 42); // initialised in full, as the record would rebuild it
            long before;
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                before = j.stats().checkpointBytes();
                it.lock.lock();
                try {
                    Transaction tx = j.begin(Reservation.items(1));
                    tx.logOrdered(it);
                    j.force(tx.commit());
                } finally {
                    it.lock.unlock();
                }
                assertEquals(BS, j.stats().checkpointBytes() - before, "one inline record: " + j.stats());
            }
            MemorySegment home = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            dev.read(300, home);
            assertTrue(TestItem.blockValid(home), "written home at close");
            assertEquals(42, TestItem.blockCounter(home, 1));
        }
    }
}
