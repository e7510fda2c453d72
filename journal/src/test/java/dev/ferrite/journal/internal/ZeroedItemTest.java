package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Items logged with {@link Transaction#logZeroed}: recovery rebuilds them from zeros plus their ranges,
 * whatever their home block held (a block freed by one owner and allocated by another), every relog
 * until the block goes home keeps that mark, and the first change after it is home drops it.
 */
class ZeroedItemTest {
    static final int BS = 4096;
    static final long HOME = 100;
    static final LogGeometry G = new LogGeometry(1000, 64);

    /** A stale home block: every counter 0x5A5A..., stamped with a valid checksum by an older owner. */
    private static void writeStaleHome(BlockDevice dev, Arena arena) {
        MemorySegment stale = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        stale.fill((byte) 0x5A);
        new TestItem(HOME, BS, arena).stamp(stale, 1);
        dev.write(HOME, stale);
        dev.flush();
    }

    /** Replays like {@link TestReplayer}, remembering whether each op of the item was marked zeroed. */
    static final class Watching implements Replayer {
        final TestReplayer inner;
        final List<Boolean> zeroed = new ArrayList<>();

        Watching(BlockDevice dev) {
            inner = new TestReplayer(dev);
        }

        @Override
        public boolean replay(ReplayItem item) {
            zeroed.add(item.zeroed());
            return inner.replay(item);
        }

        @Override
        public void finish() {
            inner.finish();
        }
    }

    /**
     * Logs counter 0 of a new item (zeroed or not), optionally writes everything home, then logs counter 2
     * in a second checkpoint; the item's lock is held except for that write-back, so it cannot go home
     * otherwise. Returns the device as a crash just after the second force leaves it.
     */
    private static MemoryDevice crash(boolean zeroed, boolean homeBetween, Arena arena) {
        MemoryDevice base = MemoryDevice.create(2048, BS);
        Journal.format(base, G);
        writeStaleHome(base, arena);
        RecordingDevice rec = RecordingDevice.wrap(base);
        try (rec; TestReplayer rep = new TestReplayer(rec); Journal j = Journal.open(rec, G, JournalOptions.defaults(), rep)) {
            TestItem it = new TestItem(HOME, BS, arena);
            it.lock.lock();
            try {
                Transaction tx = j.begin(Reservation.items(1));
                it.image().set(U64, TestItem.offset(0), 7);
                if (zeroed) {
                    tx.logZeroed(it, (int) TestItem.offset(0), 8);
                } else {
                    tx.log(it, (int) TestItem.offset(0), 8);
                }
                long seq = tx.commit();
                if (homeBetween) {
                    it.lock.unlock();
                    j.quiesce();
                    it.lock.lock();
                } else {
                    j.force(seq);
                }
                tx = j.begin(Reservation.items(1));
                it.add(tx, 2, 9);
                j.force(tx.commit());
                return rec.imageAt(rec.eventCount());
            } finally {
                it.lock.unlock();
            }
        }
    }

    /** Recovers {@code crashed}, returning for each op of the item replayed whether it was marked zeroed. */
    private static List<Boolean> recover(MemoryDevice crashed) {
        Watching rep = new Watching(crashed);
        try (rep.inner; Journal j = Journal.open(crashed, G, JournalOptions.defaults(), rep)) {
            return rep.zeroed;
        }
    }

    @Test
    void aZeroedItemIsRebuiltFromZerosOverAStaleHomeBlock() {
        try (Arena arena = Arena.ofShared(); MemoryDevice crashed = crash(true, false, arena)) {
            assertEquals(List.of(true, false), recover(crashed),
                    "the first checkpoint logs the item whole, zeroed; the second only its delta (counter 2), unmarked");
            MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            crashed.read(HOME, blk);
            assertTrue(TestItem.blockValid(blk));
            for (int c = 0; c < TestItem.counters(BS); c++) {
                assertEquals(c == 0 ? 7 : c == 2 ? 9 : 0, TestItem.blockCounter(blk, c), "counter " + c);
            }
            assertEquals(-1, blk.asSlice(TestItem.DATA_OFF + 8, TestItem.SPACING - 8).mismatch(
                    MemorySegment.ofArray(new byte[(int) TestItem.SPACING - 8])), "the stale bytes between counters are gone");
        }
    }

    /** The control: logged the ordinary way, the stale bytes the transactions did not touch survive replay. */
    @Test
    void anOrdinaryItemKeepsWhatItsHomeBlockHeld() {
        try (Arena arena = Arena.ofShared(); MemoryDevice crashed = crash(false, false, arena)) {
            assertEquals(List.of(false, false), recover(crashed));
            MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            crashed.read(HOME, blk);
            assertEquals(7, TestItem.blockCounter(blk, 0));
            assertEquals(0x5A5A5A5A5A5A5A5AL, TestItem.blockCounter(blk, 1));
        }
    }

    @Test
    void theMarkEndsOnceTheItemIsHome() {
        try (Arena arena = Arena.ofShared(); MemoryDevice crashed = crash(true, true, arena)) {
            assertEquals(List.of(false), recover(crashed), "only the change after the write-back is in the log, unmarked");
            MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            crashed.read(HOME, blk);
            assertEquals(7, TestItem.blockCounter(blk, 0));
            assertEquals(0, TestItem.blockCounter(blk, 1));
            assertEquals(9, TestItem.blockCounter(blk, 2));
        }
    }
}
