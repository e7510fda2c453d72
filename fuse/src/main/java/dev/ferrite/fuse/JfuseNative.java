package dev.ferrite.fuse;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.util.List;

import org.cryptomator.jfuse.api.Fuse;
import org.cryptomator.jfuse.api.FuseConfig;
import org.cryptomator.jfuse.api.Stat;
import org.cryptomator.jfuse.api.Statvfs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * This module's FFM code, for what jfuse 0.7.0 leaves out: its {@link Stat} sets no inode number, block
 * count or block size and its {@link Statvfs} no inode counts, so these are written into the C structs
 * behind them (glibc's x86-64 layouts); and its operation table binds no link, mknod, fallocate or lseek, so
 * upcalls for them go into libfuse's {@code struct fuse_operations} before the mount. The structs are
 * reached through jfuse's own accessors by reflection, which needs its Linux package readable (the class
 * path, or {@code --add-opens}).
 */
@SuppressWarnings("restricted")
final class JfuseNative {
    // struct stat, x86-64 glibc: offsets of the fields set here (144 bytes in all)
    private static final long STAT_BYTES = 144;
    static final long ST_INO = 8, ST_NLINK = 16, ST_MODE = 24, ST_UID = 28, ST_GID = 32, ST_SIZE = 48,
            ST_BLKSIZE = 56, ST_BLOCKS = 64, ST_ATIM = 72, ST_MTIM = 88, ST_CTIM = 104;
    // struct statvfs, x86-64 glibc
    private static final long STATVFS_BYTES = 112;
    static final long F_FILES = 40, F_FFREE = 48, F_FAVAIL = 56;
    // struct fuse_operations (libfuse 3.x): function pointer slots; struct fuse_file_info: the fh field
    private static final long OPS_BYTES = 336, OP_MKNOD = 16, OP_LINK = 64, OP_FALLOCATE = 312, OP_LSEEK = 328;
    private static final long FI_BYTES = 64, FI_FH = 16;
    private static final long PATH_BYTES = 4096;

    private static final String LINUX = "org.cryptomator.jfuse.linux.amd64.";
    private static final MethodHandle STAT_SEGMENT = accessor(LINUX + "StatImpl", Stat.class);
    private static final MethodHandle STATVFS_SEGMENT = accessor(LINUX + "StatvfsImpl", Statvfs.class);
    private static final MethodHandle CONFIG_SEGMENT = accessor(LINUX + "FuseConfigImpl", FuseConfig.class);
    // struct fuse_config (libfuse 3.x): use_ino and readdir_ino, options libfuse 3 takes only here
    private static final long CONFIG_BYTES = 72, CFG_USE_INO = 64, CFG_READDIR_INO = 68;

    // struct fuse_context: the struct fuse pointer, then the calling process's uid and gid
    private static final long CONTEXT_BYTES = 16, CTX_UID = 8, CTX_GID = 12;
    private final MethodHandle fuseGetContext;
    private final MethodHandle fuseInvalidatePath;

    /** Binds the two libfuse calls jfuse does not make, from the library at {@code libfuse}. */
    JfuseNative(String libfuse) {
        SymbolLookup lib = SymbolLookup.libraryLookup(Path.of(libfuse), Arena.global());
        Linker linker = Linker.nativeLinker();
        fuseGetContext = linker.downcallHandle(lib.findOrThrow("fuse_get_context"), FunctionDescriptor.of(ADDRESS));
        fuseInvalidatePath = linker.downcallHandle(lib.findOrThrow("fuse_invalidate_path"), FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    }

    /**
     * Drops the kernel's cached attributes of {@code path}, from an operation's thread. The kernel knows each
     * path libfuse serves as an inode of its own, so a link's new name leaves the old name's link count stale
     * for the attribute timeout (tar then misses the hard link); this refreshes it. Returns libfuse's answer
     * (0, or -ENOENT if the kernel holds nothing for the path).
     */
    /** The calling process's uid (high half) and gid (low half), from an operation's thread. */
    long caller() {
        try {
            MemorySegment context = ((MemorySegment) fuseGetContext.invokeExact()).reinterpret(CONTEXT_BYTES);
            return (long) context.get(JAVA_INT, CTX_UID) << 32 | Integer.toUnsignedLong(context.get(JAVA_INT, CTX_GID));
        } catch (Throwable e) {
            throw new IllegalStateException("fuse_get_context", e);
        }
    }

    int invalidatePath(String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment context = ((MemorySegment) fuseGetContext.invokeExact()).reinterpret(CONTEXT_BYTES);
            return (int) fuseInvalidatePath.invokeExact(context.get(ADDRESS, 0), arena.allocateFrom(path));
        } catch (Throwable e) {
            throw new IllegalStateException("fuse_invalidate_path(" + path + ")", e);
        }
    }

    /** Whether this platform's structs are the ones laid out here. */
    static boolean supported() {
        return System.getProperty("os.name").equals("Linux") && System.getProperty("os.arch").equals("amd64");
    }

    /** The {@code struct stat} behind jfuse's {@code st}. */
    static MemorySegment segment(Stat st) {
        try {
            return ((MemorySegment) STAT_SEGMENT.invokeExact(st)).reinterpret(STAT_BYTES);
        } catch (Throwable e) {
            throw new IllegalStateException("jfuse's stat struct is out of reach", e);
        }
    }

