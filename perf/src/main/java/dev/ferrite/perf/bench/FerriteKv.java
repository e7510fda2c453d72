package dev.ferrite.perf.bench;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Arrays;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.Durability;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.TableCursor;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.dir.WriteTransaction;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MappedDevice;

/**
 * Ferrite through its public table API: a volume formatted on a file in the run's directory, one table.
 * The file is opened with O_DIRECT ({@link DirectDevice}) where the filesystem allows it (tmpfs does on
 * recent kernels), else mapped ({@link MappedDevice}).
 *
 * <p>Every put and delete is a transaction of its own ({@link Table#put}, {@link Durability#NONE}: applied
 * and in the journal's in-memory log, not forced): the same promise as a RocksDB write with the WAL on and
 * no sync. The batch phases' batches are {@link WriteTransaction}s, atomic across crashes. Values too long
 * to share a B-tree cell with their key ({@link Table#MAX_INLINE_ENTRY}) are kept out of line: up to
 * {@link Table#MAX_MEDIUM} in a data extent each, longer ones in a blob file written and synced before its
 * put commits. {@link #sync()}
 * makes everything durable ({@link Volume#sync()}). Gets and scans take no lock.
 */
final class FerriteKv implements KvStore {
    private static final int BLOCK = DeviceOptions.DEFAULT_BLOCK_SIZE;
    private static final ValueLayout.OfLong BE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final BlockDevice device;
    private final Volume volume;
    private final Table table;
    private final String description;

    private FerriteKv(BlockDevice device, Volume volume, Table table, String description) {
        this.device = device;
        this.volume = volume;
        this.table = table;
        this.description = description;
    }

    /**
     * Log for {@code keys} with values of {@code valueBytes}: 256 bytes a key, and for a value kept in the
     * tree each byte it has past the default {@value KvKeys#VALUE}, 64 MiB to 512 MiB, so that a phase's
     * checkpoints rarely wait for the AIL to free log space. One put logs its leaf's slot array and cell, a
     * few hundred bytes and the value: 1.1 KB for 1 KiB, which 256 bytes a key ran short of (a batch of
     * 1,000 at 2 threads failed with {@code LOG_FULL}, and the AIL wrote a leaf home for every two puts
     * where, the log holding a pass over the keys, it writes one for every 2.6); a value kept out of line
     * logs only its stub.
     */
    static long logBytes(long keys, int valueBytes) {
        boolean inline = KvKeys.KEY_MAX + valueBytes <= Table.MAX_INLINE_ENTRY; // as the longest key leaves room for
        long perKey = 256 + (inline ? Math.max(0, valueBytes - KvKeys.VALUE) : 0);
        return Math.clamp(wholeMiB(keys * perKey), 64L << 20, 512L << 20);
    }

    /**
     * Room for the table of {@code keys} with values of {@code valueBytes}: a cell of ~40 bytes and the
     * value per key in leaves about 2/3 full, twice over, plus the volume's own structures; a value kept
     * out of line takes whole blocks (of its extent, or of a blob file).
     */
    static long dataBytes(long keys, int valueBytes) {
        boolean inline = KvKeys.KEY_MAX + valueBytes <= Table.MAX_INLINE_ENTRY; // as the longest key leaves room for
        if (!inline && valueBytes <= Table.MAX_MEDIUM) { // an extent a value: whole blocks; twice, for updates
            return Math.max(128L << 20, wholeMiB(keys * (320 + 2L * ((valueBytes + BLOCK - 1L) / BLOCK) * BLOCK)));
        }
        if (!inline) { // a blob file a value: whole blocks, an inode, a name; twice, for updates
            long blob = ((valueBytes + BLOCK - 1L) / BLOCK) * BLOCK + 1024;
            return Math.max(128L << 20, wholeMiB(keys * (320 + 2 * blob)));
        }
        return Math.max(128L << 20, wholeMiB(keys * (320 + 3L * Math.max(0, valueBytes - KvKeys.VALUE))));
    }

    private static long wholeMiB(long bytes) {
        return (bytes + (1 << 20) - 1) & -(1L << 20);
    }

