package dev.ferrite.perf.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.file.Path;

import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.CompactionPriority;
import org.rocksdb.CompressionType;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Slice;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * RocksDB (RocksJava) in its own directory, configured as its wiki's "Setup Options and Basic Tuning"
 * recommends for a general workload: dynamic level sizes, background jobs for the machine's CPUs,
 * {@code bytes_per_sync} 1 MiB, min-overlapping-ratio compaction priority, 16 KiB blocks in a block
 * cache of the run's cache budget with index and filter blocks cached (L0's pinned), and a 10-bit Bloom
 * filter (for point gets); no compression, since the other stores compress nothing. Each put and delete
 * is a single write with the WAL on and no sync; {@link #sync()} is {@code flushWal(true)}. Operations
 * use the array-and-offset calls, which copy through JNI without allocating. A batch phase's batch is one
 * {@link WriteBatch}, written atomically by one {@code write} (WAL on, no sync) at its commit.
 */
final class RocksKv implements KvStore {
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private final LRUCache blockCache;
    private final BloomFilter filter;
    private final Options options;
    private final WriteOptions write;
    private final ReadOptions read;
    private final RocksDB db;
    private final String description;

    private RocksKv(Path dir, long cacheBytes) throws RocksDBException {
        RocksDB.loadLibrary();
        blockCache = new LRUCache(cacheBytes);
        filter = new BloomFilter(10);
        int jobs = Math.max(2, Runtime.getRuntime().availableProcessors());
        options = new Options()
                .setCreateIfMissing(true)
                .setCompressionType(CompressionType.NO_COMPRESSION)
                .setLevelCompactionDynamicLevelBytes(true)
                .setMaxBackgroundJobs(jobs)
                .setBytesPerSync(1 << 20)
                .setCompactionPriority(CompactionPriority.MinOverlappingRatio)
                .setTableFormatConfig(new BlockBasedTableConfig().setBlockCache(blockCache).setFilterPolicy(filter)
                        .setBlockSize(16 * 1024).setCacheIndexAndFilterBlocks(true).setPinL0FilterAndIndexBlocksInCache(true));
        write = new WriteOptions(); // WAL on, no sync: the defaults
        read = new ReadOptions();
        db = RocksDB.open(options, dir.toString());
        description = "RocksDB " + RocksDB.rocksdbVersion() + " (rocksdbjni), its basic tuning: block cache " + KvBench.size(cacheBytes)
                + " (16 KiB blocks, index and filter blocks cached, L0's pinned), Bloom filter 10 bits/key, no compression, memtable "
                + KvBench.size(options.writeBufferSize()) + ", dynamic level bytes, " + jobs
                + " background jobs, bytes_per_sync 1 MiB, min-overlapping-ratio compaction; single writes (a WriteBatch per"
                + " batch in the batch phases), WAL on without sync, flushWal(true) at phase end";
    }

    static RocksKv open(Path dir, long cacheBytes) {
        try {
            return new RocksKv(dir, cacheBytes);
        } catch (RocksDBException e) {
            throw failed("open " + dir, e);
        }
    }

    private static IllegalStateException failed(String what, RocksDBException e) {
        return new IllegalStateException("rocksdb: " + what + " failed: " + e.getMessage(), e);
    }

    @Override
    public String describe() {
        return description;
    }

    @Override
    public int writeBatch() {
        return 1;
    }

    @Override
    public KvStore.Session session() {
        return new Session();
    }

    @Override
    public KvStore.Session batchSession() {
        return new BatchSession();
    }

    @Override
    public void sync() {
        try {
            db.flushWal(true);
        } catch (RocksDBException e) {
            throw failed("flushWal", e);
        }
    }

    @Override
    public void check() {
        // RocksDB checks its own files (paranoid checks are on by default); the workload checks the data.
    }

    @Override
    public void close() {
        db.close();
        read.close();
        write.close();
        options.close();
        filter.close();
        blockCache.close();
    }

    private class Session implements KvStore.Session {
        @Override
        public void put(byte[] key, int keyLength, byte[] value) {
            try {
                db.put(write, key, 0, keyLength, value, 0, value.length);
            } catch (RocksDBException e) {
                throw failed("put", e);
            }
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            try {
                db.delete(write, key, 0, keyLength);
            } catch (RocksDBException e) {
                throw failed("delete", e);
            }
        }

        @Override
        public void commit() {
        }

        @Override
        public int get(byte[] key, int keyLength, byte[] value) {
            try {
                return db.get(read, key, 0, keyLength, value, 0, value.length);
            } catch (RocksDBException e) {
                throw failed("get", e);
            }
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            return new Scan(from, to);
        }

        @Override
        public void close() {
        }
    }

    /** Puts gathered in a {@link WriteBatch} that commit writes at once, atomically; gets and scans as a {@link Session}'s. */
    private final class BatchSession extends Session {
        private final WriteBatch batch = new WriteBatch();
        /** A batch takes whole arrays (it copies them in). */
        private final ExactKeys keys = new ExactKeys();

        @Override
        public void put(byte[] key, int keyLength, byte[] value) {
            try {
                batch.put(keys.of(key, keyLength), value);
            } catch (RocksDBException e) {
                throw failed("batch put", e);
            }
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            try {
                batch.delete(keys.of(key, keyLength));
            } catch (RocksDBException e) {
                throw failed("batch delete", e);
            }
        }

        @Override
        public void commit() {
            try {
                db.write(write, batch);
            } catch (RocksDBException e) {
                throw failed("batch write", e);
            }
            batch.clear();
        }

        @Override
        public void close() {
            batch.close();
        }
    }

    /** An iterator bounded above by {@code iterate_upper_bound}, as RocksDB recommends for range scans. */
    private final class Scan implements KvStore.Scan {
        private final Slice upper;
        private final ReadOptions options;
        private final RocksIterator it;
        private byte[] value = new byte[KvKeys.VALUE];
        private int length;
        private boolean started;

        Scan(byte[] from, byte[] to) {
            upper = to == null ? null : new Slice(to);
            options = new ReadOptions();
            if (upper != null) {
                options.setIterateUpperBound(upper);
            }
            it = db.newIterator(options);
            if (from == null) {
                it.seekToFirst();
            } else {
                it.seek(from);
            }
        }

        @Override
        public int next() {
            if (started) {
                it.next();
            }
            started = true;
            if (!it.isValid()) {
                try {
                    it.status();
                } catch (RocksDBException e) {
                    throw failed("scan", e);
                }
                return -1;
            }
            length = it.value(value);
            if (length > value.length) { // copied in part: again into room for all of it
                value = new byte[Math.max(length, 2 * value.length)];
                it.value(value);
            }
            return length;
        }

        @Override
        public long word() {
            return (long) BE_LONG.get(value, 0);
        }

        @Override
        public long fold() {
            return KvKeys.fold(value, length);
        }

        @Override
        public void close() {
            it.close();
            options.close();
            if (upper != null) {
                upper.close();
            }
        }
    }
}
