package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.List;

/**
 * A kernel file system made for the run on a RAM-backed loop device of its own, mounted in a private
 * directory and driven as {@link PosixMeta} drives any host directory; unmounted, detached and deleted
 * when the run is done (and, through {@link LoopDevice}, on Ctrl-C or after a killed run). What the
 * metadata workloads compare Ferrite with when the host's own directory is tmpfs, whose caches cannot be
 * dropped and which no database keeps its data on.
 *
 * <p>The device is the size of Ferrite's for the same files or more (a file system that keeps an
 * inode of 512 bytes a file needs more), and mkfs makes room for every file the run creates: ext4's
 * default of an inode per 16 KiB would run out, so it gets {@code -N}; XFS may give up to half of the
 * device to inodes ({@code -i maxpct=50}); btrfs allocates them as it goes. Everything else is mkfs's and
 * mount's defaults.
 */
final class LoopMeta implements MetaStore {
    private final LoopDevice loop;
    private final PosixMeta posix;
    private final String setup;

    private LoopMeta(LoopDevice loop, PosixMeta posix, String setup) {
        this.loop = loop;
        this.posix = posix;
        this.setup = setup;
    }

    /** Bytes of the device for {@code files}: Ferrite's, or 2 KiB a file and 256 MiB if that is more. */
    static long deviceBytes(long files) {
        return Math.max(FerriteMeta.deviceBytes(files), files * 2048 + (256L << 20));
    }

    /** mkfs's options for room for {@code files} files and their directories. */
    static List<String> mkfsOptions(LoopDevice.Kind kind, long files) {
        return switch (kind) {
            case EXT4 -> List.of("-N", Long.toString(files + files / 8 + 4096));
            case XFS -> List.of("-i", "maxpct=50");
            default -> List.of();
        };
    }

    /** A new file system of {@code kind} for {@code files}, its image and mount point in {@code base}. */
    static LoopMeta create(Path base, long files, LoopDevice.Kind kind, MetaApi api) {
        long bytes = deviceBytes(files);
        List<String> options = mkfsOptions(kind, files);
        LoopDevice loop = LoopDevice.create(base, bytes, kind, options);
        try {
            PosixMeta posix = PosixMeta.in(loop.mountPoint(), api);
            String setup = kind.label() + " (" + kind.mkfs + (options.isEmpty() ? "" : " " + String.join(" ", options))
                    + ", otherwise defaults; mounted " + loop.mountOptions() + ") on " + loop.device() + ", "
                    + KvBench.size(bytes) + " over " + loop.backing();
            return new LoopMeta(loop, posix, setup);
        } catch (RuntimeException e) {
            loop.close();
            throw e;
        }
    }

    @Override
    public String describe() {
        return setup + "; " + posix.describe();
    }

    @Override
    public Session session() {
        return posix.session();
    }

    @Override
    public void sync() {
        posix.sync();
    }

    @Override
    public String coldCache() {
        return posix.coldCache();
    }

    @Override
    public void check() {
        posix.check();
    }

    @Override
    public void close() {
        try {
            posix.close();
        } finally {
            loop.close();
        }
    }
}
