package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.DirCookie;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.DirPage;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MappedDevice;

/**
 * A Ferrite volume formatted on a file in the run's directory (O_DIRECT where the filesystem allows it,
 * else mapped), driven through the handle API ({@link MetaApi#HANDLE}: each session opens its directories
 * once, then creates, stats, unlinks and reads them by handle) or the path API ({@link MetaApi#PATH}:
 * every call names the full path from the root). {@link #sync()} syncs the
 * volume (forces the log); {@link #coldCache()} closes the volume and opens it again, so the walk starts
 * from an empty buffer cache and inode cache.
 */
final class FerriteMeta implements MetaStore {
    private static final int BLOCK = DeviceOptions.DEFAULT_BLOCK_SIZE;
    private static final int PAGE = 1024;

    /** Deletes what the device is made over: a scratch file, or a loop device over a region of the run's device. */
    private final Runnable release;
    private final String where;
    private final BlockDevice device;
    private final String kind;
    private final VolumeOptions options;
    private final MetaApi api;
    private Volume volume;
    private Namespace ns;

    private FerriteMeta(Runnable release, String where, BlockDevice device, String kind, VolumeOptions options, MetaApi api) {
        this.release = release;
        this.where = where;
        this.device = device;
        this.kind = kind;
        this.options = options;
        this.api = api;
        Volume.format(device, options);
        mount();
    }

    /**
     * Room for {@code files}: a file takes ~400 bytes (its share of an inode chunk, its directory entry and
     * the tree above it; measured at 1M files), given twice, plus the log and slack. The file is
     * preallocated, and the default directory is RAM-backed: 2 KiB a file made 10M files a 20 GiB volume.
     */
    static long deviceBytes(long files) {
        return Math.max(512L << 20, wholeMiB(files * 800 + logBytes(files) + (256L << 20)));
    }

    /** The log: 64 bytes a file and 8 MiB, within 4 MiB and 1 GiB. */
    static long logBytes(long files) {
        return Math.clamp(wholeMiB(files * 64 + (8L << 20)), 4L << 20, 1L << 30);
    }

    private static long wholeMiB(long bytes) {
        return (bytes + (1 << 20) - 1) & -(1L << 20);
    }

    /**
     * A volume for {@code files} on a new file in {@code dir}, or, when the run carves a device
     * ({@link DeviceRegions}), on a loop device over a region of it, as the kernel file systems beside it are.
     */
    static FerriteMeta create(Path dir, long files, long cacheBytes, MetaApi api) {
        long size = deviceBytes(files);
        if (DeviceRegions.current().isPresent()) {
            LoopDevice loop = LoopDevice.create(dir, size, LoopDevice.Kind.RAW);
            try {
                return create(loop::close, loop.device() + " over " + loop.backing(),
                        DirectDevice.open(loop.device(), DeviceOptions.defaults()), "DirectDevice (O_DIRECT)", files, cacheBytes, api);
            } catch (RuntimeException e) {
                loop.close();
                throw e;
            }
        }
        ScratchFile file = ScratchFile.create(dir, "ferrite-", ".vol");
        BlockDevice device;
        String kind;
        try {
            DirectDevice direct = DirectDevice.open(file.path(), DeviceOptions.defaults().withSize(size));
            device = direct;
            kind = "DirectDevice (O_DIRECT, " + direct.engine() + " engine)";
        } catch (DeviceException e) {
            if (e.errno() != Errno.EINVAL) {
                file.close();
                throw e;
            }
            device = MappedDevice.open(file.path(), DeviceOptions.defaults().withSize(size));
            kind = "MappedDevice (no O_DIRECT here)";
        } catch (RuntimeException e) {
            file.close();
            throw e;
        }
        try {
            return create(file::close, file.path().toString(), device, kind, files, cacheBytes, api);
        } catch (RuntimeException e) {
            file.close();
            throw e;
        }
    }

