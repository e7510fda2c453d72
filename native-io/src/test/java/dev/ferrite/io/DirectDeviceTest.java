package dev.ferrite.io;

import dev.ferrite.io.testkit.Blocks;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
    void autoEngineSettlesOnARealOne() {
        IoEngineKind kind = ((DirectDevice) device).engine();
        assertTrue(kind == IoEngineKind.IO_URING || kind == IoEngineKind.THREADS, kind.toString());
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
