package dev.ferrite.io;

import dev.ferrite.io.testkit.Blocks;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link DirectDevice} on a raw block device: a loop device over a file in a temporary directory, attached
 * with losetup (root only; skipped with a message otherwise) and always detached afterwards. Geometry
 * comes from BLKGETSIZE64 and BLKSSZGET; discard is BLKDISCARD.
 */
class LoopDeviceTest {
    private static final int BLOCK = 4096;
    private static final long SIZE = 8L << 20;

    @TempDir
    Path dir;

    private Path backingFile() throws IOException {
        Path file = dir.resolve("backing.img");
        try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength(SIZE);
        }
        return file;
    }

    /** What the block layer says the device can discard at once; 0 if it cannot discard. */
    private static long discardMaxBytes(Path device) throws IOException {
        Path attr = Path.of("/sys/class/block", device.getFileName().toString(), "queue", "discard_max_bytes");
        return java.nio.file.Files.isReadable(attr) ? Long.parseLong(java.nio.file.Files.readString(attr).strip()) : 0;
    }

    @Test
    void blockDeviceGeometryTransfersDiscardAndReopen() throws IOException {
        Path backing = backingFile();
        try (var loop = SystemTools.Loop.attach(backing); Arena arena = Arena.ofConfined()) {
            long blocks = SIZE / BLOCK;
            try (DirectDevice device = DirectDevice.open(loop.device, DeviceOptions.defaults())) {
                assertTrue(device.isBlockDevice());
                assertEquals(512, device.sectorSize(), "BLKSSZGET of a default loop device");
                assertEquals(SIZE, device.size(), "BLKGETSIZE64");
                assertEquals(blocks, device.blockCount());
                assertEquals(loop.device.toString(), device.name());

                device.write(0, fill(buffer(arena, BLOCK), 0, BLOCK, 1));
                device.write(blocks - 3, fill(buffer(arena, 3L * BLOCK), blocks - 3, BLOCK, 2));
                IoBatch batch = new IoBatch(64);
                for (long b = 100; b < 164; b++) {
                    batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 3));
                }
                device.submit(batch);
                device.flush();
                MemorySegment one = buffer(arena, BLOCK);
                device.read(blocks - 1, one);
                assertHolds(one, blocks - 1, BLOCK, 2);

                // Discard is advisory: either the loop driver punches a hole, or the device says it cannot and
                // DirectDevice skips it. Either way the neighbours keep their data.
                device.discard(101, 2);
                if (discardMaxBytes(loop.device) > 0) {
                    MemorySegment discarded = buffer(arena, 2L * BLOCK);
                    device.read(101, discarded);
                    Blocks.assertAllZero(discarded, "blocks discarded on a loop device over a file (a punched hole)");
                }
                device.read(100, one);
                assertHolds(one, 100, BLOCK, 3);
                device.read(103, one);
                assertHolds(one, 103, BLOCK, 3);

                var e = assertThrows(InvalidArgumentException.class, () -> device.read(blocks, one));
                assertTrue(e.getMessage().contains("lies outside the device's " + blocks + " blocks"), e.getMessage());
            }
            try (DirectDevice reopened = DirectDevice.open(loop.device, DeviceOptions.defaults().withEngine(IoEngineKind.THREADS))) {
                MemorySegment first = buffer(arena, BLOCK);
                reopened.read(0, first);
                assertHolds(first, 0, BLOCK, 1);
                MemorySegment batchBlocks = buffer(arena, 64L * BLOCK);
                reopened.read(100, batchBlocks.asSlice(0, BLOCK));
                reopened.read(103, batchBlocks.asSlice(3L * BLOCK, 61L * BLOCK));
                assertHolds(batchBlocks.asSlice(0, BLOCK), 100, BLOCK, 3);
                assertHolds(batchBlocks.asSlice(3L * BLOCK), 103, BLOCK, 3);
            }
        }
        // What went through the block device is in the backing file at the same offsets.
        try (FileChannel ch = FileChannel.open(backing, StandardOpenOption.READ)) {
            ByteBuffer last = ByteBuffer.allocate(3 * BLOCK);
            ch.read(last, SIZE - 3L * BLOCK);
            assertHolds(MemorySegment.ofArray(last.array()), SIZE / BLOCK - 3, BLOCK, 2);
        }
    }

    @Test
    void blockSizeBelowTheLogicalSectorSizeIsRejected() throws IOException {
        try (var loop = SystemTools.Loop.attach(backingFile(), "--sector-size", "4096"); Arena arena = Arena.ofConfined()) {
            for (int blockSize : new int[] {512, 1024, 2048}) {
                var e = assertThrows(InvalidArgumentException.class,
                        () -> DirectDevice.open(loop.device, DeviceOptions.defaults().withBlockSize(blockSize)));
                assertTrue(e.getMessage().startsWith(loop.device + ": block size " + blockSize
                        + " is not a multiple of the device's logical sector size 4096"), e.getMessage());
            }
            try (DirectDevice device = DirectDevice.open(loop.device, DeviceOptions.defaults().withBlockSize(8192))) {
                assertEquals(4096, device.sectorSize());
                assertEquals(SIZE / 8192, device.blockCount());
                device.write(3, fill(buffer(arena, 8192), 3, 8192, 1));
                MemorySegment back = buffer(arena, 8192);
                device.read(3, back);
                assertHolds(back, 3, 8192, 1);
            }
        }
    }

    @Test
    void sizeBeyondTheBlockDeviceIsRejected() throws IOException {
        try (var loop = SystemTools.Loop.attach(backingFile())) {
            var e = assertThrows(InvalidArgumentException.class,
                    () -> DirectDevice.open(loop.device, DeviceOptions.defaults().withSize(2 * SIZE)));
            assertTrue(e.getMessage().startsWith(loop.device + ": block device holds " + SIZE + " bytes, fewer than the "
                    + 2 * SIZE + " asked for"), e.getMessage());
            try (DirectDevice part = DirectDevice.open(loop.device, DeviceOptions.defaults().withSize(SIZE / 2))) {
                assertEquals(SIZE / 2 / BLOCK, part.blockCount());
            }
        }
    }

    @Test
    void readOnlyLoopDeviceRefusesWriters() throws IOException {
        try (var loop = SystemTools.Loop.attach(backingFile(), "--read-only")) {
            // The kernel would let it open for writing and fail every write with EPERM; DirectDevice says so at open.
            var e = assertThrows(DeviceException.class, () -> DirectDevice.open(loop.device, DeviceOptions.defaults()));
            assertEquals("open", e.operation());
            assertEquals(Errno.EROFS, e.errno());
            assertTrue(e.getMessage().startsWith(loop.device + ": open failed: EROFS"), e.getMessage());
            try (DirectDevice ro = DirectDevice.open(loop.device, DeviceOptions.defaults().withReadOnly(true))) {
                assertTrue(ro.isReadOnly());
                assertEquals(SIZE / BLOCK, ro.blockCount());
            }
        }
    }
}
