package dev.ferrite.perf.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Arrays;

import jetbrains.exodus.ArrayByteIterable;
import jetbrains.exodus.ByteIterable;
import jetbrains.exodus.env.Cursor;
import jetbrains.exodus.env.EnvironmentConfig;
import jetbrains.exodus.env.EnvironmentImpl;
import jetbrains.exodus.env.Environments;
import jetbrains.exodus.env.Store;
import jetbrains.exodus.env.StoreConfig;
import jetbrains.exodus.env.Transaction;
import jetbrains.exodus.util.ByteIterableUtil;

/**
 * JetBrains Xodus (its Environments API) in its own directory: one store without duplicates (a B+tree;
 * {@code ByteIterable}s compare as unsigned bytes, the other stores' order), the defaults of
 * {@link EnvironmentConfig} — 8 MiB log files, the log GC on, {@code durableWrite} off, which the
 * Environments documentation gives as the default because an fsync per commit is slow — but for a log
 * cache of the run's cache budget instead of half the heap. A commit appends its transaction to the log
 * file unsynced, the promise the other stores' unsynced writes make; {@link #sync()} is
 * {@code flushAndSync()}. Writes go in exclusive transactions of {@value #BATCH}, as LMDB's do: an
 * optimistic write transaction fails to commit if any other committed after it began (Xodus checks the
 * database's version, not the keys) and must be replayed, while exclusive ones take turns and always
 * commit. Gets run in read-only transactions begun afresh every {@value #BATCH} gets and after a commit;
 * a scan is one read-only transaction with a cursor.
 */
final class XodusKv implements KvStore {
    static final int BATCH = 1000;
    private static final String STORE = "kv";
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private final EnvironmentImpl env;
    private final Store store;
    private final String description;

    private XodusKv(EnvironmentImpl env, long cacheBytes) {
        this.env = env;
        this.store = env.computeInTransaction(txn -> env.openStore(STORE, StoreConfig.WITHOUT_DUPLICATES, txn));
        EnvironmentConfig c = env.getEnvironmentConfig();
        this.description = "Xodus " + EnvironmentImpl.class.getPackage().getImplementationVersion()
                + " (Environments API), its defaults: B+tree store without duplicates, log files of "
                + KvBench.size(c.getLogFileSize() << 10) + ", log GC on, durableWrite off; log cache "
                + KvBench.size(cacheBytes) + "; exclusive write transactions of " + BATCH
                + " puts or deletes, read-only transactions of " + BATCH + " gets, flushAndSync at phase end";
    }

    static XodusKv open(Path dir, long cacheBytes) {
        EnvironmentConfig config = new EnvironmentConfig().setMemoryUsage(cacheBytes);
        // flushAndSync, the fsync that ends a phase, is the implementation's: Environment has none
        EnvironmentImpl env = (EnvironmentImpl) Environments.newInstance(dir.toFile(), config);
        try {
            return new XodusKv(env, cacheBytes);
        } catch (RuntimeException e) {
            env.close();
            throw e;
        }
    }

    @Override
    public String describe() {
        return description;
    }

    @Override
    public int writeBatch() {
        return BATCH;
    }

    @Override
    public KvStore.Session session() {
        return new Session();
    }

    /** A batch is one exclusive transaction, as with LMDB: the same sessions, committed at each batch's end. */
    @Override
    public KvStore.Session batchSession() {
        return new Session();
    }

    @Override
    public void sync() {
        env.flushAndSync();
    }

    @Override
    public void check() {
        // Xodus checks its log as it reads it; the workload checks the data.
    }

    @Override
    public void close() {
        env.close();
    }

    /** Copies the first {@code out.length} bytes of {@code value} at most; returns its length. */
    private static int copy(ByteIterable value, byte[] out) {
        int length = value.getLength();
        System.arraycopy(value.getBytesUnsafe(), 0, out, 0, Math.min(length, out.length));
        return length;
    }

    /** A session's transactions belong to it alone, as Xodus asks of a transaction. */
    private final class Session implements KvStore.Session {
        private Transaction write;
        private Transaction read;
        private int reads;

        private Transaction write() {
            if (write == null) {
                write = env.beginExclusiveTransaction();
            }
            return write;
        }

        @Override
        public void put(byte[] key, int keyLength, byte[] value) {
            // the transaction keeps the key and value objects until it commits: copies, not the reused buffers
            store.put(write(), new ArrayByteIterable(Arrays.copyOf(key, keyLength)), new ArrayByteIterable(value.clone()));
        }

        @Override
        public void delete(byte[] key, int keyLength) {
            store.delete(write(), new ArrayByteIterable(key, keyLength));
        }

        @Override
        public void commit() {
            if (write != null) {
                Transaction t = write;
                write = null;
                if (!t.commit()) {
                    t.abort();
                    throw new IllegalStateException("xodus: an exclusive transaction failed to commit");
                }
            }
            if (read != null) { // its snapshot predates the commit: the session's next get begins a new one
                read.abort();
                read = null;
                reads = 0;
            }
        }

        @Override
        public int get(byte[] key, int keyLength, byte[] value) {
            if (read == null) {
                read = env.beginReadonlyTransaction();
            } else if (++reads == BATCH) {
                reads = 0;
                read.abort();
                read = env.beginReadonlyTransaction();
            }
            ByteIterable found = store.get(read, new ArrayByteIterable(key, keyLength));
            return found == null ? -1 : copy(found, value);
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            return new Scan(from, to);
        }

        @Override
        public void close() {
            if (write != null) {
                write.abort(); // an uncommitted batch
            }
            if (read != null) {
                read.abort();
            }
        }
    }

    private final class Scan implements KvStore.Scan {
        private final Transaction txn = env.beginReadonlyTransaction();
        private final Cursor cursor = store.openCursor(txn);
        private final byte[] from;
        private final byte[] to;
        private ByteIterable value;
        private boolean started;

        Scan(byte[] from, byte[] to) {
            this.from = from;
            this.to = to;
        }

        @Override
        public int next() {
            if (started) {
                value = cursor.getNext() ? cursor.getValue() : null;
            } else {
                started = true;
                value = from == null ? (cursor.getNext() ? cursor.getValue() : null)
                        : cursor.getSearchKeyRange(new ArrayByteIterable(from));
            }
            if (value == null) {
                return -1;
            }
            if (to != null) {
                ByteIterable key = cursor.getKey();
                if (ByteIterableUtil.compare(key.getBytesUnsafe(), key.getLength(), to, to.length) >= 0) {
                    value = null;
                    return -1;
                }
            }
            return value.getLength();
        }

        @Override
        public long word() {
            return (long) BE_LONG.get(value.getBytesUnsafe(), 0);
        }

        @Override
        public long fold() {
            return KvKeys.fold(value.getBytesUnsafe(), value.getLength());
        }

        @Override
        public void close() {
            cursor.close();
            txn.abort();
        }
    }
}
