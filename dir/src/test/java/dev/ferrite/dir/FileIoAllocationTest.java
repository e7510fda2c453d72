package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Reads and writes through a handle allocate nothing per call once warm: a buffered 4 KiB write and read
 * of a cached page, and a direct read and write of a written block in place. G1's young collections, which
 * such garbage brings on, would land in a file server's worst latencies.
 */
class FileIoAllocationTest extends FileTestBase {
    private static final int ROUNDS = 10_000;

    @Test
    void bufferedReadAndWriteOfCachedPagesAllocateNothing() {
        try (Handle f = written("b", 16, 1)) {
            MemorySegment heap = MemorySegment.ofArray(new byte[BS]);
            assertEquals(BS, ns.read(f, 0, heap));
            assertNoAllocation("buffered write", at -> ns.write(f, at, heap));
            assertNoAllocation("buffered read", at -> assertEquals(BS, ns.read(f, at, heap)));
            assertEquals(16L * BS, ns.stat(f).size());
        }
    }

    @Test
    void directReadAndWriteInPlaceAllocateNothing() {
        try (Handle f = written("d", 16, 1)) {
            MemorySegment block = stamped(0, 1, 2);
            assertNoAllocation("direct write", at -> ns.write(f, at, block));
            assertNoAllocation("direct read", at -> assertEquals(BS, ns.read(f, at, block)));
            assertEquals(16L * BS, ns.stat(f).size());
        }
    }

    /** Runs {@code call} at each of the file's 16 block offsets in turn, a warm-up round then a measured one. */
    private static void assertNoAllocation(String what, LongConsumer call) {
        for (int round = 0; round < 2; round++) {
            long before = allocatedBytes();
            for (int n = 0; n < ROUNDS; n++) {
                call.accept((long) (n & 15) * BS);
            }
            double perCall = (double) (allocatedBytes() - before) / ROUNDS;
            if (round == 1) {
                assertTrue(perCall < 1, what + ": " + perCall + " bytes allocated per call");
            }
        }
    }
}
