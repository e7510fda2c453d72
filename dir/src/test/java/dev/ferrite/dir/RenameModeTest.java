package dev.ferrite.dir;

import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.NamespaceTest.assertErrno;
import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertChecked;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RenameMode#NO_REPLACE} and {@link RenameMode#EXCHANGE} one at a time: what moves, the parents' link
 * counts and {@code ..}, the errors, and the same tree after the volume is closed and opened again. Their
 * errno order against the host's {@code renameat2} is {@link PosixDifferentialTest}'s; atomicity across a
 * crash is {@link NamespaceCrashTest}'s.
 */
class RenameModeTest {

    @Test
    void exchangeMovesADirectoryAndAFileAcrossParents() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            long p, q, d, f;
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                p = ns.mkdir("/p", 0755);
                q = ns.mkdir("/q", 0755);
                d = ns.mkdir("/p/d", 0755);
                ns.create("/p/d/inside", 0644, true);
                f = ns.create("/q/f", 0644, true);
                long ctime = ns.stat("/q/f").ctimeNanos();
                ns.rename("/p/d", "/q/f", RenameMode.EXCHANGE);
                assertTrue(ctime < ns.stat("/p/d").ctimeNanos(), "the moved file's ctime");
                assertExchanged(ns, p, q, d, f);
                assertChecked(ns);
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                assertExchanged(v.namespace(), p, q, d, f);
                assertChecked(v.namespace());
            }
        }
    }

    private static void assertExchanged(Namespace ns, long p, long q, long d, long f) {
        assertEquals(f, ns.lookup("/p/d"));
        assertEquals(d, ns.lookup("/q/f"));
        assertEquals(q, ns.lookup("/q/f/.."), "the directory's parent link");
        assertTrue(ns.stat("/q/f/inside").isRegularFile(), "the directory's entry came with it");
        assertEquals(2, ns.stat("/p").nlink(), "/p lost the directory");
        assertEquals(3, ns.stat("/q").nlink(), "/q gained the directory");
        assertTrue(ns.stat("/p/d").isRegularFile());
    }

    @Test
    void exchangeOfTwoDirectoriesSwapsTheirParents() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            long p = ns.mkdir("/p", 0755), q = ns.mkdir("/q", 0755);
            long a = ns.mkdir("/p/a", 0755), b = ns.mkdir("/q/b", 0755);
            ns.mkdir("/q/b/c", 0755);
            ns.rename("/p/a", "/q/b", RenameMode.EXCHANGE);
            assertEquals(b, ns.lookup("/p/a"));
            assertEquals(a, ns.lookup("/q/b"));
            assertEquals(p, ns.lookup("/p/a/.."));
            assertEquals(q, ns.lookup("/q/b/.."));
            assertEquals(3, ns.stat("/p/a").nlink());
            assertEquals(3, ns.stat("/p").nlink());
            assertEquals(3, ns.stat("/q").nlink());
            try (Handle hp = ns.open("/p"); Handle hq = ns.open("/q")) { // and back, by handle
                ns.rename(hq, "b", hp, "a", RenameMode.EXCHANGE);
            }
            assertEquals(a, ns.lookup("/p/a"));
            assertEquals(p, ns.lookup("/p/a/.."));
            assertEquals(q, ns.lookup("/q/b/c/../.."));
            assertChecked(ns);
        }
    }

    @Test
    void exchangeInOneDirectoryAndOfTwoNamesOfOneFile() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            long f = ns.create("/f", 0644, true);
            ns.symlink("f", "/s");
            long d = ns.mkdir("/d", 0755);
            ns.rename("/f", "/s", RenameMode.EXCHANGE);
            assertTrue(ns.lstat("/f").isSymlink());
            assertEquals(f, ns.lookup("/s"));
            ns.rename("/s", "/d/", RenameMode.EXCHANGE); // a file and a directory: no ENOTDIR or EISDIR in an exchange
            assertEquals(d, ns.lookup("/s"));
            assertEquals(f, ns.lookup("/d"));
            assertEquals(3, ns.stat("/").nlink());
            ns.link("/d", "/h");
            ns.rename("/d", "/h", RenameMode.EXCHANGE); // one inode: nothing to do
            assertEquals(2, ns.stat("/h").nlink());
            assertChecked(ns);
        }
    }

    @Test
    void noReplaceRenamesOnlyToANewName() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            long f = ns.create("/f", 0644, true);
            ns.create("/g", 0644, true);
            ns.mkdir("/d", 0755);
            ns.link("/f", "/f2");
            assertErrno(Errno.EEXIST, () -> ns.rename("/f", "/g", RenameMode.NO_REPLACE));
            assertErrno(Errno.EEXIST, () -> ns.rename("/f", "/f2", RenameMode.NO_REPLACE)); // even to another name of itself
            assertErrno(Errno.EEXIST, () -> ns.rename("/d", "/d/..", RenameMode.NO_REPLACE)); // EBUSY without the flag
            assertErrno(Errno.EBUSY, () -> ns.rename("/d", "/d/..", RenameMode.REPLACE));
            assertErrno(Errno.EEXIST, () -> ns.rename("/f/", "/g", RenameMode.NO_REPLACE)); // before the trailing slash's ENOTDIR
            assertErrno(Errno.ENOENT, () -> ns.rename("/missing", "/g", RenameMode.NO_REPLACE));
            ns.rename("/f", "/d/f", RenameMode.NO_REPLACE);
            assertEquals(f, ns.lookup("/d/f"));
            assertEquals(2, ns.stat("/d/f").nlink());
            assertChecked(ns);
        }
    }

    @Test
    void exchangeErrors() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/a", 0755);
            ns.mkdir("/a/b", 0755);
            ns.create("/f", 0644, true);
            assertErrno(Errno.ENOENT, () -> ns.rename("/f", "/missing", RenameMode.EXCHANGE));
            assertErrno(Errno.ENOENT, () -> ns.rename("/missing", "/f", RenameMode.EXCHANGE));
            assertErrno(Errno.EINVAL, () -> ns.rename("/a", "/a/b", RenameMode.EXCHANGE)); // into itself
            assertErrno(Errno.EINVAL, () -> ns.rename("/a/b", "/a", RenameMode.EXCHANGE)); // ENOTEMPTY without the flag
            assertErrno(Errno.ENOTEMPTY, () -> ns.rename("/a/b", "/a", RenameMode.REPLACE));
            assertErrno(Errno.ENOTDIR, () -> ns.rename("/a", "/f/", RenameMode.EXCHANGE));
            assertErrno(Errno.ENOTDIR, () -> ns.rename("/f/", "/a", RenameMode.EXCHANGE));
            assertErrno(Errno.EBUSY, () -> ns.rename("/a", "/a/b/..", RenameMode.EXCHANGE));
            assertTrue(ns.stat("/a/b").isDirectory());
            assertEquals(3, ns.stat("/a").nlink());
            assertChecked(ns);
        }
    }
}
