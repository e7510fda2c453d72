package dev.ferrite.dir;

import java.nio.ByteBuffer;
import java.util.Arrays;

import dev.ferrite.io.Errno;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@link Namespace#seekData} and {@link Namespace#seekHole} as ext4 and XFS answer them: written extents are
 * data, holes and unwritten extents are not, buffered data not yet written back is, the end is a hole.
 */
class SeekDataTest extends FileTestBase {
    /** The file's size: a buffered write of 10 bytes 100 bytes into block 64. */
    private static final long SIZE = 64 * BS + 110;

    @Test
    void dataAndHolesOfASparseFileBeforeAndAfterWriteBack() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 1, 1)); // direct: data [0, 1) in blocks
            ns.write(f, 16 * BS, stamped(16 * BS, 2, 1)); // direct: data [16, 18)
            ns.fallocate(f, 0, 32 * BS, 16 * BS); // unwritten [32, 48)
            ns.write(f, 40 * BS + 5, bytes(100)); // buffered, into the unwritten range: data [40, 41)
            ns.write(f, 64 * BS + 100, bytes(10)); // buffered, into a hole past the end: data [64, 65)
            assertSparse(f); // the buffered writes are in the page cache only
            ns.fsync(f);
            assertSparse(f);
            ns.fallocate(f, Namespace.FALLOC_FL_ZERO_RANGE, 16 * BS, BS); // written to unwritten: a hole
            ns.fallocate(f, Namespace.FALLOC_FL_PUNCH_HOLE | Namespace.FALLOC_FL_KEEP_SIZE, 0, BS);
            assertEquals(17 * BS, ns.seekData(f, 0));
            assertEquals(17 * BS, ns.seekData(f, 16 * BS + 7));
            assertEquals(17 * BS + 7, ns.seekData(f, 17 * BS + 7));
            assertEquals(0, ns.seekHole(f, 0));
            assertEquals(18 * BS, ns.seekHole(f, 17 * BS));
        }
        try (Handle f = ns.open(root, "f")) { // after the last close trimmed the preallocation
            assertEquals(40 * BS, ns.seekData(f, 18 * BS));
            assertEquals(SIZE, ns.seekHole(f, 64 * BS));
        }
    }

    private void assertSparse(Handle f) {
        assertEquals(SIZE, ns.stat(f).size());
        assertEquals(0, ns.seekData(f, 0));
        assertEquals(100, ns.seekData(f, 100));
        assertEquals(BS, ns.seekHole(f, 0));
        assertEquals(16 * BS, ns.seekData(f, BS));
        assertEquals(18 * BS, ns.seekHole(f, 16 * BS + 10));
        assertEquals(40 * BS, ns.seekData(f, 18 * BS), "dirty pages over an unwritten extent are data");
        assertEquals(41 * BS, ns.seekHole(f, 40 * BS));
        assertEquals(64 * BS, ns.seekData(f, 41 * BS), "dirty pages over a hole are data");
        assertEquals(50 * BS + 1, ns.seekHole(f, 50 * BS + 1));
        assertEquals(SIZE, ns.seekHole(f, 64 * BS), "the end of the file is a hole");
        NamespaceTest.assertErrno(Errno.ENXIO, () -> ns.seekData(f, SIZE));
        NamespaceTest.assertErrno(Errno.ENXIO, () -> ns.seekHole(f, SIZE));
        NamespaceTest.assertErrno(Errno.ENXIO, () -> ns.seekData(f, -1));
    }

    @Test
    void noDataPastTheLastAndNothingButFiles() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.fallocate(f, 0, 0, 4 * BS);
            NamespaceTest.assertErrno(Errno.ENXIO, () -> ns.seekData(f, 0)); // all unwritten
            assertEquals(0, ns.seekHole(f, 0));
            ns.truncate(f, 100 * BS);
            NamespaceTest.assertErrno(Errno.ENXIO, () -> ns.seekData(f, 5 * BS));
        }
        ns.mkdir(root, "d", 0755).close();
        NamespaceTest.assertErrno(Errno.EISDIR, () -> ns.seekData(root, 0));
    }

    private static ByteBuffer bytes(int n) {
        byte[] b = new byte[n];
        Arrays.fill(b, (byte) 7);
        return ByteBuffer.wrap(b);
    }
}
