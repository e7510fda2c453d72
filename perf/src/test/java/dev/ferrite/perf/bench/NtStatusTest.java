package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.ferrite.io.Errno;

import org.junit.jupiter.api.Test;

class NtStatusTest {
    @Test
    void parsesNamesAndCodes() {
        assertEquals(NtStatus.OK, NtStatus.parse("NT_STATUS_OK"));
        assertEquals(NtStatus.OK, NtStatus.parse("0x00000000"));
        assertEquals(NtStatus.OBJECT_NAME_NOT_FOUND, NtStatus.parse("0xC0000034"));
        assertEquals(NtStatus.NO_SUCH_FILE, NtStatus.parse("NT_STATUS_NO_SUCH_FILE"));
        assertEquals("NT_STATUS_OBJECT_PATH_NOT_FOUND", NtStatus.OBJECT_PATH_NOT_FOUND.toString());
        assertEquals("unknown status 0x12345678", assertThrows(IllegalArgumentException.class,
                () -> NtStatus.parse("0x12345678")).getMessage());
        assertEquals("status 0xZZ is not a hexadecimal code", assertThrows(IllegalArgumentException.class,
                () -> NtStatus.parse("0xZZ")).getMessage());
    }

    @Test
    void mapsErrnosAsSambaAnswersThem() {
        assertEquals(NtStatus.OBJECT_NAME_NOT_FOUND, NtStatus.ofErrno(Errno.ENOENT, false));
        assertEquals(NtStatus.OBJECT_PATH_NOT_FOUND, NtStatus.ofErrno(Errno.ENOENT, true));
        assertEquals(NtStatus.NOT_A_DIRECTORY, NtStatus.ofErrno(Errno.ENOTDIR, false));
        assertEquals(NtStatus.OBJECT_NAME_COLLISION, NtStatus.ofErrno(Errno.EEXIST, false));
        assertEquals(NtStatus.FILE_IS_A_DIRECTORY, NtStatus.ofErrno(Errno.EISDIR, false));
        assertEquals(NtStatus.DIRECTORY_NOT_EMPTY, NtStatus.ofErrno(Errno.ENOTEMPTY, false));
        assertEquals(NtStatus.ACCESS_DENIED, NtStatus.ofErrno(Errno.EACCES, false));
        assertEquals(NtStatus.ACCESS_DENIED, NtStatus.ofErrno(Errno.EPERM, false));
        assertEquals(NtStatus.DISK_FULL, NtStatus.ofErrno(Errno.ENOSPC, false));
        assertEquals(NtStatus.DISK_FULL, NtStatus.ofErrno(Errno.EFBIG, false));
        assertEquals(NtStatus.OBJECT_NAME_INVALID, NtStatus.ofErrno(Errno.ENAMETOOLONG, false));
        assertEquals(NtStatus.INVALID_HANDLE, NtStatus.ofErrno(Errno.EBADF, false));
        assertEquals(NtStatus.INVALID_PARAMETER, NtStatus.ofErrno(Errno.EINVAL, false));
        assertEquals(NtStatus.OBJECT_PATH_NOT_FOUND, NtStatus.ofErrno(Errno.ELOOP, false));
        assertEquals(NtStatus.TOO_MANY_LINKS, NtStatus.ofErrno(Errno.EMLINK, false));
        assertEquals(NtStatus.UNSUCCESSFUL, NtStatus.ofErrno(Errno.EIO, false));
    }
}