    /** Formats and mounts a volume on {@code device}; closes the device if that fails (the caller releases what it is made over). */
    private static FerriteMeta create(Runnable release, String where, BlockDevice device, String kind, long files,
                                      long cacheBytes, MetaApi api) {
        try {
            return new FerriteMeta(release, where, device, kind, VolumeOptions.defaults().withCacheBytes(cacheBytes)
                    .withLogBlocks((int) (logBytes(files) / device.blockSize())), api);
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
    }

    private void mount() {
        volume = Volume.open(device, options);
        ns = volume.namespace();
    }

    @Override
    public Contention.Snapshot counters() {
        return Contention.Snapshot.of(volume);
    }

    @Override
    public String describe() {
        return "volume on " + where + ", " + kind + ", " + KvBench.size(device.size()) + " (log "
                + KvBench.size((long) options.logBlocks() * device.blockSize()) + "), "
                + volume.statfs().agCount() + " allocation groups, cache "
                + KvBench.size(options.cacheBytes()) + ", " + api.label() + " API; a transaction per operation, sync at phase end";
    }

    @Override
    public Session session() {
        return api == MetaApi.HANDLE ? new HandleSession() : new PathSession();
    }

    @Override
    public void sync() {
        volume.sync();
    }

    @Override
    public String coldCache() {
        volume.close();
        mount();
        return "volume closed and opened again (empty buffer and inode caches)";
    }

    @Override
    public void check() {
        CheckReport report = ns.check();
        if (!report.clean()) {
            throw new IllegalStateException("ferrite check found " + report.problems().size() + " problems: "
                    + report.problems().subList(0, Math.min(10, report.problems().size())));
        }
    }

    @Override
    public void close() {
        try {
            volume.close();
        } finally {
            try {
                device.close();
            } finally {
                release.run();
            }
        }
    }

    private final class HandleSession implements Session {
        private final Map<String, Handle> dirs = new HashMap<>();
        private final Handle root = ns.openRoot();

        private Handle dir(String name) {
            Handle h = dirs.get(name);
            if (h == null) {
                h = ns.open(root, name);
                dirs.put(name, h);
            }
            return h;
        }

        @Override
        public void mkdir(String dir) {
            dirs.put(dir, ns.mkdir(root, dir, 0755));
        }

        @Override
        public void create(String dir, String name) {
            ns.create(dir(dir), name, 0644, true).close();
        }

        @Override
        public long list(String dir, Consumer<String> names) {
            Handle d = dir(dir);
            return FerriteMeta.list(c -> ns.readdir(d, c, PAGE), names);
        }

        @Override
        public long stat(String dir, String name) {
            return ns.lstat(dir(dir), name).size();
        }

        @Override
        public void unlink(String dir, String name) {
            ns.unlink(dir(dir), name);
        }

        @Override
        public void rmdir(String dir) {
            Handle h = dirs.remove(dir);
            if (h != null) {
                h.close();
            }
            ns.rmdir(root, dir);
        }

        @Override
        public void close() {
            for (Handle h : dirs.values()) {
                h.close();
            }
            root.close();
        }
    }

    /** Hands every name that {@code read} returns, page after page, to {@code names}; returns the count. */
    private static long list(Function<DirCookie, DirPage> read, Consumer<String> names) {
        long n = 0;
        for (DirCookie c = DirCookie.START; ; ) {
            DirPage page = read.apply(c);
            for (DirEntry e : page.entries()) {
                names.accept(e.name());
                n++;
            }
            if (page.end()) {
                return n;
            }
            c = page.next();
        }
    }

    /** Every call names the full path from the root, which the namespace walks each time. */
    private final class PathSession implements Session {
        @Override
        public void mkdir(String dir) {
            ns.mkdir("/" + dir, 0755);
        }

        @Override
        public void create(String dir, String name) {
            ns.create("/" + dir + "/" + name, 0644, true);
        }

        @Override
        public long list(String dir, Consumer<String> names) {
            String path = "/" + dir;
            return FerriteMeta.list(c -> ns.readdir(path, c, PAGE), names);
        }

        @Override
        public long stat(String dir, String name) {
            return ns.lstat("/" + dir + "/" + name).size();
        }

        @Override
        public void unlink(String dir, String name) {
            ns.unlink("/" + dir + "/" + name);
        }

        @Override
        public void rmdir(String dir) {
            ns.rmdir("/" + dir);
        }

        @Override
        public void close() {
        }
    }
}
