package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.internal.Crc32c;
import dev.ferrite.journal.JournalOptions;
import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U32;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A log anchored by version 1 (written before records said what was flushed) still opens, and the open
 * leaves both anchor copies at version 2, so that code reading only version 1, which would take a
 * version 4 record for the end of the log, finds no copy to recover from.
 */
class LogAnchorVersionTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(64, 64);
    static final long VERSION_OFF = 4, CRC_OFF = 8;

    @Test
    void aVersionOneAnchorOpensAndBothCopiesLeaveAtVersionTwo() {
        try (MemoryDevice dev = MemoryDevice.create(128, BS); Arena arena = Arena.ofConfined()) {
            Journal.format(dev, G);
            MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            dev.read(G.anchorBlock(), block);
            int valid = 0;
            for (int slot = 0; slot < 2; slot++) {
                MemorySegment c = block.asSlice((long) slot * LogAnchorFormat.COPY_SIZE, LogAnchorFormat.COPY_SIZE);
                if (c.get(U32, 0) == LogAnchorFormat.MAGIC) {
                    c.set(U16, VERSION_OFF, (short) 1); // as the build before version 2 wrote it
                    c.set(U32, CRC_OFF, Crc32c.computeSkipping(c, CRC_OFF));
                    valid++;
                }
            }
            assertTrue(valid > 0, "format wrote no anchor copy");
            dev.write(G.anchorBlock(), block);

            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                assertTrue(j.recovery().clean(), j.recovery().toString());
                // open wrote one anchor generation, before any record: the copy it did not write is upgraded too
                dev.read(G.anchorBlock(), block);
                for (int slot = 0; slot < 2; slot++) {
                    MemorySegment c = block.asSlice((long) slot * LogAnchorFormat.COPY_SIZE, LogAnchorFormat.COPY_SIZE);
                    assertEquals(LogAnchorFormat.MAGIC, c.get(U32, 0), "copy " + slot);
                    assertEquals(LogAnchorFormat.VERSION, c.get(U16, VERSION_OFF), "copy " + slot + " was left at an older version");
                    assertEquals(Crc32c.computeSkipping(c, CRC_OFF), c.get(U32, CRC_OFF), "copy " + slot + " checksum");
                }
            }
        }
    }
}
