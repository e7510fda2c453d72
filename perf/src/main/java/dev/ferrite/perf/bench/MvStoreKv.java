package dev.ferrite.perf.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import org.h2.engine.Constants;
import org.h2.engine.IsolationLevel;
import org.h2.mvstore.Cursor;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.MVStoreException;
import org.h2.mvstore.tx.Transaction;
import org.h2.mvstore.tx.TransactionMap;
import org.h2.mvstore.tx.TransactionStore;
import org.h2.mvstore.type.ByteArrayDataType;
import org.h2.value.VersionedValue;

/**
 * H2's MVStore in a file of its own, opened as the MVStore documentation recommends: auto-commit on (the
 * default: changes are written as a chunk to the file, unsynced, once enough of them have accumulated —
 * about 1 MiB of file — and at least every second, by its background thread), 16 KiB page splits, no
 * compression, and a read cache of the run's cache budget instead of the default 16 MiB. The data is one
 * map of a {@link TransactionStore}, H2's transactions over MVStore maps, which its documentation names
 * for changes of several keys that must be atomic and isolated: {@code byte[]} keys compared as unsigned
 * bytes ({@link ByteArrayDataType}, the other stores' order), each value kept as TransactionStore keeps it
 * (a {@link VersionedValue}: the committed value, and an uncommitted one with its transaction's
 * operation while a transaction holds the key).
 *
 * <p>A batch phase's batch is one {@link Transaction} ({@link #batchSession()}), committed at the batch's
 * end. A transaction locks each key it writes until it ends; a writer of a locked key waits for its
 * holder up to H2's default lock timeout and fails at once on a deadlock, as H2's own SQL transactions
 * do. A batch that fails so is rolled back and run again from its first put, as an application retries a
 * transaction, and counted ({@link #retries()}). Every other write (the basic and YCSB phases, which
 * commit each write by itself) is a committed change of the map by itself ({@link
 * TransactionMap#putCommitted}, a removal of the key's entry), concurrent threads' changes merged by the
 * map, as without transactions; gets and scans read each key's committed value from the map's current
 * root. Until the next auto-commit every change lives only in memory, a weaker promise than the other
 * stores' unsynced writes, which are in the OS's hands; {@link #sync()} makes each phase end as durable as
 * theirs: {@code commit()}, then an fsync once the store's writer threads have written every chunk. Keys
 * and values go into the map as copies, as it keeps them.
 */
final class MvStoreKv implements KvStore {
    static final String FILE = "kv.mv.db";
    private static final String MAP = "kv";
    /** How long a batch's write waits for another transaction's lock on its key: H2's database default. */
    static final int LOCK_TIMEOUT_MILLIS = Constants.INITIAL_LOCK_TIMEOUT;
    /** A rollback has nothing to keep in step beside the map (H2's SQL layer updates its indexes here). */
    private static final TransactionStore.RollbackListener NO_INDEXES = (map, key, existing, restored) -> {
    };
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private final MVStore store;
    private final TransactionStore transactions;
    /** The data outside any transaction: {@link TransactionMap#putCommitted} only, which ignores its transaction. */
    private final TransactionMap<byte[], byte[]> committed;
    private final MVMap<byte[], VersionedValue<byte[]>> map;
    private final LongAdder retries = new LongAdder();
    private final String description;

