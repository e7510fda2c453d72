package dev.ferrite.dir;

import java.nio.file.Path;
import java.util.Map;

/**
 * A volume served as a file system on a mount point ({@link Volume#mount}); closing it unmounts.
 * The volume stays mounted as a volume (the caller closes it after this).
 */
public interface FileSystemMount extends AutoCloseable {
    /** Where the file system is mounted. */
    Path mountPoint();

    /**
     * Waits until the file system is unmounted, by {@link #close()} or from outside ({@code umount},
     * {@code fusermount3 -u}).
     *
     * @throws InterruptedException if the waiting thread is interrupted
     */
    void awaitUnmount() throws InterruptedException;

    /**
     * How many requests the file system served so far, per operation (FUSE's: {@code getattr}, {@code create},
     * {@code write} ...), the operations served at least once: where the time of a workload on the mount goes.
     */
    Map<String, Long> requestCounts();

    /** Unmounts, once no kernel request is being served; idempotent. Open handles of the volume that served files are closed. */
    @Override
    void close();
}
