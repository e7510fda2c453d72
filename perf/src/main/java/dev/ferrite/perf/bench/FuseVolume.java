package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.function.Function;

import dev.ferrite.dir.FileSystemMount;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;

/**
 * A Ferrite volume formatted on a device and served through FUSE ({@link Volume#mount}) on a directory
 * made for it: how the workloads run on Ferrite through the kernel's VFS, as unmodified programs see it,
 * beside the kernel's file systems on loop devices like its own. The mount's settings are its defaults
 * (docs/mount.md). Closing it unmounts, closes the volume and device, and removes the directory.
 */
final class FuseVolume implements AutoCloseable {
    private static final Path FUSE_DEVICE = Path.of("/dev/fuse");

    private final DirectDevice device;
    private final VolumeOptions options;
    private final Path mountPoint;
    private Volume volume;
    private FileSystemMount mount;

    private FuseVolume(DirectDevice device, VolumeOptions options, Path mountPoint) {
        this.device = device;
        this.options = options;
        this.mountPoint = mountPoint;
    }

    /** Why this process cannot mount through FUSE, if it cannot. */
    static Optional<String> unavailable() {
        if (!Files.isReadable(FUSE_DEVICE) || !Files.isWritable(FUSE_DEVICE)) {
            return Optional.of(FUSE_DEVICE + " is missing or not usable by this user");
        }
        if (!LoopDevice.onPath("fusermount3")) { // comes with libfuse3, which the mount binds
            return Optional.of("fuse3 is not installed (no fusermount3 on the PATH; apt-get install fuse3)");
        }
        return Optional.empty();
    }

    /**
     * Formats a volume on {@code devicePath} with the options {@code options} gives for the opened device,
     * and mounts it on a new directory in {@code base}.
     */
    static FuseVolume create(Path devicePath, Path base, Function<BlockDevice, VolumeOptions> optionsFor) {
        DirectDevice dev = DirectDevice.open(devicePath, DeviceOptions.defaults());
        Path dir = null;
        try {
            VolumeOptions options = optionsFor.apply(dev);
            Volume.format(dev, options);
            dir = Files.createTempDirectory(base, "ferrite-fuse-");
            FuseVolume f = new FuseVolume(dev, options, dir);
            f.open();
            return f;
        } catch (IOException e) {
            dev.close();
            throw new UncheckedIOException("cannot make a mount point in " + base + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            dev.close();
            deleteQuietly(dir);
            throw e;
        }
    }

    private void open() {
        volume = Volume.open(device, options);
        try {
            mount = volume.mount(mountPoint);
        } catch (RuntimeException e) {
            volume.close();
            volume = null;
            throw e;
        }
    }

    Path mountPoint() {
        return mountPoint;
    }

    Volume volume() {
        return volume;
    }

    /** The volume's counters with the requests the mount served so far. */
    Contention.Snapshot counters() {
        return Contention.Snapshot.of(volume, mount.requestCounts());
    }

    /** Unmounts, closes the volume, opens and mounts it again: Ferrite's caches and the kernel's start cold. */
    void remount() {
        closeMountAndVolume();
        open();
    }

    /** How the target is set up, for the report. */
    String describe() {
        return "volume on " + device.name() + " (O_DIRECT), cache " + (options.cacheBytes() == 0 ? "the default"
                : KvBench.size(options.cacheBytes())) + ", log " + (options.logBlocks() == 0 ? "the default"
                : KvBench.size((long) options.logBlocks() * device.blockSize())) + ", served through FUSE by Volume.mount"
                + " on " + mountPoint + " (the mount's defaults: docs/mount.md)";
    }

    private void closeMountAndVolume() {
        try {
            if (mount != null) {
                mount.close();
            }
        } finally {
            mount = null;
            if (volume != null) {
                Volume v = volume;
                volume = null;
                v.close();
            }
        }
    }

    @Override
    public void close() {
        try {
            closeMountAndVolume();
        } finally {
            device.close();
            deleteQuietly(mountPoint);
        }
    }

    private static void deleteQuietly(Path dir) {
        if (dir != null) {
            try {
                Files.deleteIfExists(dir);
            } catch (IOException e) {
                // an empty directory in the run's scratch space: the run's cleanup removes it
            }
        }
    }
}
