package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicIntegerArray;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A regular file mapped into memory in one mapping owned by a shared {@link Arena}. Reads and writes are
 * memory copies; durability comes from {@link MemorySegment#force()} ({@code msync}) over the regions
 * written since the last flush, tracked in {@value #REGION_SHIFT}-bit (64 MiB) regions so a flush of a
 * large, mostly clean file does not walk all of it. Discard zeroes. A writable file has all its blocks
 * allocated when opened, so a full filesystem shows as ENOSPC from {@link #open} rather than as a SIGBUS
 * from some later store into the mapping.
 */
public final class MappedDevice extends AbstractBlockDevice {
    private static final int REGION_SHIFT = 26;

    private final Arena arena;
    private final MemorySegment map;
    private final AtomicIntegerArray dirtyRegions;
    /** A descriptor opened only to hold {@link #tryLockExclusive()}'s flock (the mapping keeps none); -1 if none. */
    private int lockFd = -1;

    private MappedDevice(String name, int blockSize, long blockCount, boolean readOnly, Arena arena, MemorySegment map) {
        super(name, blockSize, blockCount, readOnly);
        this.arena = arena;
        this.map = map;
        this.dirtyRegions = new AtomicIntegerArray((int) ((map.byteSize() >>> REGION_SHIFT) + 1));
    }

    /**
     * Maps {@code path}; see {@link DeviceOptions} for sizing. {@code ioDepth} and {@code engine} are unused.
     *
     * @throws DeviceException          ENOENT, EACCES, EROFS, ENOSPC ... from the OS while opening, sizing
     *                                  or allocating the file
     * @throws InvalidArgumentException for a directory or anything else that is not a regular file, or a
     *                                  size that holds no block
     */
    public static MappedDevice open(Path path, DeviceOptions options) {
        String name = path.toString();
        if (Files.isDirectory(path)) {
            throw new InvalidArgumentException(name + " is a directory, not a regular file");
        }
        boolean existed = Files.exists(path, LinkOption.NOFOLLOW_LINKS);
        boolean create = !options.readOnly() && options.size() > 0;
        if (!existed && !create) {
            throw new DeviceException(name, "open", -1, Errno.ENOENT,
                    options.readOnly() ? "file does not exist" : "file does not exist; give a size to create it");
        }
        try {
            long blockCount = prepare(name, options, create);
            return map(name, path, options, blockCount);
        } catch (RuntimeException e) {
            if (!existed) {
                try {
                    Files.deleteIfExists(path);
                } catch (IOException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw e;
        }
    }

    /**
     * Opens, checks and sizes the file with system calls before the JDK maps it, so that failures keep
     * their errno (EPERM, EACCES, ENOSPC, ...), and allocates every block of a writable file: a store into
     * a hole of a shared mapping on a full filesystem is a SIGBUS (an InternalError out of whichever copy
     * touched the page), while fallocate reports ENOSPC here.
     *
     * @return the device's block count
     */
    private static long prepare(String name, DeviceOptions options, boolean create) {
        int flags = (options.readOnly() ? Posix.O_RDONLY : Posix.O_RDWR) | Posix.O_CLOEXEC | (create ? Posix.O_CREAT : 0);
        try (Arena arena = Arena.ofConfined()) {
            int fd = Posix.open(arena.allocateFrom(name), flags, 0644);
            if (fd < 0) {
                throw new DeviceException(name, "open", -1, Posix.errno(), "");
            }
            try {
                MemorySegment stat = arena.allocate(Posix.STAT_SIZE, 8);
                if (Posix.fstat(fd, stat) < 0) {
                    throw new DeviceException(name, "fstat", -1, Posix.errno(), "");
                }
                if ((stat.get(JAVA_INT, Posix.STAT_MODE_OFFSET) & Posix.S_IFMT) != Posix.S_IFREG) {
                    throw new InvalidArgumentException(name + " is not a regular file; only regular files can be mapped");
                }
                long fileSize = stat.get(JAVA_LONG, Posix.STAT_SIZE_OFFSET);
                long size = options.size() == 0 ? fileSize : options.size();
                if (size > fileSize && options.readOnly()) {
                    throw new DeviceException(name, "open", -1, Errno.EROFS,
                            "file has " + fileSize + " bytes, fewer than the " + size + " asked for, and is opened read-only");
                }
                long blockCount = size / options.blockSize();
                if (blockCount < 1) {
                    throw new InvalidArgumentException(name + ": " + size + " bytes hold no block of " + options.blockSize() + " bytes");
                }
                if (!options.readOnly()) {
                    allocate(name, fd, fileSize, size);
                }
                return blockCount;
            } finally {
                Posix.close(fd);
            }
        }
    }

    /** Allocates bytes [0, size) of the file, growing it to {@code size} if it is shorter. */
    private static void allocate(String name, int fd, long fileSize, long size) {
        if (Posix.fallocate(fd, 0, 0, size) == 0) {
            return;
        }
        int errno = Posix.errno();
        if (errno != Errno.EOPNOTSUPP) {
            throw new DeviceException(name, "fallocate", 0, errno, "allocating the " + size + " bytes to be mapped");
        }
        // No fallocate on this filesystem: grow sparsely, as ftruncate does, and hope for space.
        if (size > fileSize && Posix.ftruncate(fd, size) < 0) {
            throw new DeviceException(name, "ftruncate", fileSize, Posix.errno(), "extending the file to " + size + " bytes");
        }
    }

    private static MappedDevice map(String name, Path path, DeviceOptions options, long blockCount) {
        StandardOpenOption[] modes = options.readOnly()
                ? new StandardOpenOption[] {StandardOpenOption.READ}
                : new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE};
        try (FileChannel channel = FileChannel.open(path, modes)) {
            Arena arena = Arena.ofShared();
            try {
                MemorySegment map = channel.map(options.readOnly() ? FileChannel.MapMode.READ_ONLY : FileChannel.MapMode.READ_WRITE,
                        0, blockCount * options.blockSize(), arena);
                return new MappedDevice(name, options.blockSize(), blockCount, options.readOnly(), arena, map);
            } catch (IOException | RuntimeException e) {
                arena.close();
                throw e;
            }
        } catch (NoSuchFileException e) {
            throw new DeviceException(name, "open", -1, Errno.ENOENT, "no such file");
        } catch (AccessDeniedException e) {
            throw new DeviceException(name, "open", -1, Errno.EACCES, "permission denied");
        } catch (IOException e) {
            throw new DeviceException(name, "mmap", -1, Errno.EIO, e.getMessage());
        }
    }

    @Override
    void doRead(long offset, MemorySegment dst) {
        MemorySegment.copy(map, offset, dst, 0, dst.byteSize());
    }

    @Override
    void doWrite(long offset, MemorySegment src) {
        MemorySegment.copy(src, 0, map, offset, src.byteSize());
        markDirty(offset, src.byteSize());
    }

    @Override
    void doSubmit(IoBatch batch) {
        for (int i = 0, n = batch.size(); i < n; i++) {
            batch.started(i);
            long offset = batch.block(i) * blockSize();
            if (batch.isWrite(i)) {
                doWrite(offset, batch.buffer(i));
            } else {
                doRead(offset, batch.buffer(i));
            }
            batch.completed(i, 0);
        }
    }

    @Override
    void doFlush() {
        for (int r = 0, n = dirtyRegions.length(); r < n; r++) {
            // Clear before forcing: a write racing with this flush re-marks the region for the next one.
            if (dirtyRegions.get(r) != 0 && dirtyRegions.getAndSet(r, 0) != 0) {
                long start = (long) r << REGION_SHIFT;
                long len = Math.min(1L << REGION_SHIFT, map.byteSize() - start);
                try {
                    map.asSlice(start, len).force();
                } catch (java.io.UncheckedIOException e) {
                    dirtyRegions.set(r, 1);
                    throw failure("flush", start, Errno.EIO, e.getMessage());
                }
            }
        }
    }

    @Override
    void doDiscard(long offset, long length) {
        map.asSlice(offset, length).fill((byte) 0);
        markDirty(offset, length);
    }

    /**
     * {@inheritDoc} The lock is held through a descriptor opened for it (the mapping keeps none).
     *
     * @throws DeviceException if that descriptor cannot be opened or {@code flock} fails other than with
     *                         EAGAIN, or EBADF once the device is closed
     */
    @Override
    public synchronized boolean tryLockExclusive() {
        if (lockFd < 0) {
            try (Arena a = Arena.ofConfined()) {
                int fd = Posix.open(a.allocateFrom(name()), Posix.O_RDONLY | Posix.O_CLOEXEC, 0);
                if (fd < 0) {
                    throw failure("open", -1, Posix.errno(), "for the exclusive lock");
                }
                lockFd = fd;
            }
        }
        if (flock(lockFd, Posix.LOCK_EX | Posix.LOCK_NB)) {
            return true;
        }
        unlockExclusive();
        return false;
    }

    /** Closing the lock's descriptor releases the flock. */
    @Override
    public synchronized void unlockExclusive() {
        if (lockFd >= 0) {
            Posix.close(lockFd);
            lockFd = -1;
        }
    }

    @Override
    void doClose() {
        unlockExclusive();
        arena.close();
    }

    private void markDirty(long offset, long length) {
        for (long r = offset >>> REGION_SHIFT, last = (offset + length - 1) >>> REGION_SHIFT; r <= last; r++) {
            if (dirtyRegions.get((int) r) == 0) {
                dirtyRegions.set((int) r, 1);
            }
        }
    }

    @Override
    public String toString() {
        return "MappedDevice[" + name() + ", " + blockCount() + " x " + blockSize() + "]";
    }
}
