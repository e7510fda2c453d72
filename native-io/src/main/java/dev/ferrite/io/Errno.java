package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

/**
 * Linux errno values Ferrite reports (asm-generic numbering, shared by x86-64 and AArch64), with their
 * symbolic names and descriptions.
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
    public static final int EXDEV = 18;
    public static final int EFBIG = 27;
    public static final int ENOSPC = 28;
    public static final int EROFS = 30;
    public static final int EMLINK = 31;
    public static final int ENAMETOOLONG = 36;
    public static final int ENOSYS = 38;
    public static final int ENOTEMPTY = 39;
    public static final int ELOOP = 40;
    public static final int EOPNOTSUPP = 95;
    public static final int EDQUOT = 122;

    private static final String[] NAMES = new String[128];
    private static final String[] DESCRIPTIONS = new String[128];

    static {
        define(EPERM, "EPERM", "Operation not permitted");
        define(ENOENT, "ENOENT", "No such file or directory");
        define(EINTR, "EINTR", "Interrupted system call");
        define(EIO, "EIO", "Input/output error");
        define(ENXIO, "ENXIO", "No such device or address");
        define(EBADF, "EBADF", "Bad file descriptor");
        define(EAGAIN, "EAGAIN", "Resource temporarily unavailable");
        define(ENOMEM, "ENOMEM", "Cannot allocate memory");
        define(EACCES, "EACCES", "Permission denied");
        define(EFAULT, "EFAULT", "Bad address");
        define(EBUSY, "EBUSY", "Device or resource busy");
        define(EEXIST, "EEXIST", "File exists");
        define(ENODEV, "ENODEV", "No such device");
        define(ENOTDIR, "ENOTDIR", "Not a directory");
        define(EISDIR, "EISDIR", "Is a directory");
        define(EINVAL, "EINVAL", "Invalid argument");
        define(EMFILE, "EMFILE", "Too many open files");
        define(ENOTTY, "ENOTTY", "Inappropriate ioctl for device");
        define(EXDEV, "EXDEV", "Invalid cross-device link");
        define(EFBIG, "EFBIG", "File too large");
        define(ENOSPC, "ENOSPC", "No space left on device");
        define(EROFS, "EROFS", "Read-only file system");
        define(EMLINK, "EMLINK", "Too many links");
        define(ENAMETOOLONG, "ENAMETOOLONG", "File name too long");
        define(ENOSYS, "ENOSYS", "Function not implemented");
        define(ENOTEMPTY, "ENOTEMPTY", "Directory not empty");
        define(ELOOP, "ELOOP", "Too many levels of symbolic links");
        define(EOPNOTSUPP, "EOPNOTSUPP", "Operation not supported");
        define(EDQUOT, "EDQUOT", "Disk quota exceeded");
    }

    private Errno() {
    }

    private static void define(int errno, String name, String description) {
        NAMES[errno] = name;
        DESCRIPTIONS[errno] = description;
    }

    /** Symbolic name, e.g. {@code "ENOSPC"}; {@code "errno 77"} for values this class does not name. */
    public static String name(int errno) {
        String n = errno > 0 && errno < NAMES.length ? NAMES[errno] : null;
        return n != null ? n : "errno " + errno;
    }

    /**
     * Description, e.g. {@code "No space left on device"}: glibc's wording for the values named here (no
     * native call, so messages from RAM devices and injected faults need nothing native), the C library's
     * {@code strerror} for any other.
     */
    public static String describe(int errno) {
        String d = errno > 0 && errno < DESCRIPTIONS.length ? DESCRIPTIONS[errno] : null;
        return d != null ? d : Posix.strerror(errno);
    }
}
