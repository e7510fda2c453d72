package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
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

    /**
     * With another writer of the file inside its I/O lock (held shared here from another thread, as 32
     * writers of one file mostly find it), a direct overwrite still allocates nothing: a
     * {@code ReentrantReadWriteLock} made a hold counter and a thread-local entry per such write.
     */
    @Test
    void directWriteBesideAnotherWriterAllocatesNothing() throws InterruptedException {
        try (Handle f = written("w", 16, 1)) {
            CountDownLatch leave = new CountDownLatch(1);
            Thread other = IoLockTest.holdShared(ns.files.io(f.ino()), leave);
            try {
                MemorySegment block = stamped(0, 1, 2);
                assertNoAllocation("direct write beside another writer", at -> ns.write(f, at, block));
                assertNoAllocation("direct read beside another writer", at -> assertEquals(BS, ns.read(f, at, block)));
            } finally {
                leave.countDown();
                other.join();
            }
        }
    }

    @Test
    void directReadOfHolesAllocatesNothing() {
        try (Handle f = ns.create(root, "h", 0644, true)) {
            ns.write(f, 0, stamped(0, 1, 1));
            ns.write(f, 15L * BS, stamped(15L * BS, 1, 1));
        }
        try (Handle f = ns.open(root, "h")) {
            MemorySegment block = stamped(0, 1, 2);
            // blocks 1 to 14 map nothing: no in-place read, the mapping decoded for each
            assertNoAllocation("direct read of a hole", at -> assertEquals(BS, ns.read(f, at % (14 * BS) + BS, block)));
            assertEquals(0, block.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
        }
    }

    /**
     * Runs {@code call} at each of the file's 16 block offsets in turn, a round of {@link #ROUNDS} calls at a
     * time: after a warm-up round, the best of four must allocate less than a byte a call (a round may meet a
     * compilation, or a queue node of a lock the page cache's thread held a moment).
     */
    private static void assertNoAllocation(String what, LongConsumer call) {
        double best = Double.MAX_VALUE;
        for (int round = 0; round < 5; round++) {
            long before = allocatedBytes();
            for (int n = 0; n < ROUNDS; n++) {
                call.accept((long) (n & 15) * BS);
            }
            if (round > 0) {
                best = Math.min(best, (double) (allocatedBytes() - before) / ROUNDS);
            }
        }
        assertTrue(best < 1, what + ": " + best + " bytes allocated per call");
    }
}
