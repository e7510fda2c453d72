package dev.ferrite.perf.bench;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BTreeNodeFormat;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.TreeCheck;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MappedDevice;

/**
 * Ferrite's B-tree on a file in the run's directory, laid out by {@link BTreeStore}. The file is opened
 * with O_DIRECT ({@link DirectDevice}) where the filesystem allows it (tmpfs does on recent kernels),
 * else mapped ({@link MappedDevice}).
 *
 * <p>Every put and delete is a transaction of its own ({@link Txn}, committed into the journal's
 * in-memory log, not forced): the same promise as a RocksDB write with the WAL on and no sync. {@link
 * #sync()} forces the log. Gets and scans take no lock (optimistic lock coupling). The tree has no
 * transaction over several changes to one tree, so the batch phases' puts commit one by one as well
 * (no {@link #batchSession()}), and its values end at {@value BTreeNodeFormat#MAX_VALUE} bytes.
 */
final class FerriteKv implements KvStore {
    private static final int BLOCK = DeviceOptions.DEFAULT_BLOCK_SIZE;
    private static final ValueLayout.OfLong BE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final BTreeStore store;
    private final BTree tree;
    private final String description;

    private FerriteKv(BTreeStore store, String description) {
        this.store = store;
        this.tree = store.tree;
        this.description = description;
    }

    /**
     * Log for {@code keys}: 256 bytes a key, 64 MiB to 512 MiB, so that a phase's checkpoints rarely wait
     * for the AIL to free log space (one put logs its leaf's slot array and cell, a few hundred bytes).
     */
    static long logBytes(long keys) {
        return Math.clamp(wholeMiB(keys * 256), 64L << 20, 512L << 20);
    }

    /**
     * Room for the tree of {@code keys} with values of {@code valueBytes}: a cell of ~40 bytes and the
     * value per key in leaves about 2/3 full, twice over.
     */
    static long dataBytes(long keys, int valueBytes) {
        return Math.max(64L << 20, wholeMiB(keys * (320 + 3L * Math.max(0, valueBytes - KvKeys.VALUE))));
    }

    private static long wholeMiB(long bytes) {
        return (bytes + (1 << 20) - 1) & -(1L << 20);
    }

    static FerriteKv open(Path dir, long keys, int valueBytes, long cacheBytes) {
        int logBlocks = (int) (logBytes(keys) / BLOCK);
        long dataBlocks = dataBytes(keys, Math.min(valueBytes, BTreeNodeFormat.MAX_VALUE)) / BLOCK;
        long size = BTreeStore.deviceBlocks(BLOCK, logBlocks, dataBlocks) * BLOCK;
        Path file = dir.resolve("ferrite.dev");
        BlockDevice device;
        String kind;
        try {
            device = DirectDevice.open(file, DeviceOptions.defaults().withSize(size));
            kind = "DirectDevice (O_DIRECT)";
        } catch (DeviceException e) {
            if (e.errno() != Errno.EINVAL) {
                throw e;
            }
            device = MappedDevice.open(file, DeviceOptions.defaults().withSize(size));
            kind = "MappedDevice (no O_DIRECT here)";
        }
        try {
            return new FerriteKv(BTreeStore.format(device, logBlocks, cacheBytes), kind + ", 4 KiB blocks, log "
                    + KvBench.size((long) logBlocks * BLOCK) + ", tree area " + KvBench.size(dataBlocks * BLOCK)
                    + ", cache " + KvBench.size(cacheBytes) + "; a transaction per put and per delete,"
                    + " log forced at phase end");
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
    }

    @Override
    public Contention.Snapshot counters() {
        return new Contention.Snapshot(store.journal.stats(), store.cache.stats());
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
    public int maxValueSize() {
        return BTreeNodeFormat.MAX_VALUE;
    }

    @Override
    public KvStore.Session session() {
        return new Session();
    }

    @Override
    public void sync() {
        store.journal.forceAll();
    }

    @Override
    public void check() {
        TreeCheck c = tree.check();
        if (!c.ok()) {
            throw new IllegalStateException("ferrite's B-tree is damaged: " + c);
        }
    }

    @Override
    public void close() {
        try {
            store.close();
        } finally {
            store.device.close();
        }
    }

    /**
     * Segments over the caller's arrays, made once per array and key length: the B-tree takes
     * {@link MemorySegment}s, and wrapping each key anew would allocate on every operation.
     */
    private final class Session implements KvStore.Session {
        private final MemorySegment[] keyViews = new MemorySegment[KvKeys.KEY_MAX + 1];
        private byte[] keyArray;
        private MemorySegment valueView;
        private byte[] valueArray;

        private MemorySegment key(byte[] key, int length) {
            if (key != keyArray) {
                MemorySegment whole = MemorySegment.ofArray(key);
                for (int n = 1; n < keyViews.length && n <= key.length; n++) {
                    keyViews[n] = whole.asSlice(0, n);
                }
                keyArray = key;
            }
            return keyViews[length];
        }

        private MemorySegment value(byte[] value) {
            if (value != valueArray) {
                valueView = MemorySegment.ofArray(value);
                valueArray = value;
            }
            return valueView;
        }

        @Override
        public void put(byte[] key, int keyLength, byte[] value) {
            try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
                tree.put(txn, key(key, keyLength), value(value));
                txn.commit();
            }
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
                tree.delete(txn, key(key, keyLength));
                txn.commit();
            }
        }

        @Override
        public void commit() {
        }

        @Override
        public int get(byte[] key, int keyLength, byte[] value) {
            return tree.get(key(key, keyLength), value(value));
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            Cursor cursor = tree.cursor(from, to, false);
            return new KvStore.Scan() {
                private long lastWord;

                @Override
                public int next() {
                    if (!cursor.next()) {
                        return -1;
                    }
                    // read in place, as LMDB's cursor is: the view is the cursor's copy of the leaf
                    MemorySegment v = cursor.valueSegment();
                    lastWord = v.byteSize() >= 8 ? v.get(BE_LONG, 0) : 0;
                    return (int) v.byteSize();
                }

                @Override
                public long word() {
                    return lastWord;
                }

                @Override
                public void close() {
                }
            };
        }

        @Override
        public void close() {
        }
    }
}
