package dev.ferrite.dir.testkit;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;

import dev.ferrite.dir.InodeStat;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The host's path system calls as they are, for the differential tests (in-process, and through the mount):
 * java.nio normalizes paths (it drops trailing slashes), which would hide exactly the shapes under test, and
 * has no {@code renameat2}. Each call answers 0 or errno.
 */
@SuppressWarnings("restricted")
public final class HostFs {
    public static final int O_WRONLY = 01, O_CREAT = 0100, O_EXCL = 0200, O_DIRECTORY = 0200000, O_PATH = 010000000;
    /** renameat2's flags. */
    public static final int RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2;
    /** lseek's whences the file system answers. */
    public static final int SEEK_DATA = 3, SEEK_HOLE = 4;
    public static final int AT_FDCWD = -100, AT_SYMLINK_NOFOLLOW = 0x100, AT_REMOVEDIR = 0x200;
    private static final int STATX_BASIC_STATS = 0x7ff, STATX_SIZE = 256;
    private static final long STX_NLINK = 16, STX_MODE = 28;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MemoryLayout CAPTURED = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURED.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final MethodHandle mkdir = downcall("mkdir", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle open = downcall("open", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), 2);
    private static final MethodHandle openat = downcall("openat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), 3);
    private static final MethodHandle syscall = downcall("syscall",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG), 1); // syscall(2) reads longs
    /** openat2(2) on x86-64, and its {@code struct open_how}: flags, mode, resolve (24 bytes). */
    private static final long SYS_OPENAT2 = 437, OPEN_HOW_BYTES = 24, HOW_RESOLVE = 16, RESOLVE_BENEATH = 0x08;
    private static final int O_NOFOLLOW = 0400000;
    private static final MethodHandle lseek = downcall("lseek", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT));
    private static final MethodHandle close = downcall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle unlinkat = downcall("unlinkat", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle mkdirat = downcall("mkdirat", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle renameat = downcall("renameat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS));
    private static final MethodHandle renameat2 = downcall("renameat2",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle linkat = downcall("linkat",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle symlink = downcall("symlink", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle readlink = downcall("readlink", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG));
    private static final MethodHandle statx = downcall("statx",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS));

    private HostFs() {
    }

    private static MethodHandle downcall(String name, FunctionDescriptor fd, int... firstVariadic) {
        MemorySegment fn = SymbolLookup.loaderLookup().find(name).or(() -> LINKER.defaultLookup().find(name)).orElseThrow();
        Linker.Option capture = Linker.Option.captureCallState("errno");
        return firstVariadic.length == 0 ? LINKER.downcallHandle(fn, fd, capture)
                : LINKER.downcallHandle(fn, fd, capture, Linker.Option.firstVariadicArg(firstVariadic[0]));
    }

    /** A result and the errno of the call that gave it (0 unless the result is negative). */
    public record Result(long value, int errno) {
    }

    private static Result call(MethodHandle mh, Object... args) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CAPTURED);
            Object[] all = new Object[args.length + 1];
            all[0] = state;
            for (int i = 0; i < args.length; i++) {
                all[i + 1] = args[i] instanceof String s ? a.allocateFrom(s, StandardCharsets.UTF_8) : args[i];
            }
            long r = ((Number) mh.invokeWithArguments(all)).longValue();
            return new Result(r, r < 0 ? (int) ERRNO.get(state, 0L) : 0);
        } catch (Throwable t) {
            throw new AssertionError(mh + " failed", t);
        }
    }

    public static int mkdir(String path) {
        return call(mkdir, path, 0755).errno();
    }

    /** open(2) with {@code flags}, closed at once. */
    public static int open(String path, int flags) {
        return closed(call(open, path, flags, 0644));
    }

    public static int unlink(String path) {
        return call(unlinkat, AT_FDCWD, path, 0).errno();
    }

    public static int rmdir(String path) {
        return call(unlinkat, AT_FDCWD, path, AT_REMOVEDIR).errno();
    }

    public static int rename(String from, String to) {
        return call(renameat, AT_FDCWD, from, AT_FDCWD, to).errno();
    }

    public static int rename(String from, String to, int flags) {
        return call(renameat2, AT_FDCWD, from, AT_FDCWD, to, flags).errno();
    }

    /** link(2): a final symlink of {@code existing} is not followed. */
    public static int link(String existing, String newPath) {
        return call(linkat, AT_FDCWD, existing, AT_FDCWD, newPath, 0).errno();
    }

    public static int symlink(String target, String linkPath) {
        return call(symlink, target, linkPath).errno();
    }

    /** The target of symlink {@code path}, or "errno N". */
    public static String readlink(String path) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(4096);
            Result r = call(readlink, path, buf, 4096L);
            return r.errno() != 0 ? "errno " + r.errno()
                    : new String(buf.asSlice(0, r.value()).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
        }
    }

    /** "dir N", "file N" or "link" (N the link count) for {@code name} in {@code dirfd}, or "errno N". */
    public static String stat(int dirfd, String name, int flags) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(STATX_SIZE, 8);
            Result r = call(statx, dirfd, name, flags, STATX_BASIC_STATS, buf);
            if (r.errno() != 0) {
                return "errno " + r.errno();
            }
            int mode = buf.get(JAVA_SHORT, STX_MODE) & 0xffff;
            int nlink = buf.get(JAVA_INT, STX_NLINK);
            return switch (mode & InodeStat.S_IFMT) {
                case InodeStat.S_IFDIR -> "dir " + nlink;
                case InodeStat.S_IFLNK -> "link";
                default -> "file " + nlink;
            };
        }
    }

    /** An O_PATH descriptor of {@code path} (symlinks followed), or minus the errno. */
    public static int openPath(String path) {
        Result r = call(open, path, O_PATH, 0);
        return r.errno() != 0 ? -r.errno() : (int) r.value();
    }

    /** A descriptor of {@code path} opened with {@code flags} (mode 0644 if created), or minus the errno. */
    public static int openFd(String path, int flags) {
        Result r = call(open, path, flags, 0644);
        return r.errno() != 0 ? -r.errno() : (int) r.value();
    }

    /** lseek(2): the new offset, or minus the errno. */
    public static long lseek(int fd, long offset, int whence) {
        Result r = call(lseek, fd, offset, whence);
        return r.errno() != 0 ? -r.errno() : r.value();
    }

    /**
     * Where {@code path} (relative) leads from directory {@code dirfd}, its final symlink followed or not: 0 if it
     * resolves below or at {@code dirfd}, EXDEV if a {@code ..} leaves it, else the errno that stopped it
     * ({@code openat2} with RESOLVE_BENEATH).
     */
    public static int beneath(int dirfd, String path, boolean follow) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment how = a.allocate(OPEN_HOW_BYTES, 8);
            how.set(JAVA_LONG, 0, O_PATH | (follow ? 0 : O_NOFOLLOW));
            how.set(JAVA_LONG, HOW_RESOLVE, RESOLVE_BENEATH);
            return closed(call(syscall, SYS_OPENAT2, (long) dirfd, path, how, OPEN_HOW_BYTES));
        }
    }

    public static void close(int fd) {
        call(close, fd);
    }

    public static int mkdirat(int dirfd, String name) {
        return call(mkdirat, dirfd, name, 0755).errno();
    }

    public static int openat(int dirfd, String name, int flags) {
        return closed(call(openat, dirfd, name, flags, 0644));
    }

    public static int unlinkat(int dirfd, String name, int flags) {
        return call(unlinkat, dirfd, name, flags).errno();
    }

    public static int renameat(int fromfd, String from, int tofd, String to) {
        return call(renameat, fromfd, from, tofd, to).errno();
    }

    public static int renameat(int fromfd, String from, int tofd, String to, int flags) {
        return call(renameat2, fromfd, from, tofd, to, flags).errno();
    }

    private static int closed(Result r) {
        if (r.errno() == 0) {
            call(close, (int) r.value());
        }
        return r.errno();
    }
}
