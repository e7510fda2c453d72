package dev.ferrite.perf.bench;

import java.util.function.Consumer;

/**
 * A namespace as the metadata workloads drive it: directories under the store's root, each holding
 * empty files. Names are plain strings without {@code /}; directories are named relative to the root.
 * One {@link Session} per thread.
 */
interface MetaStore extends AutoCloseable {
    /** How this store is set up (device or filesystem, cache, durability), for the report. */
    String describe();

    /** A session for the calling thread, which alone uses it until it closes it. */
    Session session();

    /** Makes everything done so far durable. */
    void sync();

    /**
     * Drops what the store caches in memory so that the next reads come from the device, as after a
     * remount; returns how that was done, for the report.
     */
    String coldCache();

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
        void mkdir(String dir);

        /** Creates an empty regular file; fails if the name exists. */
        void create(String dir, String name);

        /** Reads the directory, handing each entry's name to {@code names} in the store's order; returns the count. */
        long list(String dir, Consumer<String> names);

        /** Looks up and stats one entry; returns its size, so the work cannot be skipped. */
        long stat(String dir, String name);

        void unlink(String dir, String name);

        /** Removes an empty directory. */
        void rmdir(String dir);

        @Override
        void close();
    }
}
