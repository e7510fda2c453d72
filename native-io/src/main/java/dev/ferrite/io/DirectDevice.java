package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A regular file or a raw block device opened with O_DIRECT: transfers bypass the page cache and go
 * straight between the caller's aligned buffers and the device. Single transfers are one
 * {@code pread}/{@code pwrite} each (lowest latency at depth 1); batches go through io_uring, or through
 * a pool of pread/pwrite threads where io_uring is unavailable, or, for a file on tmpfs, the submitting
 * thread's own pread/pwrite calls ({@link IoEngineKind}). {@link #flush()} is {@code fdatasync}.
 *
 * <p>Sizes: a block device's size comes from {@code BLKGETSIZE64} and its logical sector size from
 * {@code BLKSSZGET} (the block size must be a multiple of it). A regular file is created or extended with
 * {@code fallocate} when {@link DeviceOptions#size()} asks for more than it has.
 */
public final class DirectDevice extends AbstractBlockDevice {
    private final int fd;
    private final boolean blockDevice;
    private final int sectorSize;
    private final IoEngineKind engineKind;
    private final IoEngine engine;

    private DirectDevice(String name, DeviceOptions options, long blockCount, int fd, boolean blockDevice,
                         int sectorSize, IoEngineKind engineKind, IoEngine engine) {
        super(name, options.blockSize(), blockCount, options.readOnly());
        this.fd = fd;
        this.blockDevice = blockDevice;
        this.sectorSize = sectorSize;
        this.engineKind = engineKind;
        this.engine = engine;
    }

    /**
     * Opens {@code path} (a regular file or block device) with O_DIRECT.
     *
     * @throws DeviceException          ENOENT, EACCES, EINVAL (no O_DIRECT support), ENOSPC ... from the OS
     * @throws InvalidArgumentException for a path that is neither a file nor a block device, a block size
     *                                  below the sector size, or a size the device cannot hold
     */
    public static DirectDevice open(Path path, DeviceOptions options) {
        String name = path.toString();
        if (Files.isDirectory(path)) {
            throw new InvalidArgumentException(name + " is a directory, neither a regular file nor a block device");
        }
        boolean existed = Files.exists(path, LinkOption.NOFOLLOW_LINKS);
        boolean create = !options.readOnly() && options.size() > 0;
        if (!existed && !create) {
            throw new DeviceException(name, "open", -1, Errno.ENOENT,
                    options.readOnly() ? "no such file or device" : "no such file or device; give a size to create a file");
        }
        int flags = (options.readOnly() ? Posix.O_RDONLY : Posix.O_RDWR) | Posix.O_DIRECT | Posix.O_CLOEXEC
                | (create ? Posix.O_CREAT : 0);
        try (Arena arena = Arena.ofConfined()) {
            int fd = Posix.open(arena.allocateFrom(name), flags, 0644);
            if (fd < 0) {
                int errno = Posix.errno();
                throw new DeviceException(name, "open", -1, errno,
                        errno == Errno.EINVAL ? "the filesystem does not support O_DIRECT" : "");
            }
            try {
                return openFd(name, options, fd, arena);
            } catch (RuntimeException e) {
                Posix.close(fd);
                if (!existed) {
                    try {
                        Files.deleteIfExists(path);
                    } catch (java.io.IOException suppressed) {
                        e.addSuppressed(suppressed);
                    }
                }
                throw e;
            }
        }
    }

    private static DirectDevice openFd(String name, DeviceOptions options, int fd, Arena arena) {
        MemorySegment stat = arena.allocate(Posix.STAT_SIZE, 8);
        if (Posix.fstat(fd, stat) < 0) {
            throw new DeviceException(name, "fstat", -1, Posix.errno(), "");
        }
        int type = stat.get(JAVA_INT, Posix.STAT_MODE_OFFSET) & Posix.S_IFMT;
        long available;
        int sectorSize;
        boolean blockDevice = type == Posix.S_IFBLK;
        if (blockDevice) {
            MemorySegment out = arena.allocate(8, 8);
            if (Posix.ioctl(fd, Posix.BLKGETSIZE64, out) < 0) {
                throw new DeviceException(name, "ioctl(BLKGETSIZE64)", -1, Posix.errno(), "");
            }
            available = out.get(JAVA_LONG, 0);
            if (Posix.ioctl(fd, Posix.BLKSSZGET, out) < 0) {
                throw new DeviceException(name, "ioctl(BLKSSZGET)", -1, Posix.errno(), "");
            }
            sectorSize = out.get(JAVA_INT, 0);
            if (!options.readOnly()) {
                // Linux opens a read-only block device for writing and fails each write with EPERM instead.
                if (Posix.ioctl(fd, Posix.BLKROGET, out) < 0) {
                    throw new DeviceException(name, "ioctl(BLKROGET)", -1, Posix.errno(), "");
                }
                if (out.get(JAVA_INT, 0) != 0) {
                    throw new DeviceException(name, "open", -1, Errno.EROFS, "the block device is read-only");
                }
            }
            if (options.size() > available) {
                throw new InvalidArgumentException(name + ": block device holds " + available
                        + " bytes, fewer than the " + options.size() + " asked for");
            }
        } else if (type == Posix.S_IFREG) {
            available = stat.get(JAVA_LONG, Posix.STAT_SIZE_OFFSET);
            sectorSize = SECTOR_SIZE;
            if (options.size() > available) {
                if (options.readOnly()) {
                    throw new DeviceException(name, "open", -1, Errno.EROFS, "file has " + available
                            + " bytes, fewer than the " + options.size() + " asked for, and is opened read-only");
                }
                grow(name, fd, available, options.size());
            }
        } else {
            throw new InvalidArgumentException(name + " is neither a regular file nor a block device");
        }
        if (options.blockSize() % sectorSize != 0) {
            throw new InvalidArgumentException(name + ": block size " + options.blockSize()
                    + " is not a multiple of the device's logical sector size " + sectorSize);
        }
        long size = options.size() == 0 ? available : options.size();
        long blockCount = size / options.blockSize();
        if (blockCount < 1) {
            throw new InvalidArgumentException(name + ": " + size + " bytes hold no block of " + options.blockSize() + " bytes");
        }
        IoEngineKind kind = options.engine();
        if (kind == IoEngineKind.AUTO && !blockDevice && onTmpfs(name, fd, arena)) {
            kind = IoEngineKind.SYNC;
        }
        IoEngine engine;
        if (kind == IoEngineKind.SYNC) {
            engine = new SyncEngine(fd, options.blockSize());
        } else if (kind == IoEngineKind.THREADS) {
            engine = new ThreadedEngine(fd, options.blockSize(), options.ioDepth());
        } else {
            try {
                engine = new UringEngine(fd, options.blockSize(), options.ioDepth());
                kind = IoEngineKind.IO_URING;
            } catch (DeviceException e) {
                if (kind == IoEngineKind.IO_URING) {
                    throw new DeviceException(name, "io_uring_setup", -1, e.errno(),
                            "io_uring was asked for but the kernel refused it");
                }
                engine = new ThreadedEngine(fd, options.blockSize(), options.ioDepth());
                kind = IoEngineKind.THREADS;
            }
        }
        return new DirectDevice(name, options, blockCount, fd, blockDevice, sectorSize, kind, engine);
    }

    /** True if the file {@code fd} lies on tmpfs, whose transfers are page-cache copies ({@link SyncEngine}). */
    private static boolean onTmpfs(String name, int fd, Arena arena) {
        MemorySegment statfs = arena.allocate(Posix.STATFS_SIZE, 8);
        if (Posix.fstatfs(fd, statfs) < 0) {
            throw new DeviceException(name, "fstatfs", -1, Posix.errno(), "");
        }
        return statfs.get(JAVA_LONG, Posix.STATFS_TYPE_OFFSET) == Posix.TMPFS_MAGIC;
    }

    private static void grow(String name, int fd, long from, long to) {
        if (Posix.fallocate(fd, 0, from, to - from) == 0) {
            return;
        }
        int errno = Posix.errno();
        if (errno != Errno.EOPNOTSUPP) {
            throw new DeviceException(name, "fallocate", from, errno, "extending the file to " + to + " bytes");
        }
        if (Posix.ftruncate(fd, to) < 0) {
            throw new DeviceException(name, "ftruncate", from, Posix.errno(), "extending the file to " + to + " bytes");
        }
    }

    /** The engine batches actually use: {@link IoEngineKind#IO_URING}, {@link IoEngineKind#THREADS} or {@link IoEngineKind#SYNC}. */
    public IoEngineKind engine() {
        return engineKind;
    }

    /** True for a raw block device, false for a regular file. */
    public boolean isBlockDevice() {
        return blockDevice;
    }

    /** Logical sector size: BLKSSZGET for a block device, 512 for a file. */
    public int sectorSize() {
        return sectorSize;
    }

    /**
     * Moves the rest of a transfer of which {@code done} bytes already happened, retrying on EINTR.
     *
     * @return 0 when the whole buffer was transferred, else an errno (EIO for a transfer that came up short)
     */
    static int finishTransfer(int fd, boolean write, MemorySegment buf, long offset, long done) {
        long len = buf.byteSize();
        while (done < len) {
            MemorySegment rest = done == 0 ? buf : buf.asSlice(done);
            long r = write ? Posix.pwrite(fd, rest, len - done, offset + done) : Posix.pread(fd, rest, len - done, offset + done);
            if (r < 0) {
                int errno = Posix.errno();
                if (errno != Errno.EINTR) {
                    return errno;
                }
            } else if (r == 0) {
                return Errno.EIO;
            } else {
                done += r;
            }
        }
        return 0;
    }

    @Override
    void doRead(long offset, MemorySegment dst) {
        int errno = finishTransfer(fd, false, dst, offset, 0);
        if (errno != 0) {
            throw failure("read", offset, errno, transferDetail(errno, dst.byteSize()));
        }
    }

    @Override
    void doWrite(long offset, MemorySegment src) {
        int errno = finishTransfer(fd, true, src, offset, 0);
        if (errno != 0) {
            throw failure("write", offset, errno, transferDetail(errno, src.byteSize()));
        }
    }

    private static String transferDetail(int errno, long length) {
        return errno == Errno.EIO ? length + "-byte transfer failed or came up short" : length + "-byte transfer";
    }

    @Override
    void doSubmit(IoBatch batch) {
        engine.run(batch);
    }

    @Override
    void doFlush() {
        while (Posix.fdatasync(fd) < 0) {
            int errno = Posix.errno();
            if (errno != Errno.EINTR) {
                throw failure("flush", -1, errno, "fdatasync");
            }
        }
    }

    @Override
    void doDiscard(long offset, long length) {
        int r;
        if (blockDevice) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment range = arena.allocate(16, 8);
                range.set(JAVA_LONG, 0, offset);
                range.set(JAVA_LONG, 8, length);
                r = Posix.ioctl(fd, Posix.BLKDISCARD, range);
            }
        } else {
            r = Posix.fallocate(fd, Posix.FALLOC_FL_PUNCH_HOLE | Posix.FALLOC_FL_KEEP_SIZE, offset, length);
        }
        if (r < 0) {
            int errno = Posix.errno();
            // Discard is advisory: a device or filesystem that cannot do it loses nothing by skipping it.
            if (errno != Errno.EOPNOTSUPP && errno != Errno.ENOTTY) {
                throw failure("discard", offset, errno, length + " bytes");
            }
        }
    }

    /**
     * {@inheritDoc}
     *
     * @throws DeviceException if {@code flock} fails other than with EAGAIN, or EBADF once closed
     */
    @Override
    public boolean tryLockExclusive() {
        return flock(fd, Posix.LOCK_EX | Posix.LOCK_NB);
    }

    /**
     * {@inheritDoc}
     *
     * @throws DeviceException if {@code flock} fails, or EBADF once the device is closed
     */
    @Override
    public void unlockExclusive() {
        flock(fd, Posix.LOCK_UN);
    }

    @Override
    void doClose() {
        engine.close();
        Posix.close(fd);
    }

    @Override
    public String toString() {
        return "DirectDevice[" + name() + ", " + blockCount() + " x " + blockSize() + ", " + engineKind + "]";
    }
}
