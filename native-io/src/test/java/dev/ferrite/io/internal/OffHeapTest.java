package dev.ferrite.io.internal;

import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.HugePages;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class OffHeapTest {
    @Test
    void aLargeRegionIsZeroedAlignedAndFreedWithItsArena() {
        long size = 4L << 30; // far more than the test touches: only the pages written cost memory
        Arena arena = Arena.ofShared();
        MemorySegment m = OffHeap.reserve(size, arena);
        assertEquals(size, m.byteSize());
        assertEquals(0, m.address() % 4096);
        for (long off = 0; off < size; off += 256L << 20) {
            assertEquals(0L, m.get(ValueLayout.JAVA_LONG, off), "offset " + off);
            m.set(ValueLayout.JAVA_LONG, off, off + 1);
        }
        for (long off = 0; off < size; off += 256L << 20) {
            assertEquals(off + 1, m.get(ValueLayout.JAVA_LONG, off));
        }
        arena.close();
        assertFalse(m.scope().isAlive());
        assertThrows(IllegalStateException.class, () -> m.get(ValueLayout.JAVA_LONG, 0));
    }

    @Test
    void populatedPagesAreZeroAndWritableAndAMisalignedRegionIsLeftToFirstTouch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = OffHeap.reserve(1 << 20, arena);
            assertFalse(OffHeap.populate(m.asSlice(100, 4096)), "a region not page-aligned");
            assumeTrue(OffHeap.populate(m.asSlice(64 << 10, 128 << 10)), "MADV_POPULATE_WRITE needs Linux 5.14");
            for (long off = 0; off < m.byteSize(); off += 4096) {
                assertEquals(0L, m.get(ValueLayout.JAVA_LONG, off), "offset " + off);
                m.set(ValueLayout.JAVA_LONG, off, off + 1);
                assertEquals(off + 1, m.get(ValueLayout.JAVA_LONG, off));
            }
        }
    }

    /**
     * A region reserved for huge pages is aligned to them, and a populated part of it lies in one where the
     * kernel gives them (4 KiB pages cost a trap each on first touch on some virtual machines).
     */
    @Test
    void aRegionReservedForHugePagesIsAlignedAndAPopulatedPartTakesOne() {
        long fallbacks = HugePages.faultFallbacks();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = OffHeap.reserveHuge(3 * OffHeap.HUGE_PAGE + 4096, arena);
            assertEquals(3 * OffHeap.HUGE_PAGE + 4096, m.byteSize());
            assertEquals(0, m.address() % OffHeap.HUGE_PAGE);
            assumeTrue(OffHeap.populate(m.asSlice(OffHeap.HUGE_PAGE, OffHeap.HUGE_PAGE)), "MADV_POPULATE_WRITE needs Linux 5.14");
            assumeTrue(HugePages.available(), "transparent huge pages are off");
            long kib = HugePages.kilobytesAt(m.address());
            assumeTrue(kib != 0 || HugePages.faultFallbacks() == fallbacks, "the kernel had no huge page to give (fell back to 4 KiB pages)");
            assertEquals(OffHeap.HUGE_PAGE >> 10, kib, "the populated part in one huge page, nothing else");
            for (long off = 0; off < m.byteSize(); off += 4096) {
                assertEquals(0L, m.get(ValueLayout.JAVA_LONG, off), "offset " + off);
                m.set(ValueLayout.JAVA_LONG, off, off + 1);
            }
        }
    }

    @Test
    void refusesNothingAndTheImpossible() {
        try (Arena arena = Arena.ofConfined()) {
            assertThrows(InvalidArgumentException.class, () -> OffHeap.reserve(0, arena));
            NoSpaceException e = assertThrows(NoSpaceException.class, () -> OffHeap.reserve(1L << 62, arena));
            assertEquals("cannot map " + (1L << 62) + " bytes of memory: ENOMEM (Cannot allocate memory)", e.getMessage());
        }
    }
}
