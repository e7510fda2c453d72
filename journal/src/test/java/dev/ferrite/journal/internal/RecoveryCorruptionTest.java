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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Damage in the log: detected by checksum or sector stamps, reported with its LSN, never applied. The
 * damage tests run on both record shapes: inline (a small checkpoint, payload in the header block) and
 * with payload blocks (each transaction logs {@value #WIDE} bytes).
 */
class RecoveryCorruptionTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(512, 256);

    Arena arena;
    MemoryDevice crashed;
    /** Bytes of its block each transaction logs in the wide shape: its record needs payload blocks. */
    static final int WIDE = 3600;

    /** Device block of each checkpoint's (single) record, in order. */
    List<Long> records;
    /** Whether the records have payload blocks (else inline). */
    boolean wide;

    @BeforeEach
    void allocate() {
        arena = Arena.ofShared();
    }

    /** Five forced checkpoints of one small transaction each, then a crash. */
    private void fiveForcedCheckpointsThenCrash(boolean wide) {
        this.wide = wide;
        try (MemoryDevice dev = MemoryDevice.create(1024, BS)) {
            Journal.format(dev, G);
            // early write-back off: the wide items would go home, and the tail move past the records, at once
            JournalOptions options = JournalOptions.defaults().withRelogLimit(BS);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, options, rep)) {
                for (int i = 1; i <= 5; i++) {
                    TestItem item = new TestItem(i, BS, arena);
                    Transaction tx = j.begin(Reservation.items(1));
                    item.lock.lock();
                    try {
                        item.add(tx, 0, 100 + i);
                        if (wide) {
                            tx.log(item, TestItem.DATA_OFF, WIDE);
                        }
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
        MemorySegment header = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(records.getFirst(), header);
        assertEquals(wide ? 1 : 0, LogRecordFormat.payloadBlocks(header), "payload blocks of a record");
    }

    @AfterEach
    void close() {
        crashed.close();
        arena.close();
    }

    @ParameterizedTest(name = "wide {0}")
    @ValueSource(booleans = {false, true})
    void intactLogReplaysEverything(boolean wide) {
        fiveForcedCheckpointsThenCrash(wide);
        RecoveryReport r = open(crashed);
        assertEquals(5, r.checkpointsReplayed(), r.toString());
        for (int i = 1; i <= 5; i++) {
            assertEquals(100 + i, counter(i));
        }
    }

    @ParameterizedTest(name = "wide {0}")
    @ValueSource(booleans = {false, true})
    void damageBeforeTheEndIsRefusedAndNothingIsApplied(boolean wide) {
        fiveForcedCheckpointsThenCrash(wide);
        flipPayloadByte(records.get(1));
        MemorySegment before = snapshot();
        CorruptionException e = assertThrows(CorruptionException.class, () -> open(crashed));
        assertEquals(records.get(1), e.block(), e.getMessage());
        assertTrue(e.getMessage().contains("LSN 1/" + (records.get(1) - G.areaStart())), e.getMessage());
        assertTrue(e.getMessage().contains("damaged, not torn"), e.getMessage());
        assertEquals(-1, before.mismatch(snapshot()), "a refused recovery writes nothing");
    }

    @ParameterizedTest(name = "wide {0}")
    @ValueSource(booleans = {false, true})
    void damagedLastRecordIsDiscardedWithItsLsn(boolean wide) {
        fiveForcedCheckpointsThenCrash(wide);
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

    @ParameterizedTest(name = "wide {0}")
    @ValueSource(booleans = {false, true})
    void tornLastRecordIsFoundByItsSectorStamps(boolean wide) {
        fiveForcedCheckpointsThenCrash(wide);
        long last = records.get(4);
        // wide: the first payload block, whose sectors 0..7 are record sectors 8..15; inline: the header block,
        // whose sectors 1..7 hold the payload
        long block = wide ? last + 1 : last;
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(block, b);
        b.set(ValueLayout.JAVA_INT_UNALIGNED, 3 * 512, 0); // that sector still holds an old cycle
        crashed.write(block, b);
        RecoveryReport r = open(crashed);
        assertEquals(4, r.checkpointsReplayed());
        assertTrue(r.discarded().contains("torn write: sector " + (wide ? 11 : 3)), r.discarded());
        assertEquals(0, counter(5));
    }

    /** An inline record claiming payload blocks, or a payload longer than its header block holds, is damage. */
    @ParameterizedTest(name = "payload blocks {0}")
    @ValueSource(ints = {1, 0})
    void anInlineRecordWithImpossibleSizesIsRefused(int payloadBlocks) {
        fiveForcedCheckpointsThenCrash(false);
        long last = records.get(4);
        MemorySegment rec = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(last, rec);
        int field = payloadBlocks == 1 ? 8 : 9; // rewriteField's order: ..., payload blocks, payload bytes, ...
        assertTrue(LogRecordFormat.rewriteField(rec, BS, field, v -> payloadBlocks == 1 ? 1 : BS - 512 + 8));
        crashed.write(last, rec);
        RecoveryReport r = open(crashed);
        assertEquals(4, r.checkpointsReplayed());
        assertTrue(r.discarded().contains("inline record"), r.discarded());
        assertEquals(0, counter(5));
    }

    /**
     * A crash during recovery, after the replayed blocks went home but before the new anchor did, makes
     * the next open replay the same checkpoints over blocks that already hold them: same result.
     */
    @Test
    void replayingTwiceGivesTheSameHomeBlocks() {
        fiveForcedCheckpointsThenCrash(false);
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
        fiveForcedCheckpointsThenCrash(false);
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
        fiveForcedCheckpointsThenCrash(false);
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
        fiveForcedCheckpointsThenCrash(false);
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

    /** Flips a bit in the record's payload: in its first payload block, or in its header block's second sector. */
    private void flipPayloadByte(long recordBlock) {
        long block = wide ? recordBlock + 1 : recordBlock;
        long off = wide ? 40 : 512 + 40;
        MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        crashed.read(block, b);
        b.set(ValueLayout.JAVA_BYTE, off, (byte) (b.get(ValueLayout.JAVA_BYTE, off) ^ 0x10));
        crashed.write(block, b);
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
