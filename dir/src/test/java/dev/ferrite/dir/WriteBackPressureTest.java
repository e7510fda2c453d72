package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Write-back under pressure on a volume whose cache holds {@link PageCache#MIN_FRAMES} frames and whose
 * dirty pages never expire during the test: a writer finding half the frames dirty writes back the file
 * dirty longest, not its own (which it is still writing: written back part way, it would end in more extents).
 */
class WriteBackPressureTest extends FileTestBase {
    @Override
    VolumeOptions options() {
        return VolumeFixtures.OPTIONS.withDataCacheBytes((long) PageCache.MIN_FRAMES * BS).withDirtyExpireMillis(600_000);
    }

    @Test
    void aWriterUnderPressureWritesBackTheFileDirtyLongest() {
        MemorySegment block = MemorySegment.ofArray(new byte[BS - 1]); // one byte short: buffered
        try (Handle a = ns.create(root, "a", 0644, true); Handle b = ns.create(root, "b", 0644, true)) {
            for (int k = 0; k < 6; k++) {
                ns.write(a, (long) k * BS, block);
            }
            for (int k = 0; k < 4; k++) { // the fourth finds 9 of 16 frames dirty
                ns.write(b, (long) k * BS, block);
            }
            assertEquals(5L * BS + BS - 1, ns.files.committedSize(a.inode), "the older file was written back");
            assertEquals(0, ns.files.committedSize(b.inode), "the writer's own file was written back");
        }
    }
}
