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

    // ------------------------------------------------------------------ the contract, for implementations

    /**
     * Refuses, before any I/O, a transfer that breaks the contract: no buffer, one on the Java heap or of a
     * closed arena, an address not aligned to {@link #BUFFER_ALIGNMENT}, a length that is not a positive
     * multiple of the block size below 2 GiB, or blocks outside {@code device}. Every implementation runs
     * it on each read, write and batch request.
     *
     * @throws InvalidArgumentException naming the device, the operation, the block and what was wrong
     */
    static void requireTransfer(BlockDevice device, String op, long block, MemorySegment buffer) {
        if (buffer == null) {
            throw new InvalidArgumentException(transfer(device, op, block) + " has no buffer");
        }
        if (!buffer.isNative()) {
            throw new InvalidArgumentException(transfer(device, op, block)
                    + ": buffer is on the Java heap; device transfers need a native (off-heap) segment");
        }
        if (!buffer.scope().isAlive()) {
            // Batches hand the kernel (io_uring) or worker threads the bare address: freed memory must not get that far.
            throw new InvalidArgumentException(transfer(device, op, block) + ": buffer's arena is closed");
        }
        if ((buffer.address() & (BUFFER_ALIGNMENT - 1)) != 0) {
            throw new InvalidArgumentException(transfer(device, op, block) + ": buffer address 0x" + Long.toHexString(buffer.address())
                    + " is not aligned to " + BUFFER_ALIGNMENT + " bytes");
        }
        long len = buffer.byteSize();
        int blockSize = device.blockSize();
        if (len == 0 || (len & (blockSize - 1)) != 0 || len > Integer.MAX_VALUE) {
            throw new InvalidArgumentException(transfer(device, op, block) + ": buffer length " + len
                    + " is not a positive multiple of the block size " + blockSize + " below 2 GiB");
        }
        requireInside(device, op, block, len / blockSize);
    }

    /** The start of {@link #requireTransfer}'s messages: built only for a refusal, so that a valid transfer allocates nothing. */
    private static String transfer(BlockDevice device, String op, long block) {
        return device.name() + ": " + op + " at block " + block;
    }

    /**
     * Refuses blocks {@code [block, block + count)} unless all lie inside {@code device}.
     *
     * @throws InvalidArgumentException naming the device, the operation and the range
     */
    static void requireInside(BlockDevice device, String op, long block, long count) {
        if (block < 0 || block > device.blockCount() - count) {
            throw new InvalidArgumentException(device.name() + ": " + op + " of " + count + " blocks at block " + block
                    + " lies outside the device's " + device.blockCount() + " blocks");
        }
    }

    /**
     * Refuses a change to a read-only {@code device}.
     *
     * @throws DeviceException with EROFS, naming the device, the operation and the byte offset
     */
    static void requireWritable(BlockDevice device, String op, long offset) {
        if (device.isReadOnly()) {
            throw new DeviceException(device.name(), op, offset, Errno.EROFS, "device was opened read-only");
        }
    }

    /**
     * Refuses, before any I/O, a batch with a request {@link #requireTransfer} refuses, or with a write when
     * {@code device} is read-only.
     *
     * @throws InvalidArgumentException for the first request that breaks the transfer contract
     * @throws DeviceException          with EROFS for a write on a read-only device
     */
    static void requireSubmittable(BlockDevice device, IoBatch batch) {
        for (int i = 0, n = batch.size(); i < n; i++) {
            String op = batch.isWrite(i) ? "write" : "read";
            requireTransfer(device, op, batch.block(i), batch.buffer(i));
            if (batch.isWrite(i)) {
                requireWritable(device, op, batch.block(i) * device.blockSize());
            }
        }
    }
}