    /** The {@code struct statvfs} behind jfuse's {@code st}. */
    static MemorySegment segment(Statvfs st) {
        try {
            return ((MemorySegment) STATVFS_SEGMENT.invokeExact(st)).reinterpret(STATVFS_BYTES);
        } catch (Throwable e) {
            throw new IllegalStateException("jfuse's statvfs struct is out of reach", e);
        }
    }

    /**
     * Sets {@code use_ino} and {@code readdir_ino} in libfuse's config (at init): the inode numbers of getattr and readdir
     * reach the kernel instead of libfuse's own node numbers.
     */
    static void useInodeNumbers(FuseConfig cfg) {
        MemorySegment c;
        try {
            c = ((MemorySegment) CONFIG_SEGMENT.invokeExact(cfg)).reinterpret(CONFIG_BYTES);
        } catch (Throwable e) {
            throw new IllegalStateException("jfuse's fuse_config struct is out of reach", e);
        }
        c.set(JAVA_INT, CFG_USE_INO, 1);
        c.set(JAVA_INT, CFG_READDIR_INO, 1);
    }

    /** Puts upcalls to {@code fs} for link, mknod, fallocate and lseek into {@code fuse}'s operation table, living as long as {@code arena}. */
    static void bindMissing(Fuse fuse, FerriteFileSystem fs, Arena arena) {
        MemorySegment ops;
        try {
            Field f = Fuse.class.getDeclaredField("fuseOperationsStruct");
            f.setAccessible(true);
            ops = ((MemorySegment) f.get(fuse)).reinterpret(OPS_BYTES);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("jfuse's operation table is out of reach (open org.cryptomator.jfuse.api to dev.ferrite.fuse)", e);
        }
        ops.set(ADDRESS, OP_LINK, stub("link", fs, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), arena));
        ops.set(ADDRESS, OP_MKNOD, stub("mknod", fs, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG), arena));
        ops.set(ADDRESS, OP_FALLOCATE, stub("fallocate", fs,
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG, JAVA_LONG, ADDRESS), arena));
        ops.set(ADDRESS, OP_LSEEK, stub("lseek", fs, FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS), arena));
    }

    // The upcalls: C arguments to Java ones. Nothing may escape an upcall (it would end the JVM).

    private static int link(FerriteFileSystem fs, MemorySegment from, MemorySegment to) {
        try {
            return fs.link(path(from), path(to));
        } catch (Throwable e) {
            return fs.fail(e, "link");
        }
    }

    private static int mknod(FerriteFileSystem fs, MemorySegment path, int mode, long rdev) {
        try {
            return fs.mknod(path(path), mode);
        } catch (Throwable e) {
            return fs.fail(e, "mknod");
        }
    }

    private static int fallocate(FerriteFileSystem fs, MemorySegment path, int mode, long offset, long length, MemorySegment fi) {
        try {
            return fs.fallocate(fi.reinterpret(FI_BYTES).get(JAVA_LONG, FI_FH), mode, offset, length);
        } catch (Throwable e) {
            return fs.fail(e, "fallocate");
        }
    }

    /** The kernel sends only SEEK_DATA and SEEK_HOLE (it answers the other whences itself). */
    private static long lseek(FerriteFileSystem fs, MemorySegment path, long offset, int whence, MemorySegment fi) {
        try {
            return fs.lseek(fi.reinterpret(FI_BYTES).get(JAVA_LONG, FI_FH), offset, whence);
        } catch (Throwable e) {
            return fs.fail(e, "lseek");
        }
    }

    private static String path(MemorySegment p) {
        return p.reinterpret(PATH_BYTES).getString(0);
    }

    /** An upcall stub calling static method {@code name} of this class with {@code fs} and the C arguments. */
    private static MemorySegment stub(String name, FerriteFileSystem fs, FunctionDescriptor fd, Arena arena) {
        List<MemoryLayout> args = fd.argumentLayouts();
        Class<?>[] params = new Class<?>[args.size() + 1];
        params[0] = FerriteFileSystem.class;
        for (int i = 0; i < args.size(); i++) {
            params[i + 1] = ((ValueLayout) args.get(i)).carrier();
        }
        try {
            Class<?> result = ((ValueLayout) fd.returnLayout().orElseThrow()).carrier();
            MethodHandle target = MethodHandles.lookup().findStatic(JfuseNative.class, name, MethodType.methodType(result, params));
            return Linker.nativeLinker().upcallStub(target.bindTo(fs), fd, arena);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(name, e);
        }
    }

    private static MethodHandle accessor(String implementation, Class<?> api) {
        try {
            Method m = Class.forName(implementation, false, api.getClassLoader()).getDeclaredMethod("segment");
            m.setAccessible(true);
            return MethodHandles.lookup().unreflect(m).asType(MethodType.methodType(MemorySegment.class, api));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return MethodHandles.dropArguments(MethodHandles.throwException(MemorySegment.class, IllegalStateException.class)
                    .bindTo(new IllegalStateException(implementation + " is out of reach: " + e)), 0, api);
        }
    }
}
