package dev.ferrite.io;

import dev.ferrite.io.testkit.BlockDeviceContract;

import dev.ferrite.io.testkit.Blocks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class OverlayDeviceTest extends BlockDeviceContract {
    private MemoryDevice base;

    @Override
    protected BlockDevice create(long blocks, int blockSize) {
        base = MemoryDevice.create("ram-under-overlay", blocks, blockSize);
        return OverlayDevice.over(base);
    }

    @Override
    protected boolean discardReadsZero() {
        return true;
    }

    @Override
    protected void assertContentsAfterClose(byte[] expected) {
        // The overlay's copies are dropped on close; what the device held is checked below.
    }

    @AfterEach
    void closeBase() {
        base.close();
    }

    @Test
    void writesNeverReachTheDeviceUnderneath() {
        int bs = base.blockSize();
        try (Arena arena = Arena.ofConfined()) {
            base.write(0, fill(buffer(arena, 8L * bs), 0, bs, 1));
            byte[] before = Blocks.contents(base);
            device.write(2, fill(buffer(arena, 2L * bs), 2, bs, 2));
            device.write(6, fill(buffer(arena, bs), 6, bs, 3));
            device.flush();
            device.discard(7, 1);
            assertArrayEquals(before, Blocks.contents(base), "the device under the overlay changed");

            // one read across blocks of both kinds: 0-1 and 5 from the device, 2-3 and 6 from the overlay
            MemorySegment all = buffer(arena, 8L * bs);
            device.read(0, all);
            assertHolds(all.asSlice(0, 2L * bs), 0, bs, 1);
            assertHolds(all.asSlice(2L * bs, 2L * bs), 2, bs, 2);
            assertHolds(all.asSlice(4L * bs, 2L * bs), 4, bs, 1);
            assertHolds(all.asSlice(6L * bs, bs), 6, bs, 3);
            Blocks.assertAllZero(all.asSlice(7L * bs, bs), "a discarded block");
            assertEquals(4, ((OverlayDevice) device).blocksWritten());
        }
        device.close();
        assertTrue(base.blockCount() > 0); // still open: reading it works
        try (Arena arena = Arena.ofConfined()) {
            base.read(0, buffer(arena, bs));
        }
    }

    @Test
    void aReadOnlyFileTakesWritesInTheOverlay(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("image");
        Files.write(file, new byte[64 * 4096]);
        try (DirectDevice ro = DirectDevice.open(file, DeviceOptions.defaults().withReadOnly(true));
             OverlayDevice overlay = OverlayDevice.over(ro);
             Arena arena = Arena.ofConfined()) {
            overlay.write(3, fill(buffer(arena, 4096), 3, 4096, 9));
            MemorySegment back = buffer(arena, 4096);
            overlay.read(3, back);
            assertHolds(back, 3, 4096, 9);
            assertTrue(overlay.tryLockExclusive());
            try (DirectDevice other = DirectDevice.open(file, DeviceOptions.defaults().withReadOnly(true))) {
                assertFalse(other.tryLockExclusive(), "the overlay's lock is the device's");
            }
        }
        assertArrayEquals(new byte[64 * 4096], Files.readAllBytes(file));
    }
}
