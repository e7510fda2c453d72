package dev.ferrite.io;

/**
 * Linux errno values Ferrite reports (asm-generic numbering, shared by x86-64 and AArch64), with their
 * symbolic names. Descriptions come from the C library so they read as the rest of the system does.
 */
public final class Errno {
    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EINTR = 4;
    public static final int EIO = 5;
    public static final int ENXIO = 6;
    public static final int EBADF = 9;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int EFAULT = 14;
    public static final int EBUSY = 16;
    public static final int EEXIST = 17;
    public static final int ENODEV = 19;
    public static final int ENOTDIR = 20;
    public static final int EISDIR = 21;
    public static final int EINVAL = 22;
    public static final int EMFILE = 24;
    public static final int ENOTTY = 25;
    public static final int EFBIG = 27;
    public static final int ENOSPC = 28;
    public static final int EROFS = 30;
    public static final int ENAMETOOLONG = 36;
    public static final int ENOSYS = 38;
    public static final int EOPNOTSUPP = 95;
    public static final int EDQUOT = 122;

    private static final String[] NAMES = new String[128];

    static {
        NAMES[EPERM] = "EPERM";
        NAMES[ENOENT] = "ENOENT";
        NAMES[EINTR] = "EINTR";
        NAMES[EIO] = "EIO";
        NAMES[ENXIO] = "ENXIO";
        NAMES[EBADF] = "EBADF";
        NAMES[EAGAIN] = "EAGAIN";
        NAMES[ENOMEM] = "ENOMEM";
        NAMES[EACCES] = "EACCES";
        NAMES[EFAULT] = "EFAULT";
        NAMES[EBUSY] = "EBUSY";
        NAMES[EEXIST] = "EEXIST";
        NAMES[ENODEV] = "ENODEV";
        NAMES[ENOTDIR] = "ENOTDIR";
        NAMES[EISDIR] = "EISDIR";
        NAMES[EINVAL] = "EINVAL";
        NAMES[EMFILE] = "EMFILE";
        NAMES[ENOTTY] = "ENOTTY";
        NAMES[EFBIG] = "EFBIG";
        NAMES[ENOSPC] = "ENOSPC";
        NAMES[EROFS] = "EROFS";
        NAMES[ENAMETOOLONG] = "ENAMETOOLONG";
        NAMES[ENOSYS] = "ENOSYS";
        NAMES[EOPNOTSUPP] = "EOPNOTSUPP";
        NAMES[EDQUOT] = "EDQUOT";
    }

    private Errno() {
    }

    /** Symbolic name, e.g. {@code "ENOSPC"}; {@code "errno 77"} for values this class does not name. */
    public static String name(int errno) {
        String n = errno > 0 && errno < NAMES.length ? NAMES[errno] : null;
        return n != null ? n : "errno " + errno;
    }

    /** The C library's description, e.g. {@code "No space left on device"}. */
    public static String describe(int errno) {
        return Posix.strerror(errno);
    }
}
