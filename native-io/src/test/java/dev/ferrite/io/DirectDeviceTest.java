package dev.ferrite.io;

import dev.ferrite.io.testkit.Blocks;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** The contract on an O_DIRECT regular file; batches per engine are in {@link IoEngineTest}, block devices in {@link LoopDeviceTest}. */
class DirectDeviceTest extends FileDeviceContract {
    @Override
    BlockDevice open(Path path, DeviceOptions options) {
        return DirectDevice.open(path, options);
    }

    @Override
    protected boolean discardReadsZero() {
        return false; // a hole where the filesystem punches one, the old data where it cannot
    }

    @Test
    void regularFileReportsFileGeometry() {
        DirectDevice direct = (DirectDevice) device;
        assertFalse(direct.isBlockDevice());
        assertEquals(512, direct.sectorSize());
        assertTrue(direct.toString().contains(file.toString()), direct.toString());
    }

    @Test
    void threadsEngineIsUsedWhenAskedFor() {
        try (DirectDevice threads = DirectDevice.open(file, DeviceOptions.defaults().withEngine(IoEngineKind.THREADS))) {
            assertEquals(IoEngineKind.THREADS, threads.engine());
        }
    }

    @Test
    void autoEngineSettlesOnARealOne() throws IOException {
        IoEngineKind kind = ((DirectDevice) device).engine();
        if (onTmpfs(file)) {
            assertEquals(IoEngineKind.SYNC, kind);
        } else {
            assertTrue(kind == IoEngineKind.IO_URING || kind == IoEngineKind.THREADS, kind.toString());
        }
    }

    /**
     * A file on tmpfs: AUTO runs batches on the submitting thread (io_uring would punt each request to a
     * kernel worker), and they work there; an engine asked for by name is still the one used.
     */
    @Test
    void autoEngineOnTmpfsRunsBatchesOnTheSubmitter() throws IOException {
        Path shm = Path.of("/dev/shm");
        assumeTrue(Files.isDirectory(shm) && onTmpfs(shm), "no tmpfs at /dev/shm");
        Path onShm = Files.createTempFile(shm, "direct-device-test", ".dev");
        try {
            try (DirectDevice auto = DirectDevice.open(onShm, DeviceOptions.defaults().withSize(16L * 4096))) {
                assertEquals(IoEngineKind.SYNC, auto.engine());
                assertTrue(auto.toString().contains("SYNC"), auto.toString());
                IoBatch writes = new IoBatch(16);
                for (int b = 0; b < 16; b++) {
                    writes.write(b, fill(buffer(arena, 4096), b, 4096, 3));
                }
                auto.submit(writes);
                MemorySegment all = buffer(arena, 16L * 4096);
                auto.submit(new IoBatch(1).read(0, all));
                for (int b = 0; b < 16; b++) {
                    assertHolds(all.asSlice(b * 4096L, 4096), b, 4096, 3);
                }
            }
            try (DirectDevice threads = DirectDevice.open(onShm, DeviceOptions.defaults().withEngine(IoEngineKind.THREADS))) {
                assertEquals(IoEngineKind.THREADS, threads.engine());
            }
        } finally {
            Files.deleteIfExists(onShm);
        }
    }

    private static boolean onTmpfs(Path path) throws IOException {
        return Files.getFileStore(path).type().equals("tmpfs");
    }

    @Test
    void sectorSizedBlocksWork() {
        device.close();
        try (DirectDevice small = DirectDevice.open(dir.resolve("small"), DeviceOptions.defaults().withBlockSize(512).withSize(64 * 512))) {
            assertEquals(64, small.blockCount());
            small.write(63, fill(buffer(arena, 512), 63, 512, 1));
            small.write(0, fill(buffer(arena, 3 * 512), 0, 512, 2));
            MemorySegment all = buffer(arena, small.size());
            small.read(0, all);
            assertHolds(all.asSlice(0, 3 * 512), 0, 512, 2);
            assertHolds(all.asSlice(63 * 512), 63, 512, 1);
            Blocks.assertAllZero(all.asSlice(3 * 512, 60 * 512), "never written blocks of a new file");
        }
    }
}