    static FerriteKv open(Path dir, long keys, int valueBytes, long cacheBytes) {
        long log = logBytes(keys, valueBytes);
        long size = 2 * BLOCK + log + dataBytes(keys, valueBytes);
        Path file = dir.resolve("ferrite.dev");
        BlockDevice device;
        String kind;
        try {
            DirectDevice direct = DirectDevice.open(file, DeviceOptions.defaults().withSize(size));
            device = direct;
            kind = "DirectDevice (O_DIRECT, " + direct.engine() + " engine)";
        } catch (DeviceException e) {
            if (e.errno() != Errno.EINVAL) {
                throw e;
            }
            device = MappedDevice.open(file, DeviceOptions.defaults().withSize(size));
            kind = "MappedDevice (no O_DIRECT here)";
        }
        try {
            VolumeOptions options = VolumeOptions.defaults().withLogBlocks((int) (log / BLOCK)).withCacheBytes(cacheBytes)
                    .withDataCacheBytes(cacheBytes); // medium values' blocks are cached there
            Volume.format(device, options);
            Volume volume = Volume.open(device, options);
            try {
                Table table = volume.tables().create("kv").withDurability(Durability.NONE);
                return new FerriteKv(device, volume, table, kind + ", 4 KiB blocks, volume " + KvBench.size(size) + " with log "
                        + KvBench.size(log) + ", cache " + KvBench.size(cacheBytes) + " and data page cache " + KvBench.size(cacheBytes)
                        + " (medium values' blocks); one table; each put and delete a"
                        + " transaction of its own (Durability.NONE), each batch a WriteTransaction, Volume.sync at phase end");
            } catch (RuntimeException e) {
                volume.close();
                throw e;
            }
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
    }

    @Override
    public Contention.Snapshot counters() {
        return Contention.Snapshot.of(volume);
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
        volume.sync();
    }

    @Override
    public void check() {
        CheckReport r = volume.namespace().check();
        if (!r.clean()) {
            throw new IllegalStateException("ferrite's volume is damaged: " + r);
        }
    }

    @Override
    public void close() {
        try {
            table.close();
            volume.close();
        } finally {
            device.close();
        }
    }

    /**
     * Segments over the caller's arrays, made once per array and key length: the table takes
     * {@link MemorySegment}s, and wrapping each key anew would allocate on every operation.
     */
    private class Session implements KvStore.Session {
        private final MemorySegment[] keyViews = new MemorySegment[KvKeys.KEY_MAX + 1];
        private byte[] keyArray;
        private MemorySegment valueView;
        private byte[] valueArray;

        MemorySegment key(byte[] key, int length) {
            if (key != keyArray) {
                MemorySegment whole = MemorySegment.ofArray(key);
                for (int n = 1; n < keyViews.length && n <= key.length; n++) {
                    keyViews[n] = whole.asSlice(0, n);
                }
                keyArray = key;
            }
            return keyViews[length];
        }

        MemorySegment value(byte[] value) {
            if (value != valueArray) {
                valueView = MemorySegment.ofArray(value);
                valueArray = value;
            }
            return valueView;
        }

        @Override
        public void put(byte[] key, int keyLength, byte[] value) {
            table.put(key(key, keyLength), value(value));
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            table.delete(key(key, keyLength));
        }

        @Override
        public void commit() {
        }

        @Override
        public int get(byte[] key, int keyLength, byte[] value) {
            return table.get(key(key, keyLength), value(value));
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            return new Scan(table.cursor(from, to, false));
        }

        @Override
        public void close() {
        }
    }

    /**
     * Reads each value in place, as LMDB's cursor does: a value kept in the tree in the cursor's copy of
     * its leaf, a medium one in the data page cache's frames when they hold it ({@link TableCursor#value(
     * TableCursor.Pieces)}), folding its bytes as they pass; the word and the fold are of that one read.
     */
    private static final class Scan implements KvStore.Scan, TableCursor.Pieces {
        private final TableCursor cursor;
        private long word, fold, position;

        Scan(TableCursor cursor) {
            this.cursor = cursor;
        }

        @Override
        public int next() {
            if (!cursor.next()) {
                return -1;
            }
            word = 0;
            fold = 0;
            position = 0;
            return (int) cursor.value(this);
        }

        @Override
        public void accept(MemorySegment bytes, long offset, long length) {
            if (position == 0 && length >= 8) {
                word = bytes.get(BE_LONG, offset);
            }
            fold ^= KvKeys.fold(bytes, offset, length); // pieces start at multiples of 8 bytes: the fold of the whole
            position += length;
        }

        @Override
        public long word() {
            return word;
        }

        @Override
        public long fold() {
            return fold;
        }

        @Override
        public void close() {
            cursor.close(); // its leaf copy goes to this thread's next scan
        }
    }

    /** Writes gathered into a {@link WriteTransaction} until {@link #commit()}. */
    private final class BatchSession extends Session {
        private WriteTransaction tx;

        private WriteTransaction tx() {
            if (tx == null) {
                tx = volume.begin(Durability.NONE);
            }
            return tx;
        }

        @Override
        public void put(byte[] key, int keyLength, byte[] value) {
            tx().put(table, Arrays.copyOf(key, keyLength), value);
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            tx().delete(table, Arrays.copyOf(key, keyLength));
        }

        @Override
        public void commit() {
            if (tx != null) {
                tx.commit();
                tx = null;
            }
        }

        @Override
        public void close() {
            if (tx != null) {
                tx.close();
            }
        }
    }
}
