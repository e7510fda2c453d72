package dev.ferrite.io.sys;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Every C library downcall of native-io, one method handle per C function, named after it. Each wrapper
 * returns the raw C result; when it signals failure, {@link #errno()} returns the errno captured by that
 * call on this thread ({@code captureCallState}, so nothing the JVM does in between can clobber it).
 *
 * <p>Linux only, x86-64 and AArch64: the flag values and the {@code struct stat} offsets below are
 * those two ABIs'. io_uring has no libc wrapper and goes through {@code syscall(2)}.
 */
@SuppressWarnings("restricted")
public final class Posix {
    public static final boolean AARCH64 = "aarch64".equals(System.getProperty("os.arch"));

    // <fcntl.h>
    public static final int O_RDONLY = 0;
    public static final int O_WRONLY = 1;
    public static final int O_RDWR = 2;
    public static final int O_CREAT = 0x40;
    public static final int O_EXCL = 0x80;
    public static final int O_DIRECT = AARCH64 ? 0x10000 : 0x4000;
    public static final int O_DIRECTORY = AARCH64 ? 0x4000 : 0x10000;
    public static final int O_CLOEXEC = 0x80000;
    public static final int AT_FDCWD = -100;
    public static final int AT_SYMLINK_NOFOLLOW = 0x100;
    public static final int AT_REMOVEDIR = 0x200;

    // <unistd.h>
    public static final int SEEK_SET = 0;

    // <sys/stat.h>
    public static final int S_IFMT = 0xF000;
    public static final int S_IFREG = 0x8000;
    public static final int S_IFBLK = 0x6000;

    // <linux/falloc.h>
    public static final int FALLOC_FL_KEEP_SIZE = 0x01;
    public static final int FALLOC_FL_PUNCH_HOLE = 0x02;

    // <linux/fs.h>: _IO(0x12,94), _IO(0x12,104), _IOR(0x12,114,size_t), _IO(0x12,119)
    public static final long BLKROGET = 0x125EL;
    public static final long BLKSSZGET = 0x1268L;
    public static final long BLKGETSIZE64 = 0x80081272L;
    public static final long BLKDISCARD = 0x1277L;

    // <sys/file.h>
    public static final int LOCK_EX = 2;
    public static final int LOCK_NB = 4;
    public static final int LOCK_UN = 8;

    // <sys/mman.h>
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;
    public static final int MAP_SHARED = 1;
    public static final int MAP_POPULATE = 0x8000;
    public static final int MAP_PRIVATE = 2;
    public static final int MAP_ANONYMOUS = 0x20;
    public static final int MAP_NORESERVE = 0x4000;
    public static final long MAP_FAILED = -1L;
    public static final int MADV_HUGEPAGE = 14;
    public static final int MADV_POPULATE_WRITE = 23;

    // io_uring system call numbers: the same on every architecture (unified syscall table).
    public static final long SYS_IO_URING_SETUP = 425;
    public static final long SYS_IO_URING_ENTER = 426;

    /** struct stat: st_mode and st_size offsets differ between the two ABIs; the struct fits in 144 bytes. */
    public static final long STAT_SIZE = 144;
    public static final long STAT_MODE_OFFSET = AARCH64 ? 16 : 24;
    public static final long STAT_SIZE_OFFSET = 48;

    /**
     * struct statfs: 120 bytes of longs on both ABIs, f_type (the filesystem's magic number) first.
     * TMPFS_MAGIC from {@code <linux/magic.h>}.
     */
    public static final long STATFS_SIZE = 120;
    public static final long STATFS_TYPE_OFFSET = 0;
    public static final long TMPFS_MAGIC = 0x01021994L;

    /**
     * struct linux_dirent64, what getdents64(2) fills a buffer with back to back: d_ino (8 bytes), d_off (8),
     * d_reclen (2, this record's length), d_type (1), then d_name, NUL-terminated. The same on every ABI.
     */
    public static final long DIRENT64_RECLEN_OFFSET = 16;
    public static final long DIRENT64_NAME_OFFSET = 19;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
            CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    /** One capture buffer per thread, reused by every call: no allocation per downcall. */
    private static final ThreadLocal<MemorySegment> CAPTURE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private static final MethodHandle open = downcall("open",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle openat = downcall("openat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(3));
    private static final MethodHandle mkdirat = downcall("mkdirat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle fstatat = downcall("fstatat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle unlinkat = downcall("unlinkat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle getdents64 = downcall("getdents64",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle lseek = downcall("lseek",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT));
    private static final MethodHandle close = downcall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle pread = downcall("pread",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle pwrite = downcall("pwrite",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle fdatasync = downcall("fdatasync", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle fallocate = downcall("fallocate",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle ftruncate = downcall("ftruncate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle fstat = downcall("fstat", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle fstatfs = downcall("fstatfs", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle ioctl = downcall("ioctl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle flock = downcall("flock", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle mmap = downcall("mmap",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle munmap = downcall("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle madvise = downcall("madvise", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    // long syscall(long number, ...): every variadic argument passed as a full 64-bit word.
    private static final MethodHandle syscall6 = downcall("syscall",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG),
            Linker.Option.firstVariadicArg(1));
    private static final MethodHandle strerror = LINKER.downcallHandle(
            LIBC.findOrThrow("strerror"), FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private Posix() {
    }

    private static MethodHandle downcall(String name, FunctionDescriptor fd, Linker.Option... extra) {
        Linker.Option[] options = new Linker.Option[extra.length + 1];
        options[0] = CAPTURE_ERRNO;
        System.arraycopy(extra, 0, options, 1, extra.length);
        return LINKER.downcallHandle(LIBC.findOrThrow(name), fd, options);
    }

    /** The errno captured by the most recent downcall on this thread. */
    public static int errno() {
        return (int) ERRNO.get(CAPTURE.get(), 0L);
    }

    public static int open(MemorySegment path, int flags, int mode) {
        try {
            return (int) open.invokeExact(CAPTURE.get(), path, flags, mode);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** {@code path} relative to the directory open as {@code dirfd}, or to the working directory with {@link #AT_FDCWD}. */
    public static int openat(int dirfd, MemorySegment path, int flags, int mode) {
        try {
            return (int) openat.invokeExact(CAPTURE.get(), dirfd, path, flags, mode);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int mkdirat(int dirfd, MemorySegment path, int mode) {
        try {
            return (int) mkdirat.invokeExact(CAPTURE.get(), dirfd, path, mode);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** Fills {@code statBuf} ({@link #STAT_SIZE} bytes) like {@link #fstat}; {@link #AT_SYMLINK_NOFOLLOW} makes it lstat. */
    public static int fstatat(int dirfd, MemorySegment path, MemorySegment statBuf, int flags) {
        try {
            return (int) fstatat.invokeExact(CAPTURE.get(), dirfd, path, statBuf, flags);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** {@link #AT_REMOVEDIR} makes it rmdir. */
    public static int unlinkat(int dirfd, MemorySegment path, int flags) {
        try {
            return (int) unlinkat.invokeExact(CAPTURE.get(), dirfd, path, flags);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /**
     * Reads directory entries from the directory's current position into {@code buf} as
     * {@code linux_dirent64} records (see {@link #DIRENT64_NAME_OFFSET}); returns the bytes filled, 0 at
     * the end, -1 on error.
     */
    public static long getdents64(int fd, MemorySegment buf, long count) {
        try {
            return (long) getdents64.invokeExact(CAPTURE.get(), fd, buf, count);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static long lseek(int fd, long offset, int whence) {
        try {
            return (long) lseek.invokeExact(CAPTURE.get(), fd, offset, whence);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int close(int fd) {
        try {
            return (int) close.invokeExact(CAPTURE.get(), fd);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static long pread(int fd, MemorySegment buf, long count, long offset) {
        try {
            return (long) pread.invokeExact(CAPTURE.get(), fd, buf, count, offset);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static long pwrite(int fd, MemorySegment buf, long count, long offset) {
        try {
            return (long) pwrite.invokeExact(CAPTURE.get(), fd, buf, count, offset);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int fdatasync(int fd) {
        try {
            return (int) fdatasync.invokeExact(CAPTURE.get(), fd);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int fallocate(int fd, int mode, long offset, long length) {
        try {
            return (int) fallocate.invokeExact(CAPTURE.get(), fd, mode, offset, length);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int ftruncate(int fd, long length) {
        try {
            return (int) ftruncate.invokeExact(CAPTURE.get(), fd, length);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int fstat(int fd, MemorySegment statBuf) {
        try {
            return (int) fstat.invokeExact(CAPTURE.get(), fd, statBuf);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** Fills {@code statfsBuf} ({@link #STATFS_SIZE} bytes) with the statistics of the filesystem holding {@code fd}. */
    public static int fstatfs(int fd, MemorySegment statfsBuf) {
        try {
            return (int) fstatfs.invokeExact(CAPTURE.get(), fd, statfsBuf);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int ioctl(int fd, long request, MemorySegment arg) {
        try {
            return (int) ioctl.invokeExact(CAPTURE.get(), fd, request, arg);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int flock(int fd, int operation) {
        try {
            return (int) flock.invokeExact(CAPTURE.get(), fd, operation);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** The mapping as a segment of {@code length} bytes, or one whose address is {@link #MAP_FAILED}. */
    public static MemorySegment mmap(long length, int prot, int flags, int fd, long offset) {
        try {
            MemorySegment m = (MemorySegment) mmap.invokeExact(CAPTURE.get(), MemorySegment.NULL, length, prot, flags, fd, offset);
            return m.address() == MAP_FAILED ? m : m.reinterpret(length);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /**
     * Private anonymous memory of {@code length} bytes, unmapped when {@code arena} closes, or a segment
     * whose address is {@link #MAP_FAILED}.
     */
    public static MemorySegment mapAnonymous(long length, Arena arena) {
        try {
            MemorySegment m = (MemorySegment) mmap.invokeExact(CAPTURE.get(), MemorySegment.NULL, length,
                    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
            if (m.address() == MAP_FAILED) {
                return m;
            }
            MemorySegment unmap = m.reinterpret(length);
            return m.reinterpret(length, arena, seg -> munmap(unmap, length));
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int madvise(MemorySegment addr, long length, int advice) {
        try {
            return (int) madvise.invokeExact(CAPTURE.get(), addr, length, advice);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static int munmap(MemorySegment addr, long length) {
        try {
            return (int) munmap.invokeExact(CAPTURE.get(), addr, length);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static long syscall(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
        try {
            return (long) syscall6.invokeExact(CAPTURE.get(), number, a1, a2, a3, a4, a5, a6);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    public static String strerror(int errno) {
        try {
            MemorySegment s = (MemorySegment) strerror.invokeExact(errno);
            return s.equals(MemorySegment.NULL) ? "Unknown error " + errno : s.reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /**
     * The same memory as {@code segment}, usable from any thread: how a batch's buffers, possibly from a
     * confined arena of the submitting thread, reach the worker threads that transfer them. The submitter
     * keeps the buffers alive by waiting in {@code submit} until every transfer has finished.
     */
    public static MemorySegment anyThread(MemorySegment segment) {
        return MemorySegment.ofAddress(segment.address()).reinterpret(segment.byteSize());
    }

    private static RuntimeException unexpected(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("downcall failed", t);
    }
}
