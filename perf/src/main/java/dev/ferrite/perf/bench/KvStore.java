package dev.ferrite.perf.bench;

/**
 * One key-value library as the kv workload drives it: opened on a directory of its own, used by one
 * {@link Session} per thread and phase. Keys and values arrive as {@code byte[]}s that the caller reuses;
 * each store hands them to its library the cheapest way that library offers.
 */
interface KvStore extends AutoCloseable {
    /** How this store is set up (device, cache, durability), for the report. */
    String describe();

    /**
     * Writes a session groups per {@link Session#commit()}: 1 for a store that commits every write on
     * its own, more for one that batches writes into transactions.
     */
    int writeBatch();

    /**
     * A session whose puts between two {@link Session#commit()}s form one atomic transaction, for the
     * batch phases; null (the default) for a store with no transaction over several keys, whose batch
     * phases then write through {@link #session()}, each write committing as that session commits it.
     */
    default Session batchSession() {
        return null;
    }

    /**
     * Batches so far that lost a lock to another thread's (a lock timeout or a deadlock) and were rolled
     * back and run again, for the report; 0 for a store whose batches never conflict.
     */
    default long retries() {
        return 0;
    }

    /** A session for the calling thread, which alone uses it until it closes it. */
    Session session();

    /** Makes every write committed so far durable. */
    void sync();

    /** Checks the store's own invariants with nothing running (untimed); throws if they are broken. */
    void check();

    /** Ferrite's counters now ({@link Contention}), null for a store that has none. */
    default Contention.Snapshot counters() {
        return null;
    }

    @Override
    void close();

    /** One thread's handle on the store. */
    interface Session extends AutoCloseable {
        /** Inserts or replaces, in the current batch of writes. */
        void put(byte[] key, int keyLength, byte[] value);

        /** Deletes, in the current batch of writes. */
        void delete(byte[] key, int keyLength);

        /** Ends the current batch of writes (a no-op where each write commits by itself). */
        void commit();

        /** Copies the value of the key into {@code value} (as much as fits); returns its length, or -1 if absent. */
        int get(byte[] key, int keyLength, byte[] value);

        /** A forward scan of the keys in {@code [from, to)}; null bounds are the ends of the key space. */
        Scan scan(byte[] from, byte[] to);

        @Override
        void close();
    }

    /** A forward range scan; each entry's value is read in full, as a reader that uses it would. */
    interface Scan extends AutoCloseable {
        /** Moves to the next entry and returns its value's length, or -1 past the end. */
        int next();

        /** The first 8 bytes of the current value, big-endian ({@link KvKeys#word}). */
        long word();

        /** Every byte of the current value read: its {@link KvKeys#fold}. */
        long fold();

        @Override
        void close();
    }
}
