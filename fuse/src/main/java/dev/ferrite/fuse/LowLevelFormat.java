package dev.ferrite.fuse;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The C structs this module exchanges with libfuse3 (3.14, its low-level API) and glibc on x86-64, laid out once:
 * {@code struct fuse_lowlevel_ops} (the operation table, a function pointer per operation in libfuse's order),
 * {@code fuse_entry_param}, {@code fuse_file_info}, {@code fuse_ctx}, {@code fuse_forget_data}, {@code fuse_args},
 * the start of {@code fuse_conn_info}, and glibc's {@code struct stat} and {@code struct statvfs}.
 */
final class LowLevelFormat {
    private LowLevelFormat() {
    }

    /** {@code struct fuse_lowlevel_ops}' members, in order (libfuse 3.14: 44 function pointers). */
    static final List<String> OPERATIONS = List.of("init", "destroy", "lookup", "forget", "getattr", "setattr", "readlink",
            "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link", "open", "read", "write", "flush", "release",
            "fsync", "opendir", "readdir", "releasedir", "fsyncdir", "statfs", "setxattr", "getxattr", "listxattr",
            "removexattr", "access", "create", "getlk", "setlk", "bmap", "ioctl", "poll", "write_buf", "retrieve_reply",
            "forget_multi", "flock", "fallocate", "readdirplus", "copy_file_range", "lseek");
    static final StructLayout LOWLEVEL_OPS = MemoryLayout.structLayout(pointers());

    private static MemoryLayout[] pointers() {
        List<MemoryLayout> members = new ArrayList<>();
        for (String op : OPERATIONS) {
            members.add(ADDRESS.withName(op));
        }
        return members.toArray(MemoryLayout[]::new);
    }

    /** Where operation {@code op}'s function pointer goes in the table. */
    static long operation(String op) {
        return LOWLEVEL_OPS.byteOffset(PathElement.groupElement(op));
    }

    /** glibc's x86-64 {@code struct stat} (144 bytes); times as seconds then nanoseconds. */
    static final StructLayout STAT = MemoryLayout.structLayout(
            JAVA_LONG.withName("st_dev"), JAVA_LONG.withName("st_ino"), JAVA_LONG.withName("st_nlink"),
            JAVA_INT.withName("st_mode"), JAVA_INT.withName("st_uid"), JAVA_INT.withName("st_gid"),
            MemoryLayout.paddingLayout(4), JAVA_LONG.withName("st_rdev"), JAVA_LONG.withName("st_size"),
            JAVA_LONG.withName("st_blksize"), JAVA_LONG.withName("st_blocks"),
            JAVA_LONG.withName("st_atime"), JAVA_LONG.withName("st_atime_nsec"),
            JAVA_LONG.withName("st_mtime"), JAVA_LONG.withName("st_mtime_nsec"),
            JAVA_LONG.withName("st_ctime"), JAVA_LONG.withName("st_ctime_nsec"),
            MemoryLayout.sequenceLayout(3, JAVA_LONG).withName("reserved"));
    static final long ST_INO = field(STAT, "st_ino"), ST_NLINK = field(STAT, "st_nlink"), ST_MODE = field(STAT, "st_mode"),
            ST_UID = field(STAT, "st_uid"), ST_GID = field(STAT, "st_gid"), ST_SIZE = field(STAT, "st_size"),
            ST_BLKSIZE = field(STAT, "st_blksize"), ST_BLOCKS = field(STAT, "st_blocks"), ST_ATIM = field(STAT, "st_atime"),
            ST_MTIM = field(STAT, "st_mtime"), ST_CTIM = field(STAT, "st_ctime");

    /** glibc's x86-64 {@code struct statvfs} (112 bytes). */
    static final StructLayout STATVFS = MemoryLayout.structLayout(
            JAVA_LONG.withName("f_bsize"), JAVA_LONG.withName("f_frsize"), JAVA_LONG.withName("f_blocks"),
            JAVA_LONG.withName("f_bfree"), JAVA_LONG.withName("f_bavail"), JAVA_LONG.withName("f_files"),
            JAVA_LONG.withName("f_ffree"), JAVA_LONG.withName("f_favail"), JAVA_LONG.withName("f_fsid"),
            JAVA_LONG.withName("f_flag"), JAVA_LONG.withName("f_namemax"), MemoryLayout.sequenceLayout(6, JAVA_INT).withName("spare"));
    static final long F_BSIZE = field(STATVFS, "f_bsize"), F_FRSIZE = field(STATVFS, "f_frsize"), F_BLOCKS = field(STATVFS, "f_blocks"),
            F_BFREE = field(STATVFS, "f_bfree"), F_BAVAIL = field(STATVFS, "f_bavail"), F_FILES = field(STATVFS, "f_files"),
            F_FFREE = field(STATVFS, "f_ffree"), F_FAVAIL = field(STATVFS, "f_favail"), F_NAMEMAX = field(STATVFS, "f_namemax");

    /** {@code struct fuse_entry_param}: what a lookup (or a create, mkdir, link...) answers. */
    static final StructLayout ENTRY_PARAM = MemoryLayout.structLayout(JAVA_LONG.withName("ino"), JAVA_LONG.withName("generation"),
            STAT.withName("attr"), JAVA_DOUBLE.withName("attr_timeout"), JAVA_DOUBLE.withName("entry_timeout"));
    static final long E_INO = field(ENTRY_PARAM, "ino"), E_GENERATION = field(ENTRY_PARAM, "generation"),
            E_ATTR = field(ENTRY_PARAM, "attr"), E_ATTR_TIMEOUT = field(ENTRY_PARAM, "attr_timeout"),
            E_ENTRY_TIMEOUT = field(ENTRY_PARAM, "entry_timeout");

    /** {@code struct fuse_file_info} (3.14): open flags, a word of bit fields, then the file handle. */
    static final StructLayout FILE_INFO = MemoryLayout.structLayout(JAVA_INT.withName("flags"), JAVA_INT.withName("bits"),
            JAVA_INT.withName("padding2"), MemoryLayout.paddingLayout(4), JAVA_LONG.withName("fh"),
            JAVA_LONG.withName("lock_owner"), JAVA_INT.withName("poll_events"), MemoryLayout.paddingLayout(4));
    static final long FI_FLAGS = field(FILE_INFO, "flags"), FI_BITS = field(FILE_INFO, "bits"), FI_FH = field(FILE_INFO, "fh");
    /** {@code keep_cache}, the third bit field of {@code bits} (after {@code writepage} and {@code direct_io}): FOPEN_KEEP_CACHE. */
    static final int FI_KEEP_CACHE = 1 << 2;

    /** {@code struct fuse_ctx}: the calling process's ids. */
    static final StructLayout CTX = MemoryLayout.structLayout(JAVA_INT.withName("uid"), JAVA_INT.withName("gid"),
            JAVA_INT.withName("pid"), JAVA_INT.withName("umask"));
    static final long CTX_UID = field(CTX, "uid"), CTX_GID = field(CTX, "gid");

    /** {@code struct fuse_forget_data}, an element of forget_multi's array. */
    static final StructLayout FORGET_DATA = MemoryLayout.structLayout(JAVA_LONG.withName("ino"), JAVA_LONG.withName("nlookup"));

    /** {@code struct fuse_args}: argc, argv, whether libfuse allocated argv. */
    static final StructLayout ARGS = MemoryLayout.structLayout(JAVA_INT.withName("argc"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("argv"), JAVA_INT.withName("allocated"), MemoryLayout.paddingLayout(4));
    static final long ARGS_ARGC = field(ARGS, "argc"), ARGS_ARGV = field(ARGS, "argv");

    /** The start of {@code struct fuse_conn_info} (init's argument), up to the capabilities the server wants. */
    static final StructLayout CONN_INFO = MemoryLayout.structLayout(JAVA_INT.withName("proto_major"), JAVA_INT.withName("proto_minor"),
            JAVA_INT.withName("max_write"), JAVA_INT.withName("max_read"), JAVA_INT.withName("max_readahead"),
            JAVA_INT.withName("capable"), JAVA_INT.withName("want"));
    static final long CONN_WANT = field(CONN_INFO, "want");
    /** {@code FUSE_CAP_WRITEBACK_CACHE}. */
    static final int CAP_WRITEBACK_CACHE = 1 << 16;

    /** setattr's {@code to_set} bits ({@code FUSE_SET_ATTR_*}). */
    static final int SET_MODE = 1, SET_UID = 1 << 1, SET_GID = 1 << 2, SET_SIZE = 1 << 3, SET_ATIME = 1 << 4,
            SET_MTIME = 1 << 5, SET_ATIME_NOW = 1 << 7, SET_MTIME_NOW = 1 << 8;

    /** Writes nanoseconds since the epoch as a {@code struct timespec} at {@code at}. */
    static void setTime(MemorySegment s, long at, long nanos) {
        s.set(JAVA_LONG, at, Math.floorDiv(nanos, 1_000_000_000L));
        s.set(JAVA_LONG, at + 8, Math.floorMod(nanos, 1_000_000_000L));
    }

    /** The {@code struct timespec} at {@code at} as nanoseconds since the epoch. */
    static long time(MemorySegment s, long at) {
        return s.get(JAVA_LONG, at) * 1_000_000_000L + s.get(JAVA_LONG, at + 8);
    }

    private static long field(StructLayout struct, String name) {
        return struct.byteOffset(PathElement.groupElement(name));
    }
}
