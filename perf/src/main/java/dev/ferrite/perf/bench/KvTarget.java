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

    /** A fresh store sized for up to {@code keys} keys with values of {@code valueBytes}. */
    KvStore open(Path dir, long keys, int valueBytes, long cacheBytes) {
        return switch (this) {
            case FERRITE -> FerriteKv.open(dir, keys, valueBytes, cacheBytes);
            case ROCKSDB -> RocksKv.open(dir, cacheBytes);
            case LMDB -> LmdbKv.open(dir, keys, valueBytes);
            case XODUS -> XodusKv.open(dir, cacheBytes);
            case MVSTORE -> MvStoreKv.open(dir, cacheBytes);
            case MEMORY -> new MemoryKv();
        };
    }
}
