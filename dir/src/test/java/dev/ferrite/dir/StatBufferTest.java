package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.io.Errno;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The stat-into forms ({@link Namespace#lstat(Handle, String, StatBuffer)}, {@link Namespace#stat(Handle, StatBuffer)})
 * fill a reused buffer with exactly what the record-returning forms return: every kind of inode, a buffered
 * write's size and time not yet logged, and the same errors.
 */
class StatBufferTest extends FileTestBase {
    private void assertSame(Handle dir, String name, StatBuffer out) {
        ns.lstat(dir, name, out);
        assertEquals(ns.lstat(dir, name), out.toStat(), name);
    }

    @Test
    void aReusedBufferHoldsWhatLstatReturnsForEachKindOfInode() {
        StatBuffer out = new StatBuffer();
        ns.mkdir(root, "d", 0750).close();
        ns.symlink(root, "short", "d");
        ns.symlink(root, "long", "x".repeat(3000)); // its own block
        try (Handle f = ns.create(root, "f", 0640, true)) {
            ns.write(f, 0, stamped(0, 3, 1));
            ns.setattr(f, -1, 7, 8, 1_000_000_123L, 2_000_000_456L);
        }
        for (String name : new String[] {"f", "d", "short", "long", "d", "f", ".", "f"}) {
            assertSame(root, name, out); // each fill overwrites every field the last one set
        }
        assertEquals(InodeStat.S_IFREG | 0640, out.mode());
        assertEquals(3L * BS, out.size());
        assertEquals(7, out.uid());
        assertEquals(2_000_000_456L, out.mtimeNanos());
        ns.lstat(root, "long", out);
        assertEquals(true, out.isSymlink());
        assertEquals(3000, out.size());
        try (Handle d = ns.open(root, "d")) {
            ns.stat(d, out);
            assertEquals(ns.stat(d), out.toStat());
            assertEquals(true, out.isDirectory());
            assertSame(d, "..", out);
        }
    }

    @Test
    void aBufferedWritesSizeAndTimeShowBeforeTheyAreLogged() {
        StatBuffer out = new StatBuffer();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.setattr(f, -1, -1, -1, 1_000_000_000L, 1_000_000_000L);
            ns.write(f, 0, MemorySegment.ofArray(new byte[100])); // buffered: size and time held in memory
            ns.stat(f, out);
            assertEquals(100, out.size());
            assertEquals(ns.stat(f), out.toStat());
            assertSame(root, "f", out);
            assertEquals(true, out.mtimeNanos() > 1_000_000_000L && out.ctimeNanos() >= out.mtimeNanos(), out.toString());
        }
    }

    @Test
    void errorsAreLstats() {
        StatBuffer out = new StatBuffer();
        assertEquals(Errno.ENOENT, assertThrows(NamespaceException.class, () -> ns.lstat(root, "missing", out)).errno());
        assertEquals(Errno.EINVAL, assertThrows(NamespaceException.class, () -> ns.lstat(root, "a/b", out)).errno());
        try (Handle f = ns.create(root, "f", 0644, true)) {
            assertEquals(Errno.ENOTDIR, assertThrows(NamespaceException.class, () -> ns.lstat(f, "x", out)).errno());
            ns.unlink(root, "f");
            Handle closed = ns.openRoot();
            closed.close();
            assertEquals(Errno.EBADF, assertThrows(NamespaceException.class, () -> ns.lstat(closed, "f", out)).errno());
            assertEquals(Errno.EBADF, assertThrows(NamespaceException.class, () -> ns.stat(closed, out)).errno());
        }
    }
}
