package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Damage in the log: detected by checksum or sector stamps, reported with its LSN, never applied. */
class RecoveryCorruptionTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(512, 256);

    Arena arena;
    MemoryDevice crashed;
    /** Device block of each checkpoint's (single) record, in order. */
    List<Long> records;

    @BeforeEach
    void fiveForcedCheckpointsThenCrash() {
        arena = Arena.ofShared();
        try (MemoryDevice dev = MemoryDevice.create(1024, BS)) {
            Journal.format(dev, G);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                for (int i = 1; i <= 5; i++) {
                    TestItem item = new TestItem(i, BS, arena);
                    Transaction tx = j.begin(Reservation.items(1));
                    item.lock.lock();
                    try {
                        item.add(tx, 0, 100 + i);
                        j.force(tx.commit());
                    } finally {
                        item.lock.unlock();
                    }
                }
                crashed = dev.copy("crashed");
            }
        }
        records = new ArrayList<>();
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        for (long blk = G.areaStart(); blk < G.start() + G.blocks(); blk++) {
            crashed.read(blk, b);
            if (LogRecordFormat.magic(b) == LogRecordFormat.MAGIC) {
                records.add(blk);
            }
        }
        assertEquals(5, records.size(), "one record per forced checkpoint");
    }

    @AfterEach
    void close() {
        crashed.close();
        arena.close();
    }

    @Test
    void intactLogReplaysEverything() {
        RecoveryReport r = open(crashed);
        assertEquals(5, r.checkpointsReplayed(), r.toString());
        for (int i = 1; i <= 5; i++) {
            assertEquals(100 + i, counter(i));
        }
    }

    @Test
    void damageBeforeTheEndIsRefusedAndNothingIsApplied() {
        flipPayloadByte(records.get(1));
        MemorySegment before = snapshot();
        CorruptionException e = assertThrows(CorruptionException.class, () -> open(crashed));
        assertEquals(records.get(1), e.block(), e.getMessage());
        assertTrue(e.getMessage().contains("LSN 1/" + (records.get(1) - G.areaStart())), e.getMessage());
        assertTrue(e.getMessage().contains("damaged, not torn"), e.getMessage());
        assertEquals(-1, before.mismatch(snapshot()), "a refused recovery writes nothing");
    }

    @Test
    void damagedLastRecordIsDiscardedWithItsLsn() {
        long last = records.get(4);
        flipPayloadByte(last);
        RecoveryReport r = open(crashed);
        assertEquals(4, r.checkpointsReplayed(), r.toString());
        assertNotNull(r.discarded());
        assertTrue(r.discarded().contains("checksum mismatch"), r.discarded());
        assertTrue(r.discarded().contains("LSN 1/" + (last - G.areaStart())), r.discarded());
        assertEquals(0, counter(5), "the damaged record must not be applied");
        assertEquals(104, counter(4));
    }

    @Test
    void tornLastRecordIsFoundByItsSectorStamps() {
        long last = records.get(4);
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(last + 1, b); // first payload block: its sectors 0..7 are record sectors 8..15
        b.set(ValueLayout.JAVA_INT_UNALIGNED, 3 * 512, 0); // sector 11 of the record still holds an old cycle
        crashed.write(last + 1, b);
        RecoveryReport r = open(crashed);
        assertEquals(4, r.checkpointsReplayed());
        assertTrue(r.discarded().contains("torn write: sector 11"), r.discarded());
        assertEquals(0, counter(5));
    }

    /**
     * A crash during recovery, after the replayed blocks went home but before the new anchor did, makes
     * the next open replay the same checkpoints over blocks that already hold them: same result.
     */
    @Test
    void replayingTwiceGivesTheSameHomeBlocks() {
        MemorySegment anchorBefore = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(G.anchorBlock(), anchorBefore);
        RecoveryReport first = open(crashed);
        assertEquals(5, first.itemsReplayed());
        MemorySegment once = homeBlocks();
        crashed.write(G.anchorBlock(), anchorBefore); // as if the anchor update was lost in a crash
        RecoveryReport second = open(crashed);
        assertEquals(5, second.checkpointsReplayed());
        assertEquals(0, second.itemsReplayed(), second.toString());
        assertEquals(5, second.itemsSkipped(), "home blocks already carry these LSNs");
        assertEquals(-1, once.mismatch(homeBlocks()));
    }

    @Test
    void unreadableAnchorNamesItsBlock() {
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(G.anchorBlock(), b);
        b.set(ValueLayout.JAVA_BYTE, 40, (byte) (b.get(ValueLayout.JAVA_BYTE, 40) ^ 1));
        b.set(ValueLayout.JAVA_BYTE, 512 + 40, (byte) (b.get(ValueLayout.JAVA_BYTE, 512 + 40) ^ 1));
        crashed.write(G.anchorBlock(), b);
        CorruptionException e = assertThrows(CorruptionException.class, () -> open(crashed));
        assertEquals(G.anchorBlock(), e.block());
        assertTrue(e.getMessage().contains("log anchor") && e.getMessage().contains("crc32c"), e.getMessage());
    }

    @Test
    void anchorOfAnotherGeometryIsRefused() {
        CorruptionException e = assertThrows(CorruptionException.class, () -> {
            try (TestReplayer rep = new TestReplayer(crashed)) {
                Journal.open(crashed, new LogGeometry(512, 200), JournalOptions.defaults(), rep).close();
            }
        });
        assertTrue(e.getMessage().contains("expected 200 blocks"), e.getMessage());
    }

    /**
     * A damaged newest anchor copy (not a torn write: the log holds records written after it) must not
     * make recovery trust the older, clean copy and skip the log: it is refused.
     */
    @Test
    void damagedNewestAnchorCopyWithLaterRecordsIsRefused() {
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(G.anchorBlock(), b);
        long gen0 = b.get(dev.ferrite.io.internal.OnDisk.U64, 24);
        long gen1 = b.get(dev.ferrite.io.internal.OnDisk.U64, 512 + 24);
        int newer = gen0 > gen1 ? 0 : 512;
        b.set(ValueLayout.JAVA_BYTE, newer + 33, (byte) 0x5A);
        crashed.write(G.anchorBlock(), b);
        MemorySegment before = snapshot();
        CorruptionException e = assertThrows(CorruptionException.class, () -> open(crashed));
        assertTrue(e.getMessage().contains("later checkpoint"), e.getMessage());
        assertEquals(-1, before.mismatch(snapshot()));
    }

    private RecoveryReport open(MemoryDevice dev) {
        try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
            return j.recovery();
        }
    }

    private void flipPayloadByte(long recordBlock) {
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(recordBlock + 1, b);
        b.set(ValueLayout.JAVA_BYTE, 40, (byte) (b.get(ValueLayout.JAVA_BYTE, 40) ^ 0x10));
        crashed.write(recordBlock + 1, b);
    }

    private long counter(int home) {
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(home, b);
        assertTrue(TestItem.blockValid(b));
        return TestItem.blockCounter(b, 0);
    }

    private MemorySegment homeBlocks() {
        MemorySegment s = arena.allocate((long) G.start() * BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(0, s);
        return s;
    }

    private MemorySegment snapshot() {
        MemorySegment s = arena.allocate(crashed.size(), BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(0, s);
        return s;
    }
}
