package dev.ferrite.dir;

import dev.ferrite.io.Errno;
import dev.ferrite.io.FerriteException;

/**
 * A namespace operation refused what it was asked, with the errno a POSIX file system would return
 * ({@link Errno#ENOENT}, {@link Errno#EEXIST}, {@link Errno#ENOTDIR}, {@link Errno#EISDIR},
 * {@link Errno#ENOTEMPTY}, {@link Errno#EINVAL}, {@link Errno#ENAMETOOLONG}, {@link Errno#ELOOP},
 * {@link Errno#EMLINK}, {@link Errno#EPERM}, {@link Errno#EBADF}, {@link Errno#EBUSY}). Always thrown with the
 * volume unchanged. Not an {@link dev.ferrite.io.InvalidArgumentException}: ENOENT or EEXIST answer a
 * well-formed request about the namespace's state.
 */
public class NamespaceException extends FerriteException {
    private final int errno;

    public NamespaceException(int errno, String message) {
        super(Errno.name(errno) + ": " + message);
        this.errno = errno;
    }

    public int errno() {
        return errno;
    }
}
