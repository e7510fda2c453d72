package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The extent a record change spans: init and clear log only that much, so it must cover every changed byte. */
class InodeFormatTest {
    static final int BS = 4096;
    static final int SIZE = InodeFormat.recordSize(BS);
    static final int REC = InodeFormat.recordOffset(BS, 3);

    @Test
    void usedLengthEndsJustPastTheLastNonZeroByte() {
        MemorySegment b = MemorySegment.ofArray(new byte[BS]);
        assertEquals(0, InodeFormat.usedLength(b, REC, SIZE));
        for (int at : new int[] {0, 1, 7, 8, 95, 96, 250, SIZE - 8, SIZE - 1}) {
            b.fill((byte) 0);
            b.set(java.lang.foreign.ValueLayout.JAVA_BYTE, REC + at, (byte) 0x80);
            b.set(java.lang.foreign.ValueLayout.JAVA_BYTE, REC + SIZE, (byte) 1); // the next record is not counted
            assertEquals(at + 1, InodeFormat.usedLength(b, REC, SIZE), "last byte at " + at);
        }
    }

    @Test
    void initAndClearSpanEveryByteTheyChange() {
        MemorySegment b = MemorySegment.ofArray(new byte[BS]);
        int n = InodeFormat.init(b, REC, SIZE, InodeFormat.S_IFREG | 0644, 1, 2, 1, 123);
        assertEquals(InodeFormat.GENERATION + 4, n, "a zero record: the fixed fields up to the generation");
        b.set(U64, REC + InodeFormat.INLINE + 200, -1L); // a long symlink target, say
        int gen = InodeFormat.generation(b, REC);
        assertTrue(gen != 0, "a slot's first generation is random but never 0");
        int cleared = InodeFormat.clear(b, REC, SIZE);
        assertEquals(InodeFormat.INLINE + 208, cleared, "clear covers the old inline bytes");
        b.set(U64, REC + InodeFormat.GENERATION, 1); // say generation 1, to know the length left
        assertEquals(InodeFormat.GENERATION + 1, InodeFormat.usedLength(b, REC, SIZE), "only the generation is left");
        b.set(U64, REC + InodeFormat.INLINE + 300, 5L);
        assertEquals(InodeFormat.INLINE + 301, InodeFormat.init(b, REC, SIZE, InodeFormat.S_IFREG, 0, 0, 1, 1),
                "init zeroes and so covers what was left behind");
        assertEquals(2, InodeFormat.generation(b, REC), "a used slot's generation counts on");
    }
}
