package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;

import dev.ferrite.dir.NamespaceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.sys.Posix;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A host directory driven through directory descriptors, the shape of Ferrite's handle calls
 * ({@link MetaApi#HANDLE}): the root is opened when the session starts and each directory when first
 * used, then files are created ({@code openat O_CREAT|O_EXCL}, closed at once, as Ferrite's create
 * returns a handle the workload closes), stat'ed ({@code fstatat AT_SYMLINK_NOFOLLOW}), unlinked
 * ({@code unlinkat}) and listed ({@code getdents64} from offset 0) by name relative to them. Names reach
 * the kernel through one buffer the session reuses, so no call allocates native memory. A failed call
 * throws {@link NamespaceException} with the kernel's errno, as Ferrite's namespace does. Confined to the
 * thread that opened it.
 */
final class PosixHandleSession implements MetaStore.Session {
    private static final int PATH_MAX = 4096;
    /** glibc's readdir buffer: some 800 entries of 16-character names a call. */
    private static final int DIRENTS_BYTES = 32 << 10;

    private final Path root;
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment name = arena.allocate(PATH_MAX);
    private final MemorySegment stat = arena.allocate(Posix.STAT_SIZE, 8);
    private final MemorySegment dirents = arena.allocate(DIRENTS_BYTES, 8);
    private final Map<String, Integer> dirs = new HashMap<>();
    private final int rootFd;

    PosixHandleSession(Path root) {
        this.root = root;
        try {
            rootFd = check(Posix.openat(Posix.AT_FDCWD, cString(root.toString()), Posix.O_RDONLY | Posix.O_DIRECTORY
                    | Posix.O_CLOEXEC, 0), "openat", "", root.toString());
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    private MemorySegment cString(String s) {
        name.setString(0, s);
        return name;
    }

    /** {@code result} if the call succeeded, else the errno it captured as a {@link NamespaceException}. */
    private int check(long result, String call, String dir, String entry) {
        if (result < 0) {
            int errno = Posix.errno();
            throw new NamespaceException(errno, call + "(" + root + (dir.isEmpty() ? "" : "/" + dir) + ", " + entry
                    + "): " + Errno.describe(errno));
        }
        return (int) result;
    }

    private int dir(String dir) {
        Integer fd = dirs.get(dir);
        if (fd == null) {
            fd = check(Posix.openat(rootFd, cString(dir), Posix.O_RDONLY | Posix.O_DIRECTORY | Posix.O_CLOEXEC, 0),
                    "openat", "", dir);
            dirs.put(dir, fd);
        }
        return fd;
    }

    @Override
    public void mkdir(String dir) {
        check(Posix.mkdirat(rootFd, cString(dir), 0755), "mkdirat", "", dir);
    }

    @Override
    public void create(String dir, String entry) {
        int d = dir(dir);
        int fd = check(Posix.openat(d, cString(entry), Posix.O_WRONLY | Posix.O_CREAT | Posix.O_EXCL | Posix.O_CLOEXEC,
                0644), "openat", dir, entry);
        check(Posix.close(fd), "close", dir, entry);
    }

    @Override
    public long list(String dir, Consumer<String> names) {
        int d = dir(dir);
        check(Posix.lseek(d, 0, Posix.SEEK_SET), "lseek", dir, "");
        long n = 0;
        while (true) {
            long filled = check(Posix.getdents64(d, dirents, DIRENTS_BYTES), "getdents64", dir, "");
            if (filled == 0) {
                return n;
            }
            for (long at = 0; at < filled; at += Short.toUnsignedInt(dirents.get(JAVA_SHORT, at + Posix.DIRENT64_RECLEN_OFFSET))) {
                long nameAt = at + Posix.DIRENT64_NAME_OFFSET;
                if (!dotOrDotDot(nameAt)) {
                    names.accept(dirents.getString(nameAt));
                    n++;
                }
            }
        }
    }

    /** "." and "..", which java.nio's listing and Ferrite's readdir leave out too. */
    private boolean dotOrDotDot(long at) {
        return dirents.get(JAVA_BYTE, at) == '.' && (dirents.get(JAVA_BYTE, at + 1) == 0
                || dirents.get(JAVA_BYTE, at + 1) == '.' && dirents.get(JAVA_BYTE, at + 2) == 0);
    }

    @Override
    public long stat(String dir, String entry) {
        check(Posix.fstatat(dir(dir), cString(entry), stat, Posix.AT_SYMLINK_NOFOLLOW), "fstatat", dir, entry);
        return stat.get(JAVA_LONG, Posix.STAT_SIZE_OFFSET);
    }

    @Override
    public void unlink(String dir, String entry) {
        check(Posix.unlinkat(dir(dir), cString(entry), 0), "unlinkat", dir, entry);
    }

    @Override
    public void rmdir(String dir) {
        Integer fd = dirs.remove(dir);
        if (fd != null) {
            Posix.close(fd);
        }
        check(Posix.unlinkat(rootFd, cString(dir), Posix.AT_REMOVEDIR), "unlinkat", "", dir);
    }

    @Override
    public void close() {
        for (int fd : dirs.values()) {
            Posix.close(fd);
        }
        dirs.clear();
        Posix.close(rootFd);
        arena.close();
    }
}
