package dev.ferrite.perf.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Arrays;

import org.h2.mvstore.Cursor;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.type.ByteArrayDataType;

/**
 * H2's MVStore in a file of its own: one {@link MVMap} of {@code byte[]} keys and values
 * ({@link ByteArrayDataType}, which compares keys as unsigned bytes, the other stores' order), opened as
 * the MVStore documentation recommends: auto-commit on (the default: changes are written as a chunk to
 * the file, unsynced, once enough of them have accumulated — about 1 MiB of file — and at least every
 * second, by its background thread), 16 KiB page splits, no compression, and a read cache of the run's
 * cache budget instead of the default 16 MiB. Every put and delete is a change of the map by itself, concurrent threads' changes
 * merged by the map; until the next auto-commit they live only in memory, a weaker promise than the
 * other stores' unsynced writes, which are in the OS's hands. {@link #sync()} makes each phase end as
 * durable as theirs: {@code commit()}, then an fsync once the store's writer threads have written every
 * chunk. A get or scan reads the map's current root, without a transaction; keys and values go into
 * the map as copies, as it keeps them.
 */
final class MvStoreKv implements KvStore {
    static final String FILE = "kv.mv.db";
    private static final String MAP = "kv";
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private final MVStore store;
    private final MVMap<byte[], byte[]> map;
    private final String description;

    private MvStoreKv(MVStore store, long cacheBytes) {
        this.store = store;
        this.map = store.openMap(MAP, new MVMap.Builder<byte[], byte[]>()
                .keyType(ByteArrayDataType.INSTANCE).valueType(ByteArrayDataType.INSTANCE));
        this.description = "H2 MVStore " + MVStore.class.getPackage().getImplementationVersion()
                + ", its defaults: auto-commit (a chunk written, unsynced, per " + KvBench.size(store.getAutoCommitMemory())
                + " of changed pages in memory, which H2 reckons at 19 bytes a byte of file, or per "
                + store.getAutoCommitDelay() + " ms), page split at " + store.getFileStore().getMaxPageSize() / 1024
                + " KiB, no compression; byte[] keys in unsigned order; read cache " + KvBench.size(cacheBytes)
                + "; each put/delete a map change, commit() and file sync at phase end";
    }

    static MvStoreKv open(Path dir, long cacheBytes) {
        MVStore store = new MVStore.Builder()
                .fileName(dir.resolve(FILE).toString())
                .cacheSize((int) Math.min(Integer.MAX_VALUE, cacheBytes >> 20))
                .open();
        try {
            return new MvStoreKv(store, cacheBytes);
        } catch (RuntimeException e) {
            store.closeImmediately();
            throw e;
        }
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
    public void sync() {
        store.commit();
        // commit() leaves the writing to an auto-commit that got in first, which may still be under way
        // in the store's writer threads: the file operation runs once they are idle.
        store.executeFilestoreOperation(store::sync);
    }

    @Override
    public void check() {
        // MVStore checks each page as it reads it; the workload checks the data.
    }

    @Override
    public void close() {
        store.close();
    }

    private final class Session extends ByteArrayMapSession {
        Session() {
            super(map);
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            Cursor<byte[], byte[]> cursor = map.cursor(from);
            return new KvStore.Scan() {
                private byte[] value;

                @Override
                public int next() {
                    if (!cursor.hasNext()) {
                        return -1;
                    }
                    byte[] key = cursor.next();
                    // bounded here, not by the cursor: its upper bound is inclusive, the scan's is not
                    if (to != null && Arrays.compareUnsigned(key, to) >= 0) {
                        return -1;
                    }
                    value = cursor.getValue();
                    return value.length;
                }

                @Override
                public long word() {
                    return (long) BE_LONG.get(value, 0);
                }

                @Override
                public long fold() {
                    return KvKeys.fold(value, value.length);
                }

                @Override
                public void close() {
                }
            };
        }
    }
}
