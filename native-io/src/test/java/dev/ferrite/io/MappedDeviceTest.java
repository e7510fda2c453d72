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
import static org.junit.jupiter.api.Assertions.assertTrue;

class MappedDeviceTest extends FileDeviceContract {
    /** MappedDevice's dirty-tracking granule. */
    private static final long REGION = 64L << 20;
    private static final java.util.regex.Pattern MAPPING_HEADER = java.util.regex.Pattern.compile("[0-9a-f]+-[0-9a-f]+ ");

    @Override
    BlockDevice open(Path path, DeviceOptions options) {
        return MappedDevice.open(path, options);
    }

    @Override
    protected boolean discardReadsZero() {
        return true;
    }

    /**
     * Kilobytes of the device's mapping whose pages are dirty in this process, from /proc/self/smaps: what
     * a flush must bring to zero.
     */
    private static long dirtyKilobytes(Path file) throws IOException {
        long kb = 0;
        boolean inMapping = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (MAPPING_HEADER.matcher(line).lookingAt()) {
                inMapping = line.endsWith(" " + file);
            } else if (inMapping && (line.startsWith("Shared_Dirty:") || line.startsWith("Private_Dirty:"))) {
                kb += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return kb;
    }

    @Test
    void flushWritesBackEveryDirtyRegionAndOnlyThose() throws IOException {
        device.close();
        Path big = dir.resolve("big");
        long blocksPerRegion = REGION / BLOCK;
        try (BlockDevice mapped = MappedDevice.open(big, DeviceOptions.defaults().withSize(3 * REGION + 16 * BLOCK))) {
            assertEquals(0, dirtyKilobytes(big), "a fresh mapping is clean");
            // Region 0, a write straddling regions 1 and 2, and the partial last region 3; nothing else in 1 and 2.
            long straddle = 2 * blocksPerRegion - 1;
            long last = mapped.blockCount() - 1;
            mapped.write(0, fill(buffer(arena, BLOCK), 0, BLOCK, 1));
            mapped.write(straddle, fill(buffer(arena, 2L * BLOCK), straddle, BLOCK, 2));
            mapped.write(last, fill(buffer(arena, BLOCK), last, BLOCK, 3));
            assertTrue(dirtyKilobytes(big) >= 16, "writes through the mapping should dirty 4 pages, smaps shows "
                    + dirtyKilobytes(big) + " kB");
            mapped.flush();
            assertEquals(0, dirtyKilobytes(big), "flush left dirty pages in the mapping");

            mapped.discard(blocksPerRegion + 5, 1);
            assertTrue(dirtyKilobytes(big) > 0, "discard should dirty the page it zeroes");
            mapped.flush();
            assertEquals(0, dirtyKilobytes(big), "flush missed a discarded region");

            IoBatch batch = new IoBatch(2).write(3 * blocksPerRegion, fill(buffer(arena, BLOCK), 3 * blocksPerRegion, BLOCK, 4))
                    .write(7, fill(buffer(arena, BLOCK), 7, BLOCK, 4));
            mapped.submit(batch);
            mapped.flush();
            assertEquals(0, dirtyKilobytes(big), "flush missed a region written by a batch");
        }
        try (BlockDevice reopened = MappedDevice.open(big, DeviceOptions.defaults())) {
            long straddle = 2 * blocksPerRegion - 1;
            MemorySegment two = buffer(arena, 2L * BLOCK);
            reopened.read(straddle, two);
            assertHolds(two, straddle, BLOCK, 2);
            MemorySegment one = buffer(arena, BLOCK);
            reopened.read(reopened.blockCount() - 1, one);
            assertHolds(one, reopened.blockCount() - 1, BLOCK, 3);
            reopened.read(3 * blocksPerRegion, one);
            assertHolds(one, 3 * blocksPerRegion, BLOCK, 4);
            reopened.read(blocksPerRegion + 5, one);
            Blocks.assertAllZero(one, "discarded block");
        }
    }
}
