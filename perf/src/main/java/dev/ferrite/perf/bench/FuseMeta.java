package dev.ferrite.perf.bench;

import java.nio.file.Path;

import dev.ferrite.dir.VolumeOptions;

/**
 * Ferrite served through FUSE ({@link FuseVolume}) on a RAM-backed loop device of its own, sized as
 * {@link FerriteMeta}'s volume, driven as {@link PosixMeta} drives any host directory: the same system
 * calls as the kernel file systems' {@link LoopMeta}, each a round trip to the volume's server. Durability:
 * {@code sync -f} on the directory and then {@code Volume.sync}, as FUSE passes no syncfs to its
 * server. Cold cache: the volume unmounted, closed, opened and mounted again, then the kernel's caches
 * dropped.
 */
final class FuseMeta implements MetaStore {
    private final LoopDevice loop;
    private final FuseVolume fuse;
    private final PosixMeta posix;

    private FuseMeta(LoopDevice loop, FuseVolume fuse, PosixMeta posix) {
        this.loop = loop;
        this.fuse = fuse;
        this.posix = posix;
    }

    /**
     * A new volume for {@code files} on a loop device whose image is in {@code base}, mounted there too,
     * with {@link FerriteMeta}'s cache and log.
     */
    static FuseMeta create(Path base, long files, long cacheBytes, MetaApi api) {
        LoopDevice loop = LoopDevice.create(base, FerriteMeta.deviceBytes(files), LoopDevice.Kind.RAW);
        FuseVolume fuse = null;
        try {
            fuse = FuseVolume.create(loop.device(), base, dev -> VolumeOptions.defaults().withCacheBytes(cacheBytes)
                    .withLogBlocks((int) (FerriteMeta.logBytes(files) / dev.blockSize())));
            return new FuseMeta(loop, fuse, PosixMeta.in(fuse.mountPoint(), api));
        } catch (RuntimeException e) {
            if (fuse != null) {
                fuse.close();
            }
            loop.close();
            throw e;
        }
    }

    @Override
    public String describe() {
        return fuse.describe() + "; " + posix.describe() + " and Volume.sync";
    }

    @Override
    public Session session() {
        return posix.session();
    }

    @Override
    public void sync() {
        posix.sync();
        fuse.volume().sync();
    }

    @Override
    public String coldCache() {
        sync();
        fuse.remount();
        return "volume unmounted, closed, opened and mounted again (empty buffer and inode caches); " + posix.coldCache();
    }

    @Override
    public void check() {
        posix.check();
    }

    @Override
    public Contention.Snapshot counters() {
        return fuse.counters();
    }

    @Override
    public void close() {
        try {
            posix.close();
        } finally {
            try {
                fuse.close();
            } finally {
                loop.close();
            }
        }
    }
}
