package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.Locale;

/**
 * The stores {@code bench kv} compares, each opened fresh in a directory of its own ({@code memory}, the
 * ceiling, keeps nothing there).
 */
public enum KvTarget {
    FERRITE, ROCKSDB, LMDB, XODUS, MVSTORE, MEMORY;

    /**
     * The name results carry: {@code ferrite}, {@code rocksdb}, {@code lmdb}, {@code xodus}, {@code mvstore},
     * {@code memory}.
     */
    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    KvStore open(Path dir, long keys, long cacheBytes) {
        return switch (this) {
            case FERRITE -> FerriteKv.open(dir, keys, cacheBytes);
            case ROCKSDB -> RocksKv.open(dir, cacheBytes);
            case LMDB -> LmdbKv.open(dir, keys);
            case XODUS -> XodusKv.open(dir, cacheBytes);
            case MVSTORE -> MvStoreKv.open(dir, cacheBytes);
            case MEMORY -> new MemoryKv();
        };
    }
}
