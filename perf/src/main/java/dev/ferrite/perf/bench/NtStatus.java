package dev.ferrite.perf.bench;

import dev.ferrite.io.Errno;

/**
 * The NT status codes a dbench NetBench loadfile expects of its operations, and the one each Ferrite
 * errno stands for: the mapping a Samba server makes from {@code errno} when it answers a client (its
 * {@code unix_nt_errmap}), so that a loadfile recorded against a Windows server replays against a
 * POSIX-like namespace. Two answers need more than the errno: a missing name is
 * {@link #OBJECT_NAME_NOT_FOUND} when its directory exists and {@link #OBJECT_PATH_NOT_FOUND} when a
 * directory on the way is missing, and a directory search that matches nothing is {@link #NO_SUCH_FILE}.
 */
public enum NtStatus {
    OK(0x0000_0000),
    UNSUCCESSFUL(0xC000_0001),
    INVALID_HANDLE(0xC000_0008),
    INVALID_PARAMETER(0xC000_000D),
    NO_SUCH_FILE(0xC000_000F),
    END_OF_FILE(0xC000_0011),
    ACCESS_DENIED(0xC000_0022),
    OBJECT_NAME_INVALID(0xC000_0033),
    OBJECT_NAME_NOT_FOUND(0xC000_0034),
    OBJECT_NAME_COLLISION(0xC000_0035),
    OBJECT_PATH_NOT_FOUND(0xC000_003A),
    LOCK_NOT_GRANTED(0xC000_0055),
    RANGE_NOT_LOCKED(0xC000_007E),
    DISK_FULL(0xC000_007F),
    FILE_IS_A_DIRECTORY(0xC000_00BA),
    NOT_SAME_DEVICE(0xC000_00D4),
    DIRECTORY_NOT_EMPTY(0xC000_0101),
    NOT_A_DIRECTORY(0xC000_0103),
    TOO_MANY_LINKS(0xC000_0265);

    private static final String PREFIX = "NT_STATUS_";

    private final int code;

    NtStatus(int code) {
        this.code = code;
    }

    /** The 32-bit NTSTATUS value. */
    public int code() {
        return code;
    }

    /** As a loadfile spells it: {@code NT_STATUS_OK}. */
    @Override
    public String toString() {
        return PREFIX + name();
    }

    /**
     * A loadfile's status field: {@code NT_STATUS_<NAME>} or a hexadecimal code ({@code 0x00000000}).
     *
     * @throws IllegalArgumentException naming the field if it is neither, or a status this class does not know
     */
    public static NtStatus parse(String field) {
        if (field.startsWith(PREFIX)) {
            try {
                return valueOf(field.substring(PREFIX.length()));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("unknown status " + field);
            }
        }
        if (field.regionMatches(true, 0, "0x", 0, 2)) {
            long code;
            try {
                code = Long.parseLong(field.substring(2), 16);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("status " + field + " is not a hexadecimal code");
            }
            for (NtStatus s : values()) {
                if (Integer.toUnsignedLong(s.code) == code) {
                    return s;
                }
            }
            throw new IllegalArgumentException("unknown status " + field);
        }
        throw new IllegalArgumentException("status " + field + " is neither NT_STATUS_<NAME> nor a 0x code");
    }

    /**
     * The status a Samba server answers for {@code errno}.
     *
     * @param parentMissing for ENOENT: the directory that would hold the name is missing too (then the path,
     *                      not the name, was not found)
     */
    public static NtStatus ofErrno(int errno, boolean parentMissing) {
        return switch (errno) {
            case Errno.ENOENT -> parentMissing ? OBJECT_PATH_NOT_FOUND : OBJECT_NAME_NOT_FOUND;
            case Errno.ENOTDIR -> NOT_A_DIRECTORY;
            case Errno.EEXIST -> OBJECT_NAME_COLLISION;
            case Errno.EISDIR -> FILE_IS_A_DIRECTORY;
            case Errno.ENOTEMPTY -> DIRECTORY_NOT_EMPTY;
            case Errno.EACCES, Errno.EPERM, Errno.EROFS -> ACCESS_DENIED;
            case Errno.ENOSPC, Errno.EDQUOT, Errno.EFBIG -> DISK_FULL;
            case Errno.ENAMETOOLONG -> OBJECT_NAME_INVALID;
            case Errno.EBADF -> INVALID_HANDLE;
            case Errno.EINVAL -> INVALID_PARAMETER;
            case Errno.ELOOP -> OBJECT_PATH_NOT_FOUND;
            case Errno.EXDEV -> NOT_SAME_DEVICE;
            case Errno.EMLINK -> TOO_MANY_LINKS;
            default -> UNSUCCESSFUL;
        };
    }
}
