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
    void exitReleasesABusyMount(@TempDir Path dir) throws IOException, InterruptedException {
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
        // Once let go, the device's number may become another process's device: a later close (or the
        // exit hook itself, at the JVM's exit) must not detach that one.
        String name = loop.device().toString();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (attached().contains(name + " ") && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertFalse(attached().contains(name + " "), name + " is still attached 10 s after its mount was let go");
        Path other = sparse(dir.resolve("other.img"), 64L << 20);
        LoopDevice.run("losetup", name, other.toString());
        try {
            loop.close();
            assertTrue(attached().contains(name + " " + other), "released twice: " + name + " over another image was detached");
        } finally {
            if (attached().contains(name + " " + other)) {
                LoopDevice.run("losetup", "-d", name);
            }
        }
    }

    /** Each attached loop device as "NAME BACK-FILE". */
    private static String attached() {
        return LoopDevice.run("losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-FILE");
    }

    /**
     * A run killed with SIGKILL leaves its devices attached and mounted: the next run releases them (only
     * those of processes no longer alive), and leaves a live run's alone.
     */
    @Test
    void theLeftoversOfAKilledRunAreReleasedAndALiveRunsAreNot(@TempDir Path dir) throws Exception {
        assumeTrue(LoopDevice.available(LoopDevice.Kind.XFS), "needs root, losetup and mkfs.xfs");
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        long dead = gone.pid();
        Path image = sparse(dir.resolve(LoopDevice.PREFIX + dead + "-1.img"), 300L << 20);
        Path mount = Files.createDirectory(dir.resolve(LoopDevice.MOUNT_PREFIX + dead + "-1"));
        String device = LoopDevice.run("losetup", "--find", "--show", image.toString()).strip();
        LoopDevice.run("mkfs.xfs", "-q", "-f", device);
        LoopDevice.run("mount", device, mount.toString());
        Path live = sparse(dir.resolve(LoopDevice.PREFIX + ProcessHandle.current().pid() + "-2.img"), 64L << 20);
        String liveDevice = LoopDevice.run("losetup", "--find", "--show", live.toString()).strip();
        try {
            assertTrue(LoopDevice.releaseLeftovers(dir) >= 1);
            assertFalse(LoopDevice.run("losetup", "--list", "--noheadings", "--output", "BACK-FILE").contains(image.toString()),
                    "the killed run's device is still attached");
            assertTrue(Files.readString(Path.of("/proc/self/mounts")).lines().noneMatch(l -> l.contains(mount.toString())),
                    "still mounted");
            assertFalse(Files.exists(image), "image left behind");
            assertFalse(Files.exists(mount), "mount point left behind");
            assertTrue(LoopDevice.run("losetup", "--list", "--noheadings", "--output", "BACK-FILE").contains(live.toString()),
                    "a live run's device was detached");
            assertTrue(Files.exists(live));
        } finally {
            LoopDevice.run("losetup", "-d", liveDevice);
        }
    }

    private static Path sparse(Path file, long bytes) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.allocate(1), bytes - 1);
        }
        return file;
    }
}
