package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Needs root, losetup and mkfs.xfs; skipped without them. */
class LoopDeviceTest {
    /**
     * What the exit hook does (Ctrl-C while a benchmark writes in the mount): the mount goes although a
     * file in it is still open, the image and the mount point are deleted, and the device is detached once
     * let go.
     */
    @Test
    void exitReleasesABusyMount(@TempDir Path dir) throws IOException {
        assumeTrue(LoopDevice.available(LoopDevice.Kind.XFS), "needs root, losetup and mkfs.xfs");
        LoopDevice loop = LoopDevice.create(dir, 300L << 20, LoopDevice.Kind.XFS);
        Path mount = loop.mountPoint();
        assertTrue(loop.mountOptions() != null && loop.mountOptions().startsWith("rw"), loop.mountOptions());
        try (FileChannel busy = FileChannel.open(mount.resolve("open"), StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
            loop.releaseAtExit();
            assertFalse(Files.exists(mount), "mount point " + mount + " is still there");
            assertTrue(Files.readString(Path.of("/proc/self/mounts")).lines().noneMatch(l -> l.contains(mount.toString())),
                    "still mounted");
        }
        try (var files = Files.list(dir)) {
            assertTrue(files.findAny().isEmpty(), "the image is deleted");
        }
    }
}