    private MvStoreKv(MVStore store, long cacheBytes) {
        this.store = store;
        this.transactions = new TransactionStore(store);
        transactions.init();
        Transaction opening = transactions.begin();
        this.committed = opening.openMap(MAP, ByteArrayDataType.INSTANCE, ByteArrayDataType.INSTANCE);
        opening.commit();
        this.map = committed.map;
        this.description = "H2 MVStore " + MVStore.class.getPackage().getImplementationVersion()
                + ", its defaults: auto-commit (a chunk written, unsynced, per " + KvBench.size(store.getAutoCommitMemory())
                + " of changed pages in memory, which H2 reckons at 19 bytes a byte of file, or per "
                + store.getAutoCommitDelay() + " ms), page split at " + store.getFileStore().getMaxPageSize() / 1024
                + " KiB, no compression; byte[] keys in unsigned order; read cache " + KvBench.size(cacheBytes)
                + "; one TransactionStore map: a Transaction per batch (read committed, lock timeout "
                + LOCK_TIMEOUT_MILLIS + " ms, a batch that times out or deadlocks rolled back and retried),"
                + " each other put/delete a committed map change; commit() and file sync at phase end";
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
    public KvStore.Session batchSession() {
        return new BatchSession();
    }

    @Override
    public long retries() {
        return retries.sum();
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
        transactions.close();
        store.close();
    }

    /** The committed value of an entry of the map, null for none (no entry, or a transaction's insert). */
    private static byte[] committedValue(VersionedValue<byte[]> entry) {
        return entry == null ? null : entry.getCommittedValue();
    }

    private class Session extends ByteArrayMapSession {
        @Override
        void write(byte[] key, byte[] value) {
            committed.putCommitted(key, value);
        }

        @Override
        void remove(byte[] key) {
            map.remove(key);
        }

        @Override
        byte[] read(byte[] key) {
            return committedValue(map.get(key));
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            Cursor<byte[], VersionedValue<byte[]>> cursor = map.cursor(from);
            return new KvStore.Scan() {
                private byte[] value;

                @Override
                public int next() {
                    do {
                        if (!cursor.hasNext()) {
                            return -1;
                        }
                        byte[] key = cursor.next();
                        // bounded here, not by the cursor: its upper bound is inclusive, the scan's is not
                        if (to != null && Arrays.compareUnsigned(key, to) >= 0) {
                            return -1;
                        }
                        value = committedValue(cursor.getValue());
                    } while (value == null);
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

    /**
     * Writes gathered into one {@link Transaction} until {@link #commit()}, and kept (keys and values, a
     * null value for a delete) so that a batch that loses a lock can be rolled back and run again; gets
     * and scans as a {@link Session}'s, of committed values.
     */
    private final class BatchSession extends Session {
        private final List<byte[]> keys = new ArrayList<>();
        private final List<byte[]> values = new ArrayList<>();
        private Transaction tx;
        private TransactionMap<byte[], byte[]> changes;

        @Override
        void write(byte[] key, byte[] value) {
            keys.add(key);
            values.add(value);
            apply(keys.size() - 1);
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            write(Arrays.copyOf(key, keyLength), null);
        }

        /** Applies the batch's writes from {@code from} on; after a conflict, rolls back and applies them all. */
        private void apply(int from) {
            for (int i = from; i < keys.size(); ) {
                if (tx == null) {
                    tx = transactions.begin(NO_INDEXES, LOCK_TIMEOUT_MILLIS, 0, IsolationLevel.READ_COMMITTED);
                    changes = tx.openMapX(map);
                }
                try {
                    byte[] value = values.get(i);
                    if (value == null) {
                        changes.remove(keys.get(i));
                    } else {
                        changes.put(keys.get(i), value);
                    }
                    i++;
                } catch (MVStoreException e) {
                    if (e.getErrorCode() != DataUtils.ERROR_TRANSACTION_LOCKED
                            && e.getErrorCode() != DataUtils.ERROR_TRANSACTIONS_DEADLOCK) {
                        throw e;
                    }
                    rollback();
                    retries.increment();
                    i = 0;
                }
            }
        }

        private void rollback() {
            tx.rollback();
            tx = null;
            changes = null;
        }

        @Override
        public void commit() {
            if (tx != null) {
                tx.commit();
                tx = null;
                changes = null;
            }
            keys.clear();
            values.clear();
        }

        @Override
        public void close() {
            if (tx != null) {
                rollback(); // an uncommitted batch
            }
        }
    }
}
