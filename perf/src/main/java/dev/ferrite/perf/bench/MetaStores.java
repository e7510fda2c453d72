package dev.ferrite.perf.bench;

import java.nio.file.Path;

/** The stores the metadata workloads run on, as {@link MetaBench.Target}s. */
public final class MetaStores {
    private MetaStores() {
    }

    /** A new directory under {@code base} for each run, deleted after it. */
    public static MetaBench.Target posix(Path base, String label) {
        return new MetaBench.Target(label, files -> PosixMeta.in(base));
    }

    /** A Ferrite volume on a new file under {@code base} for each run, sized for the files, deleted after it. */
    public static MetaBench.Target ferrite(Path base, long cacheBytes) {
        return new MetaBench.Target("ferrite", files -> FerriteMeta.create(base, files, cacheBytes));
    }

    /** The ceiling: a new namespace in the heap for each run, nothing durable ({@link MemoryMeta}). */
    public static MetaBench.Target memory() {
        return new MetaBench.Target("memory", files -> new MemoryMeta());
    }
}
