package dev.ferrite.io;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import static dev.ferrite.io.testkit.Blocks.buffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The batch as a container; running batches on devices is in {@link IoEngineTest} and the device contract. */
class IoBatchTest {
    @Test
    void capacityMustBePositive() {
        for (int bad : new int[] {0, -1}) {
            var e = assertThrows(InvalidArgumentException.class, () -> new IoBatch(bad));
            assertTrue(e.getMessage().contains("batch capacity " + bad), e.getMessage());
        }
    }

    @Test
    void recordsRequestsInOrderUpToItsCapacity() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = buffer(arena, 4096), b = buffer(arena, 8192);
            IoBatch batch = new IoBatch(2).read(7, a).write(9, b);
            assertEquals(2, batch.size());
            assertEquals(2, batch.capacity());
            assertEquals(7, batch.block(0));
            assertSame(a, batch.buffer(0));
            assertFalse(batch.isWrite(0));
            assertEquals(9, batch.block(1));
            assertSame(b, batch.buffer(1));
            assertTrue(batch.isWrite(1));
            var e = assertThrows(InvalidArgumentException.class, () -> batch.read(1, a));
            assertTrue(e.getMessage().contains("batch is full at 2 requests"), e.getMessage());
            assertEquals(2, batch.size());
        }
    }

    @Test
    void clearForgetsRequestsAndTheirBuffers() {
        try (Arena arena = Arena.ofConfined()) {
            IoBatch batch = new IoBatch(2).write(1, buffer(arena, 4096)).write(2, buffer(arena, 4096));
            batch.clear();
            assertEquals(0, batch.size());
            assertNull(batch.buffer(0), "a cleared batch must not keep buffers reachable");
            batch.read(5, buffer(arena, 4096));
            assertEquals(5, batch.block(0));
            assertFalse(batch.isWrite(0));
        }
    }

    @Test
    void resubmittedBatchReportsOnlyItsLatestOutcome() {
        try (Arena arena = Arena.ofConfined(); MemoryDevice device = MemoryDevice.create(4, 4096)) {
            IoBatch batch = new IoBatch(2).read(0, buffer(arena, 4096)).write(3, buffer(arena, 4096));
            batch.timed(true);
            device.submit(batch);
            device.submit(batch);
            assertEquals(0, batch.error(0));
            assertEquals(0, batch.error(1));
            batch.timed(false);
            assertFalse(batch.isTimed());
        }
    }
}
