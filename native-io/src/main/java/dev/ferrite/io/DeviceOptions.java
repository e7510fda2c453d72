package dev.ferrite.io;

/**
 * How to open a file-backed device.
 *
 * @param blockSize logical block size in bytes; a power of two from 512 to 65536, and a multiple of
 *                  the underlying device's logical sector size for O_DIRECT
 * @param size      device size in bytes; 0 uses the whole existing file or raw device. A regular file
 *                  that is missing or shorter is created or extended to this size (space preallocated).
 *                  Rounded down to whole blocks.
 * @param readOnly  open read-only: every write, discard or extension fails with EROFS
 * @param ioDepth   most requests of one {@link IoBatch} in flight at once
 * @param engine    how batches reach the kernel (DirectDevice only)
 */
public record DeviceOptions(int blockSize, long size, boolean readOnly, int ioDepth, IoEngineKind engine) {
    public static final int DEFAULT_BLOCK_SIZE = 4096;
    public static final int DEFAULT_IO_DEPTH = 64;

    /** 4 KiB blocks, whole existing file, read-write, depth 64, io_uring when available. */
    public static final DeviceOptions DEFAULTS =
            new DeviceOptions(DEFAULT_BLOCK_SIZE, 0, false, DEFAULT_IO_DEPTH, IoEngineKind.AUTO);

    /**
     * Checks every component; the {@code with*} copies check theirs the same way.
     *
     * @throws InvalidArgumentException for a block size that is not a power of two from 512 to 65536, a
     *                                  negative size, an I/O depth outside 1..4096 or a null engine
     */
    public DeviceOptions {
        requireBlockSize(blockSize);
        if (size < 0) {
            throw new InvalidArgumentException("device size " + size + " is negative");
        }
        if (ioDepth < 1 || ioDepth > 4096) {
            throw new InvalidArgumentException("I/O depth " + ioDepth + " is outside 1..4096");
        }
        if (engine == null) {
            throw new InvalidArgumentException("I/O engine must not be null");
        }
    }

    static void requireBlockSize(int blockSize) {
        if (blockSize < BlockDevice.SECTOR_SIZE || blockSize > 65536 || Integer.bitCount(blockSize) != 1) {
            throw new InvalidArgumentException("block size " + blockSize + " is not a power of two from 512 to 65536");
        }
    }

    public static DeviceOptions defaults() {
        return DEFAULTS;
    }

    public DeviceOptions withBlockSize(int blockSize) {
        return new DeviceOptions(blockSize, size, readOnly, ioDepth, engine);
    }

    public DeviceOptions withSize(long size) {
        return new DeviceOptions(blockSize, size, readOnly, ioDepth, engine);
    }

    public DeviceOptions withReadOnly(boolean readOnly) {
        return new DeviceOptions(blockSize, size, readOnly, ioDepth, engine);
    }

    public DeviceOptions withIoDepth(int ioDepth) {
        return new DeviceOptions(blockSize, size, readOnly, ioDepth, engine);
    }

    public DeviceOptions withEngine(IoEngineKind engine) {
        return new DeviceOptions(blockSize, size, readOnly, ioDepth, engine);
    }
}
