package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A checkpoint whose payload fits the header block after its first sector is written as one inline
 * record (one block); one chunk more and it takes a header and a payload block. Either way a crash right
 * after the force recovers the logged bytes exactly.
 */
class InlineRecordTest {
    static final int BS = 4096;
    static final int CHUNK = BS / 128;
    static final long HOME = 100;
    static final LogGeometry G = new LogGeometry(512, 64);

    @ParameterizedTest(name = "{0} chunks")
    @ValueSource(ints = {1, 110, 111})
    void aCheckpointIsInlineExactlyWhenItsPayloadFitsTheHeaderBlock(int chunks) {
        // one op with one range of whole chunks from the block's start, then the commit op
        long payload = LogRecordFormat.opSize(1, chunks * CHUNK) + LogRecordFormat.COMMIT_OP_SIZE;
        boolean inline = payload <= LogRecordFormat.maxInlineBytes(BS);
        assertEquals(chunks <= 110, inline, "payload " + payload + " bytes");
        int bytes = chunks * CHUNK - TestItem.DATA_OFF;
        byte[] expected = new byte[bytes];
        new SplittableRandom(chunks).nextBytes(expected);
        try (Arena arena = Arena.ofShared(); MemoryDevice dev = MemoryDevice.create(1024, BS)) {
            Journal.format(dev, G);
            MemoryDevice crashed;
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(HOME, BS, arena);
                it.lock.lock(); // held until the crash: the item cannot go home before it
                try {
                    long before = j.stats().checkpointBytes();
                    Transaction tx = j.begin(Reservation.items(1));
                    MemorySegment.copy(expected, 0, it.image(), ValueLayout.JAVA_BYTE, TestItem.DATA_OFF, bytes);
                    tx.log(it, TestItem.DATA_OFF, bytes);
                    j.force(tx.commit());
                    assertEquals((inline ? 1 : 2) * (long) BS, j.stats().checkpointBytes() - before,
                            inline ? "one inline record" : "a header and a payload block");
                    crashed = dev.copy("crashed");
                } finally {
                    it.lock.unlock();
                }
            }
            try (crashed; TestReplayer rep = new TestReplayer(crashed);
                 Journal j = Journal.open(crashed, G, JournalOptions.defaults(), rep)) {
                assertEquals(1, j.recovery().checkpointsReplayed(), j.recovery().toString());
                MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                crashed.read(HOME, blk);
                assertTrue(TestItem.blockValid(blk));
                assertEquals(-1, blk.asSlice(TestItem.DATA_OFF, bytes).mismatch(MemorySegment.ofArray(expected)),
                        "the logged bytes after recovery");
            }
        }
    }
}
