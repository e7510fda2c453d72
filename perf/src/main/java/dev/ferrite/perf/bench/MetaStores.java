package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.Optional;

/** The stores the metadata workloads run on, as {@link MetaBench.Target}s. */
public final class MetaStores {
    private MetaStores() {
    }

    /**
     * A new directory under {@code base} for each run, deleted after it, driven through {@code api}; its
     * results carry {@code label} as {@link MetaApi#targetLabel} gives it.
     */
    public static MetaBench.Target posix(Path base, String label, MetaApi api) {
        return new MetaBench.Target(api.targetLabel(label), files -> PosixMeta.in(base, api), false);
    }

    /**
     * A Ferrite volume on a new file under {@code base} for each run, sized for the files, deleted after it,
     * driven through {@code api}.
     */
    public static MetaBench.Target ferrite(Path base, long cacheBytes, MetaApi api) {
        return new MetaBench.Target(api.targetLabel("ferrite"), files -> FerriteMeta.create(base, files, cacheBytes, api), true);
    }

    /** The ceiling: a new namespace in the heap for each run, nothing durable ({@link MemoryMeta}), driven through {@code api}. */
    public static MetaBench.Target memory(MetaApi api) {
        return new MetaBench.Target(api.targetLabel("memory"), files -> new MemoryMeta(api), true);
    }

    /**
     * A kernel file system of {@code kind} made for each run on a RAM-backed loop device ({@link LoopMeta}),
     * its image and mount point in {@code base}, driven through {@code api}.
     */
    public static MetaBench.Target loop(LoopDevice.Kind kind, Path base, MetaApi api) {
        return new MetaBench.Target(api.targetLabel(kind.label()), files -> LoopMeta.create(base, files, kind, api), false);
    }

    /**
     * Ferrite through FUSE: a volume made for each run on a RAM-backed loop device and mounted
     * ({@link FuseMeta}), its image and mount point in {@code base}, driven through {@code api} as the kernel
     * file systems are.
     */
    public static MetaBench.Target fuse(Path base, long cacheBytes, MetaApi api) {
        return new MetaBench.Target(api.targetLabel("ferrite-fuse"), files -> FuseMeta.create(base, files, cacheBytes, api), false);
    }

    /** Why this process cannot run {@link #fuse}, if it cannot: no FUSE device, or no loop devices. */
    public static Optional<String> fuseUnavailable() {
        return FuseVolume.unavailable().or(() -> LoopDevice.unavailable(LoopDevice.Kind.RAW));
    }
}
