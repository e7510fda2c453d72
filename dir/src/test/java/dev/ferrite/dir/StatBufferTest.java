package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.io.Errno;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The stat-into forms ({@link Namespace#lstat(Handle, String, StatBuffer)}, {@link Namespace#stat(Handle, StatBuffer)})
 * fill a reused buffer with exactly what the record-returning forms return: every kind of inode, a buffered
 * write's size and time not yet logged, and the same errors. {@link Namespace#statIfExists} answers a
 * missing path with false where stat throws ENOENT, changing nothing and allocating nothing; {@link
 * Namespace#openIfExists} with null where open throws it.
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

    @Test
    void statIfExistsAndOpenIfExistsAnswerWhereStatAndOpenThrowEnoentAndAsThemOtherwise() {
        StatBuffer out = new StatBuffer();
        ns.mkdir("/d", 0755);
        ns.mkdir("/d/e", 0755);
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(new byte[10]));
        }
        ns.symlink("e", "/d/to-e");
        ns.symlink("/d/nowhere/x", "/d/dangling");
        ns.symlink("/loop", "/loop");
        long inodes = v.statfs().freeInodes();
        String[] missing = {"/missing", "/d/missing", "/missing/x", "/d/e/missing", "/d/to-e/missing", "/d/dangling",
                "/d/to-e/../missing", "/d/missing/"};
        for (String path : missing) {
            assertEquals(Errno.ENOENT, assertThrows(NamespaceException.class, () -> ns.stat(path)).errno(), path);
            assertFalse(ns.statIfExists(path, out), path);
        }
        for (String path : new String[] {"/", "/d", "/d/e/", "/d/to-e", "/f", "/d/to-e/..", "/d/./e"}) {
            assertTrue(ns.statIfExists(path, out), path);
            assertEquals(ns.stat(path), out.toStat(), path);
        }
        // the other errnos are stat's, thrown as they are
        assertEquals(Errno.ENOTDIR, assertThrows(NamespaceException.class, () -> ns.statIfExists("/f/x", out)).errno());
        assertEquals(Errno.ELOOP, assertThrows(NamespaceException.class, () -> ns.statIfExists("/loop", out)).errno());
        assertEquals(Errno.EINVAL, assertThrows(NamespaceException.class, () -> ns.statIfExists("relative", out)).errno());
        // a probe after walks left half-way (inside a symlink's target, by an error) starts afresh
        assertTrue(ns.statIfExists("/d/to-e", out));
        assertEquals(ns.stat("/d/e").ino(), out.ino());
        assertEquals(ns.lookup("/d/e"), ns.lookup("/d/to-e/"));
        for (String path : missing) {
            assertEquals(Errno.ENOENT, assertThrows(NamespaceException.class, () -> ns.open(path, Namespace.O_RDONLY)).errno(), path);
            assertEquals(null, ns.openIfExists(path, Namespace.O_RDWR), path);
        }
        try (Handle h = ns.openIfExists("/d/to-e", Namespace.O_RDONLY)) {
            assertEquals(ns.stat("/d/e").ino(), h.ino());
        }
        assertEquals(Errno.EISDIR, assertThrows(NamespaceException.class, () -> ns.openIfExists("/d", Namespace.O_RDWR)).errno());
        assertEquals(Errno.ENOTDIR, assertThrows(NamespaceException.class, () -> ns.openIfExists("/f/x", Namespace.O_RDWR)).errno());
        assertEquals(inodes, v.statfs().freeInodes(), "a probe changes nothing");
        assertEquals(java.util.List.of("d", "f", "loop"), ns.list("/").stream().map(DirEntry::name).sorted().toList());
    }

    @Test
    void lstatIfExistsAnswersFalseWhereTheHandleFormThrowsEnoentAndAsItOtherwise() {
        StatBuffer out = new StatBuffer();
        ns.mkdir("/d", 0755);
        ns.symlink("/nowhere", "/d/dangling");
        try (Handle f = ns.create(root, "f", 0644, true); Handle d = ns.open("/d", Namespace.O_RDONLY)) {
            for (String name : new String[] {"missing", "f"}) {
                assertEquals(Errno.ENOENT, assertThrows(NamespaceException.class, () -> ns.lstat(d, name, out)).errno(), name);
                assertFalse(ns.lstatIfExists(d, name, out), name);
            }
            for (String name : new String[] {".", "..", "dangling"}) {
                assertTrue(ns.lstatIfExists(d, name, out), name);
                assertEquals(ns.lstat(d, name), out.toStat(), name);
            }
            // the other errnos are lstat's: a name that is no name, a file taken for a directory
            assertEquals(Errno.EINVAL, assertThrows(NamespaceException.class, () -> ns.lstatIfExists(d, "a/b", out)).errno());
            assertEquals(Errno.ENOTDIR, assertThrows(NamespaceException.class, () -> ns.lstatIfExists(f, "x", out)).errno());
        }
    }

    @Test
    void aStatByPathAllocatesNothingWhetherThePathIsThereOrMissingNorAnOpenOfAMissingPath() {
        StatBuffer out = new StatBuffer();
        ns.mkdir("/d", 0755);
        ns.create("/d/f", 0644, true);
        int rounds = 20_000;
        for (int warm = 0; warm < 2; warm++) { // the first round warms up: classes loaded, the thread's walk made
            long before = allocatedBytes();
            for (int i = 0; i < rounds; i++) {
                if (!ns.statIfExists("/d/f", out) || ns.statIfExists("/d/missing", out) || ns.statIfExists("/nothere/f", out)
                        || ns.openIfExists("/d/missing", Namespace.O_RDWR) != null) {
                    throw new AssertionError("wrong answer in round " + i);
                }
            }
            long perProbe = (allocatedBytes() - before) / (4L * rounds);
            if (warm == 1) {
                assertTrue(perProbe < 8, perProbe + " bytes allocated per probe");
            }
        }
    }
}
