package dev.ferrite.io;

import dev.ferrite.io.testkit.BlockDeviceContract;

import dev.ferrite.io.testkit.Blocks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicBoolean;

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

    /**
     * A writer stores n in the last block, then n in the first, over and over: every copy taken meanwhile
     * must show the first block no newer than the last (a copy made while the writes run used to read the
     * first block early and the last block late, an image no crash can leave).
     */
    @Test
    void aCopyOfADeviceBeingWrittenIsOnePointInTime() throws Exception {
        try (Arena shared = Arena.ofShared(); MemoryDevice big = MemoryDevice.create("ram-live", 8192, BLOCK)) {
            MemorySegment out = shared.allocate(BLOCK, BlockDevice.BUFFER_ALIGNMENT);
            AtomicBoolean stop = new AtomicBoolean();
            Thread writer = Thread.ofPlatform().start(() -> {
                for (long n = 1; !stop.get(); n++) {
                    out.set(ValueLayout.JAVA_LONG, 0, n);
                    big.write(big.blockCount() - 1, out);
                    big.write(0, out);
                }
            });
            try {
                MemorySegment in = shared.allocate(BLOCK, BlockDevice.BUFFER_ALIGNMENT);
                for (int c = 0; c < 100; c++) {
                    try (MemoryDevice copy = big.copy("ram-live-copy")) {
                        copy.read(0, in);
                        long first = in.get(ValueLayout.JAVA_LONG, 0);
                        copy.read(copy.blockCount() - 1, in);
                        long last = in.get(ValueLayout.JAVA_LONG, 0);
                        assertTrue(first == last || first == last - 1,
                                "copy " + c + ": first block holds " + first + ", last " + last);
                    }
                }
            } finally {
                stop.set(true);
                writer.join();
            }
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
