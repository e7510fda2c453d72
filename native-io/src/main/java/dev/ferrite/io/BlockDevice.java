package dev.ferrite.io;

import java.lang.foreign.MemorySegment;

/**
 * A device of fixed-size blocks: an O_DIRECT file or raw block device ({@link DirectDevice}), a mapped
 * file ({@link MappedDevice}), RAM ({@link MemoryDevice}), or a wrapper over one of those (the
 * {@link OverlayDevice}; in the test kit, the recording device that crash tests run on).
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li>Transfers are whole blocks between the device and native {@link MemorySegment}s whose address is
 *       a multiple of {@link #BUFFER_ALIGNMENT} and whose length is a positive multiple of
 *       {@link #blockSize()}. Anything else is an {@link InvalidArgumentException}, raised before any I/O.
 *   <li>A write is durable only after a later {@link #flush()} returns. Until then it may be lost, and
 *       writes issued between two flushes may reach the medium in any order. Only 512-byte sector writes
 *       are assumed atomic: a crash can tear a block write at any sector boundary.
 *   <li>All methods are thread-safe. Concurrent transfers to overlapping blocks are not ordered.
 *   <li>{@link #close()} waits for transfers in progress, then fails every later call with
 *       {@link Errno#EBADF}. Writes on a read-only device fail with {@link Errno#EROFS}; neither changes
 *       anything.
 * </ul>
 */
public interface BlockDevice extends AutoCloseable {
    /** Required alignment of buffer addresses (O_DIRECT's, applied to every device so tests catch misuse). */
    int BUFFER_ALIGNMENT = 4096;

    /** Sector size whose writes are assumed atomic: a torn write breaks only at these boundaries. */
    int SECTOR_SIZE = 512;

    /** A name for messages: the path for file-backed devices. */
    String name();

    /** Logical block size in bytes: a power of two, at least {@link #SECTOR_SIZE}. */
    int blockSize();

    /** Number of blocks. */
    long blockCount();

    /** Size in bytes. */
    default long size() {
        return blockCount() * blockSize();
    }

    boolean isReadOnly();

    /**
     * Reads {@code dst.byteSize() / blockSize()} consecutive blocks starting at {@code block}.
     *
     * @throws InvalidArgumentException if {@code dst} breaks the transfer contract or the blocks lie
     *                                  outside the device
     * @throws DeviceException          if the read fails (EIO ...), or EBADF once the device is closed
     */
    void read(long block, MemorySegment dst);

    /**
     * Writes {@code src.byteSize() / blockSize()} consecutive blocks starting at {@code block}.
     *
     * @throws InvalidArgumentException if {@code src} breaks the transfer contract or the blocks lie
     *                                  outside the device
     * @throws DeviceException          if the write fails (EIO, ENOSPC ...), EROFS on a read-only device,
     *                                  EBADF once the device is closed
     */
    void write(long block, MemorySegment src);

    /**
     * Runs every request of the batch, as many at once as the device allows, and returns when all have
     * finished. Requests within a batch are unordered with respect to each other. If any failed, the
     * others still ran; the exception names the first failure by batch index and
     * {@link IoBatch#error(int)} tells each request's outcome.
     *
     * @throws InvalidArgumentException if any request breaks the transfer contract, before any I/O
     * @throws DeviceException          naming the first failed request; EROFS for a write on a read-only
     *                                  device (before any I/O), EBADF once the device is closed
     */
    void submit(IoBatch batch);

    /**
     * Durability barrier: every write that returned before this call is on stable storage when it returns.
     *
     * @throws DeviceException if the device cannot flush (EIO ...), or EBADF once it is closed
     */
    void flush();

    /**
     * Tells the device that the blocks' contents are no longer needed; they read back unspecified until rewritten.
     *
     * @throws InvalidArgumentException if {@code count} is below 1 or the blocks lie outside the device
     * @throws DeviceException          if the device fails the discard, EROFS on a read-only device,
     *                                  EBADF once the device is closed
     */
    void discard(long block, long count);

    /**
     * Takes an exclusive advisory lock on the device through this handle, without waiting, so that a second
     * opener (another process, or another handle in this one) can tell the device is in use. File-backed
     * devices use {@code flock(LOCK_EX | LOCK_NB)}; devices nobody else can reach (RAM) have nothing to lock
     * and always succeed. Held until {@link #unlockExclusive()} or {@link #close()}; taking it again
     * through the same handle succeeds.
     *
     * @return false if another handle holds the lock
     * @throws DeviceException if the lock cannot be taken for another reason than contention, or EBADF
     *                         once the device is closed
     */
    default boolean tryLockExclusive() {
        return true;
    }

    /** Releases what {@link #tryLockExclusive()} took; a no-op if nothing is held. */
    default void unlockExclusive() {
    }

    /** Waits for transfers in progress and releases the device. Idempotent. */
    @Override
    void close();
}
