package dev.ferrite.perf.bench;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Path;

import org.lmdbjava.Cursor;
import org.lmdbjava.Dbi;
import org.lmdbjava.DbiFlags;
import org.lmdbjava.Env;
import org.lmdbjava.EnvFlags;
import org.lmdbjava.GetOp;
import org.lmdbjava.Txn;

/**
 * LMDB (lmdbjava, native LMDB bundled) in its own directory, opened with {@code MDB_NOSYNC}: commits
 * reach the memory map but are not synced, the promise the other stores' unsynced writes make;
 * {@link #sync()} is {@code mdb_env_sync(force)}. LMDB admits one writer at a time and a write
 * transaction costs a page-tree commit, so writes go in transactions of {@value #BATCH}; with two
 * threads their transactions take turns. Gets run in read transactions renewed every {@value #BATCH}
 * gets; a scan is one read transaction. Keys and values pass through direct buffers; values are read
 * in the map, without copying, except that a get copies its value out like the other stores' gets.
 * A batch phase's batch is one write transaction ({@link #batchSession()}: the same sessions, committed
 * at each batch's end), and so is each update or insert of the YCSB mixes, which commit after each.
 */
final class LmdbKv implements KvStore {
    static final int BATCH = 1000;
    private static final String DB = "kv";

    private final Env<ByteBuffer> env;
    private final Dbi<ByteBuffer> db;
    private final String description;

    private LmdbKv(Env<ByteBuffer> env, Dbi<ByteBuffer> db, String description) {
        this.env = env;
        this.db = db;
        this.description = description;
    }

    /**
     * Map size for {@code keys} with values of {@code valueBytes}: 1 KiB a key and four times the values
     * (copy-on-write keeps old pages until no reader needs them), at least 4 GiB: address space, pages
     * used as written, as LMDB's documentation advises (a map far above the data). 256 MiB filled up in
     * YCSB A at 8 threads with 100,000 keys: each update's transaction copies its path, and the pages it
     * frees stay unusable while any read transaction older than it runs (one of 1,000 gets), which a
     * loaded machine holds open for long.
     */
    static long mapBytes(long keys, int valueBytes) {
        return Math.max(4L << 30, keys * (1024 + 4L * valueBytes));
    }

    static LmdbKv open(Path dir, long keys, int valueBytes) {
        long map = mapBytes(keys, valueBytes);
        Env<ByteBuffer> env = Env.create().setMapSize(map).setMaxDbs(1).open(dir.toFile(), EnvFlags.MDB_NOSYNC);
        try {
            Dbi<ByteBuffer> db = env.openDbi(DB, DbiFlags.MDB_CREATE);
            return new LmdbKv(env, db, "LMDB (lmdbjava), map " + KvBench.size(map) + ", MDB_NOSYNC; write transactions of "
                    + BATCH + " puts or deletes (batch phases: one per batch; YCSB: one per update or insert), read"
                    + " transactions of " + BATCH + " gets, env sync at phase end");
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

    @Override
    public KvStore.Session batchSession() {
        return new Session();
    }

    @Override
    public void sync() {
        env.sync(true);
    }

    @Override
    public void check() {
        // LMDB has no checker to run; the workload checks the data.
    }

    @Override
    public void close() {
        db.close();
        env.close();
    }

    /** LMDB transactions belong to the thread that began them, as a session does. */
    private final class Session implements KvStore.Session {
        private final ByteBuffer key = ByteBuffer.allocateDirect(KvKeys.KEY_MAX);
        private ByteBuffer value = ByteBuffer.allocateDirect(KvKeys.VALUE);
        private Txn<ByteBuffer> write;
        private Txn<ByteBuffer> read;
        private int reads;

        private ByteBuffer key(byte[] k, int length) {
            key.clear();
            key.put(k, 0, length).flip();
            return key;
        }

        @Override
        public void put(byte[] k, int keyLength, byte[] v) {
            if (write == null) {
                write = env.txnWrite();
            }
            if (value.capacity() < v.length) {
                value = ByteBuffer.allocateDirect(v.length);
            }
            value.clear();
            value.put(v).flip();
            db.put(write, key(k, keyLength), value);
        }

        @Override
        public void delete(byte[] k, int keyLength) {
            if (write == null) {
                write = env.txnWrite();
            }
            db.delete(write, key(k, keyLength));
        }

        @Override
        public void commit() {
            if (write != null) {
                write.commit();
                write.close();
                write = null;
            }
        }

        @Override
        public int get(byte[] k, int keyLength, byte[] v) {
            if (read == null) {
                read = env.txnRead();
            } else if (++reads == BATCH) {
                reads = 0;
                read.reset();
                read.renew();
            }
            ByteBuffer found = db.get(read, key(k, keyLength));
            if (found == null) {
                return -1;
            }
            int length = found.remaining();
            found.get(found.position(), v, 0, Math.min(length, v.length));
            return length;
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            return new Scan(from, to);
        }

        @Override
        public void close() {
            if (write != null) {
                write.close(); // aborts an uncommitted batch
            }
            if (read != null) {
                read.close();
            }
        }
    }

    private final class Scan implements KvStore.Scan {
        private final Txn<ByteBuffer> txn = env.txnRead();
        private final Cursor<ByteBuffer> cursor = db.openCursor(txn);
        private final ByteBuffer from;
        private final ByteBuffer to;
        private boolean started;

        Scan(byte[] from, byte[] to) {
            this.from = from == null ? null : direct(from);
            this.to = to == null ? null : direct(to);
        }

        private static ByteBuffer direct(byte[] bytes) {
            return ByteBuffer.allocateDirect(bytes.length).put(bytes).flip();
        }

        @Override
        public int next() {
            boolean ok;
            if (started) {
                ok = cursor.next();
            } else {
                started = true;
                ok = from == null ? cursor.first() : cursor.get(from, GetOp.MDB_SET_RANGE);
            }
            if (!ok || to != null && KvKeys.compare(cursor.key(), to) >= 0) {
                return -1;
            }
            return cursor.val().remaining();
        }

        @Override
        public long word() {
            ByteBuffer v = cursor.val();
            return v.getLong(v.position()); // big-endian, as ByteBuffers are
        }

        @Override
        public long fold() {
            return KvKeys.fold(MemorySegment.ofBuffer(cursor.val())); // in the map, as the word is
        }

        @Override
        public void close() {
            cursor.close();
            txn.close();
        }
    }
}
