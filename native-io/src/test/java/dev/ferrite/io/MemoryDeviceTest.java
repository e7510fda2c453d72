package dev.ferrite.io;

import dev.ferrite.io.testkit.BlockDeviceContract;

import dev.ferrite.io.testkit.Blocks;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MemoryDeviceTest extends BlockDeviceContract {
    @Override
    protected BlockDevice create(long blocks, int blockSize) {
        return MemoryDevice.create("ram-test", blocks, blockSize);
    }

    @Override
    protected boolean discardReadsZero() {
        return true;
    }

    @Override
    protected void assertContentsAfterClose(byte[] expected) {
        // The memory is freed on close; the contract test already checked the caller's buffers.
    }

    @Test
    void startsZeroed() {
        Blocks.assertAllZero(MemorySegment.ofArray(Blocks.contents(device)), "a new memory device");
    }

    @Test
    void copyIsIndependentOfTheOriginal() {
        Blocks.writeAll(device, 1);
        try (MemoryDevice copy = ((MemoryDevice) device).copy("ram-copy")) {
            assertEquals("ram-copy", copy.name());
            assertEquals(device.blockCount(), copy.blockCount());
            device.write(3, fill(buffer(arena, BLOCK), 3, BLOCK, 2));
            copy.write(4, fill(buffer(arena, BLOCK), 4, BLOCK, 3));
            MemorySegment two = buffer(arena, 2L * BLOCK);
            copy.read(3, two);
            assertHolds(two.asSlice(0, BLOCK), 3, BLOCK, 1);
            assertHolds(two.asSlice(BLOCK), 4, BLOCK, 3);
            device.read(3, two);
            assertHolds(two.asSlice(0, BLOCK), 3, BLOCK, 2);
            assertHolds(two.asSlice(BLOCK), 4, BLOCK, 1);
        }
    }

    @Test
    void otherBlockSizesWork() {
        for (int size : new int[] {512, 1024, 65536}) {
            try (MemoryDevice small = MemoryDevice.create("ram-" + size, 8, size)) {
                assertEquals(8L * size, small.size());
                small.write(7, fill(buffer(arena, size), 7, size, 1));
                small.write(0, fill(buffer(arena, 2L * size), 0, size, 2));
                MemorySegment all = buffer(arena, small.size());
                small.read(0, all);
                assertHolds(all.asSlice(0, 2L * size), 0, size, 2);
                assertHolds(all.asSlice(7L * size), 7, size, 1);
            }
        }
    }

    @Test
    void badGeometryIsRejected() {
        var e = assertThrows(InvalidArgumentException.class, () -> MemoryDevice.create("ram-x", 0, 4096));
        assertTrue(e.getMessage().contains("ram-x") && e.getMessage().contains("not 0"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> MemoryDevice.create("ram-x", -5, 4096));
        assertTrue(e.getMessage().contains("not -5"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> MemoryDevice.create("ram-x", 8, 3000));
        assertTrue(e.getMessage().contains("block size 3000"), e.getMessage());
    }
}
