package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertChecked;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Directory operations one at a time: entries inline and in trees, errors, link counts, orphans. */
class NamespaceTest {

    static void assertErrno(int errno, org.junit.jupiter.api.function.Executable op) {
        NamespaceException e = assertThrows(NamespaceException.class, op);
        assertEquals(errno, e.errno(), e.getMessage());
    }

    private static Set<String> names(Namespace ns, String dir) {
        Set<String> out = new HashSet<>();
        for (DirEntry e : ns.list(dir)) {
            assertTrue(out.add(e.name()), "duplicate " + e.name());
        }
        return out;
    }

    @Test
    void createLookupStatUnlinkAndLinkCounts() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            long a = ns.mkdir("/a", 0755);
            long f = ns.create("/a/f", 0644, true);
            assertEquals(f, ns.lookup("/a/f"));
            assertEquals(f, ns.create("/a/f", 0644, false));
            assertTrue(ns.stat("/a").isDirectory());
            assertEquals(3, ns.stat("/").nlink());
            assertEquals(2, ns.stat("/a").nlink());
            ns.mkdir("/a/b", 0700);
            assertEquals(3, ns.stat("/a").nlink());
            assertEquals(a, ns.lookup("/a/b/.."));
            ns.link("/a/f", "/g");
            assertEquals(2, ns.stat("/g").nlink());
            ns.symlink("a/f", "/s");
            assertEquals("a/f", ns.readlink("/s"));
            assertEquals(f, ns.lookup("/s"));
            assertTrue(ns.lstat("/s").isSymlink());
            assertEquals(Set.of("a", "g", "s"), names(ns, "/"));
            ns.setattr("/a/f", 0600, 5, 6, 1000, 2000);
            InodeStat s = ns.stat("/g");
            assertEquals(0600 | InodeStat.S_IFREG, s.mode());
            assertEquals(5, s.uid());
            assertEquals(2000, s.mtimeNanos());
            ns.unlink("/a/f");
            assertEquals(1, ns.stat("/g").nlink());
            ns.rmdir("/a/b");
            assertEquals(2, ns.stat("/a").nlink());
            ns.rename("/g", "/a/h");
            assertEquals(f, ns.lookup("/a/h"));
            assertChecked(ns);
            long inodesUsed = v.statfs().inodes() - v.statfs().freeInodes();
            ns.unlink("/a/h");
            ns.unlink("/s");
            ns.rmdir("/a");
            assertEquals(inodesUsed - 3, v.statfs().inodes() - v.statfs().freeInodes());
            assertTrue(ns.list("/").isEmpty());
            assertChecked(ns);
        }
    }

    @Test
    void inlineDirectoryBecomesATreeAtTheBoundaryAndEntriesSurviveRemount() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            List<String> all = new ArrayList<>();
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                int cap = InodeFormat.inlineCapacity(4096);
                int used = 0;
                for (int i = 0; ; i++) {
                    String name = "entry-" + i;
                    int size = DirEntryFormat.inlineSize(DirEntryFormat.HASH + name.length());
                    boolean fits = used + size <= cap;
                    ns.create("/d/" + name, 0644, true);
                    all.add(name);
                    InodeStat st = ns.stat("/d");
                    assertEquals(fits ? 0 : 2 + DirContents.LEAF.fill(), st.blocks(), "after " + name + " (" + used + " of " + cap + " bytes used)");
                    if (!fits) {
                        break;
                    }
                    used += size;
                }
                assertEquals(new HashSet<>(all), names(ns, "/d"));
                for (int i = 0; i < 2000; i++) {
                    ns.create("/d/more-" + i, 0644, true);
                    all.add("more-" + i);
                }
                assertChecked(ns);
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                assertEquals(new HashSet<>(all), names(ns, "/d"));
                assertEquals(all.size(), ns.stat("/d").size());
                for (String n : all) {
                    ns.unlink("/d/" + n);
                }
                assertTrue(ns.list("/d").isEmpty());
                assertChecked(ns);
                long free = v.statfs().freeBlocks();
                ns.rmdir("/d");
                assertTrue(v.statfs().freeBlocks() > free, "the directory's blocks are freed");
                assertChecked(ns);
            }
        }
    }

    @Test
    void readdirPagesResumeFromTheirCookies() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            Set<String> expected = new HashSet<>();
            for (int i = 0; i < 500; i++) {
                ns.create("/d/f" + i, 0644, true);
                expected.add("f" + i);
            }
            Set<String> seen = new HashSet<>();
            DirCookie c = DirCookie.START;
            int pages = 0;
            for (;;) {
                DirPage p = ns.readdir("/d", DirCookie.fromBytes(c.toBytes()), 7);
                pages++;
                for (DirEntry e : p.entries()) {
                    assertTrue(seen.add(e.name()), "returned twice: " + e.name());
                }
                if (p.end()) {
                    break;
                }
                assertEquals(7, p.entries().size());
                c = p.next();
            }
            assertEquals(expected, seen);
            assertEquals(72, pages);
        }
    }

    @Test
    void aDirBufferListsWhatPagesListAndResumesWhereItStopped() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/small", 0755);
            ns.mkdir("/big", 0755);
            ns.mkdir("/small/sub", 0755);
            ns.create("/small/\u00e9t\u00e9", 0644, true); // a name of multibyte characters
            for (int i = 0; i < 500; i++) {
                ns.create("/big/f" + i, 0644, true);
            }
            for (String dir : List.of("/small", "/big")) {
                List<DirEntry> pages = ns.list(dir);
                DirBuffer b = new DirBuffer(7);
                byte[] name = new byte[255];
                for (int pass = 0; pass < 2; pass++) { // the second after a rewind: from the start again
                    b.rewind();
                    List<DirEntry> listed = new ArrayList<>();
                    int fills = 0;
                    do {
                        int n = ns.readdir(dir, b);
                        fills++;
                        assertEquals(b.size(), n);
                        assertTrue(n == 7 || b.end(), "only the last fill is short");
                        for (int i = 0; i < n; i++) {
                            int length = b.copyName(i, name);
                            assertEquals(b.name(i), new String(name, 0, length, java.nio.charset.StandardCharsets.UTF_8));
                            listed.add(new DirEntry(b.name(i), b.ino(i), b.type(i)));
                        }
                    } while (!b.end());
                    assertEquals(pages, listed, dir);
                    assertEquals(Math.max(1, (pages.size() + 6) / 7), fills, dir);
                }
                assertEquals(0, ns.readdir(dir, b), "a buffer at the end stays there");
                assertTrue(b.end());
            }
            // entries there throughout come once each, whatever is created and removed between fills
            DirBuffer b = new DirBuffer(50);
            Set<String> seen = new HashSet<>();
            int made = 0;
            do {
                ns.readdir("/big", b);
                for (int i = 0; i < b.size(); i++) {
                    String n = b.name(i);
                    assertTrue(seen.add(n) || !n.startsWith("f"), "returned twice: " + n);
                }
                ns.create("/big/g" + made, 0644, true);
                ns.unlink("/big/f" + (499 - made++));
            } while (!b.end());
            for (int i = 0; i < 500 - made; i++) {
                assertTrue(seen.contains("f" + i), "missed f" + i);
            }
            assertThrows(IllegalArgumentException.class, () -> new DirBuffer(0));
            NamespaceException e = assertThrows(NamespaceException.class, () -> ns.readdir("/big/f0", new DirBuffer(1)));
            assertEquals(Errno.ENOTDIR, e.errno());
            Handle h = ns.open("/small", Namespace.O_RDONLY);
            assertEquals(2, ns.readdir(h, new DirBuffer(8)));
            h.close();
            assertEquals(Errno.EBADF, assertThrows(NamespaceException.class, () -> ns.readdir(h, new DirBuffer(8))).errno());
            assertChecked(ns);
        }
    }

    @Test
    void longSymlinkTargetsLiveInABlockOfTheirOwn() {
        int max = Math.min(Namespace.MAX_SYMLINK_TARGET, SymlinkFormat.capacity(4096));
        String inline = "i".repeat(InodeFormat.inlineCapacity(4096));
        String longest = "/d/" + "./".repeat((max - 4) / 2) + "f".repeat(max - 4 - 2 * ((max - 4) / 2)) + "f";
        assertEquals(max, longest.length());
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            long blockOfLongest;
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                long f = ns.create("/d/f", 0644, true);
                ns.symlink(inline, "/in");
                assertEquals(0, ns.lstat("/in").blocks(), "a target that fits the record stays inline");
                VolumeStats before = v.statfs();
                ns.symlink(longest, "/long");
                assertEquals(before.freeBlocks() - 1, v.statfs().freeBlocks(), "one block for the target");
                InodeStat st = ns.lstat("/long");
                assertEquals(max, st.size());
                assertEquals(1, st.blocks());
                assertEquals(longest, ns.readlink("/long"));
                assertEquals(f, ns.lookup("/long"), "resolution follows a long target");
                VolumeStats full = v.statfs();
                assertErrno(Errno.ENAMETOOLONG, () -> ns.symlink(longest + "x", "/toolong"));
                assertEquals(full, v.statfs(), "refused with nothing changed");
                assertErrno(Errno.ENOENT, () -> ns.lstat("/toolong"));
                ns.symlink("x".repeat(InodeFormat.inlineCapacity(4096) + 1), "/d/gone");
                ns.unlink("/d/gone");
                assertEquals(full, v.statfs(), "unlink frees the block and the inode");
                long ino = ns.lstat("/long").ino();
                MemorySegment blk = java.lang.foreign.Arena.ofAuto().allocate(4096, 4096);
                v.quiesce(); // the record is home
                dev.read(v.geometry().inodeBlock(ino), blk);
                blockOfLongest = InodeFormat.remoteBlock(blk, InodeFormat.recordOffset(4096, Geometry.inodeSlot(ino)));
                assertChecked(ns);
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                assertEquals(longest, ns.readlink("/long"), "after remount");
                assertTrue(VolumeDump.block(dev, blockOfLongest).contains(longest), VolumeDump.block(dev, blockOfLongest));
                ns.rename("/in", "/long"); // replacing the long link frees its block
                assertEquals(inline, ns.readlink("/long"));
                assertChecked(ns);
                ns.symlink(longest, "/damaged");
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                long ino = v.namespace().lstat("/damaged").ino();
                MemorySegment blk = java.lang.foreign.Arena.ofAuto().allocate(4096, 4096);
                dev.read(v.geometry().inodeBlock(ino), blk);
                long target = InodeFormat.remoteBlock(blk, InodeFormat.recordOffset(4096, Geometry.inodeSlot(ino)));
                dev.read(target, blk);
                blk.set(java.lang.foreign.ValueLayout.JAVA_BYTE, SymlinkFormat.TARGET + 7, (byte) 'Z');
                dev.write(target, blk); // behind the volume's back: the cache does not hold the block yet
                Namespace ns = v.namespace();
                CorruptionException e = assertThrows(CorruptionException.class, () -> ns.readlink("/damaged"));
                assertTrue(e.getMessage().contains("block " + target), e.getMessage());
                CheckReport report = ns.check();
                assertTrue(report.problems().stream().anyMatch(p -> p.kind() == CheckProblem.Kind.INODE
                        && p.inode().equals(java.util.OptionalLong.of(ino)) && p.detail().contains("symlink " + ino)), report.toString());
            }
        }
    }

    @Test
    void badInputIsRefusedPreciselyWithTheVolumeUnchanged() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            ns.create("/d/f", 0644, true);
            ns.mkdir("/d/e", 0755);
            ns.create("/d/e/x", 0644, true);
            ns.symlink("/loop2", "/loop1");
            ns.symlink("/loop1", "/loop2");
            VolumeStats before = v.statfs();
            List<DirEntry> rootBefore = ns.list("/");
            List<DirEntry> dBefore = ns.list("/d");
            assertErrno(Errno.EEXIST, () -> ns.create("/", 0644, true));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/d/.", 0755));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/d/..", 0755));
            assertErrno(Errno.EINVAL, () -> ns.create("relative", 0644, true));
            assertErrno(Errno.EINVAL, () -> ns.create("/d/a\0b", 0644, true));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.create("/d/" + "n".repeat(256), 0644, true));
            ns.create("/d/" + "n".repeat(255), 0644, true);
            ns.unlink("/d/" + "n".repeat(255));
            assertErrno(Errno.EINVAL, () -> ns.lookup("/.."));
            assertErrno(Errno.EINVAL, () -> ns.lookup("/d/../../x"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/d/nope"));
            assertErrno(Errno.ENOENT, () -> ns.create("/nope/f", 0644, true));
            assertErrno(Errno.ENOTDIR, () -> ns.create("/d/f/g", 0644, true));
            assertErrno(Errno.EEXIST, () -> ns.create("/d/f", 0644, true));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/d/f", 0755));
            assertErrno(Errno.EISDIR, () -> ns.create("/d/e", 0644, false));
            assertErrno(Errno.EISDIR, () -> ns.unlink("/d/e"));
            assertErrno(Errno.ENOTDIR, () -> ns.rmdir("/d/f"));
            assertErrno(Errno.ENOTEMPTY, () -> ns.rmdir("/d/e"));
            assertErrno(Errno.EINVAL, () -> ns.rename("/d", "/d/e/d"));
            assertErrno(Errno.EINVAL, () -> ns.rename("/d", "/d/d2"));
            assertErrno(Errno.ENOTDIR, () -> ns.rename("/d/e", "/d/f"));
            assertErrno(Errno.EISDIR, () -> ns.rename("/d/f", "/d/e"));
            assertErrno(Errno.EPERM, () -> ns.link("/d/e", "/d/e2"));
            assertErrno(Errno.ELOOP, () -> ns.lookup("/loop1"));
            assertErrno(Errno.ELOOP, () -> ns.create("/loop1/x", 0644, true));
            assertErrno(Errno.EINVAL, () -> ns.readlink("/d/f"));
            assertErrno(Errno.EBUSY, () -> ns.rmdir("/"));
            // a trailing slash names a directory, as on Linux
            assertErrno(Errno.EISDIR, () -> ns.create("/d/new/", 0644, true));
            assertErrno(Errno.EISDIR, () -> ns.create("/d/f/", 0644, false));
            assertErrno(Errno.EISDIR, () -> ns.create("/d/e/", 0644, false));
            assertErrno(Errno.ENOTDIR, () -> ns.unlink("/d/f/"));
            assertErrno(Errno.EISDIR, () -> ns.unlink("/d/e/"));
            assertErrno(Errno.ENOTDIR, () -> ns.rmdir("/d/f/"));
            assertErrno(Errno.ENOTDIR, () -> ns.rename("/d/f/", "/d/g"));
            assertErrno(Errno.ENOTDIR, () -> ns.rename("/d/f", "/d/g/"));
            assertErrno(Errno.ENOENT, () -> ns.symlink("/d/f", "/d/s/"));
            assertErrno(Errno.EEXIST, () -> ns.symlink("/d/f", "/d/f/"));
            assertErrno(Errno.ENOENT, () -> ns.link("/d/f", "/d/l/"));
            Handle h = ns.open("/d/f");
            h.close();
            assertErrno(Errno.EBADF, () -> ns.stat(h));
            assertErrno(Errno.EBADF, () -> ns.fsync(h));
            assertEquals(before, v.statfs());
            assertEquals(rootBefore, ns.list("/"));
            assertEquals(dBefore, ns.list("/d"));
            assertChecked(ns);
            // and where a directory is meant, the slash is fine
            ns.mkdir("/d/m/", 0755);
            ns.rename("/d/m/", "/d/m2/");
            assertTrue(ns.stat("/d/m2").isDirectory());
            ns.rmdir("/d/m2/");
            assertEquals(dBefore, ns.list("/d"));
        }
    }

    /** The shapes the Linux answers below were read from: each errno was checked on ext4 and tmpfs. */
    private static Namespace linuxShapes(Volume v) {
        Namespace ns = v.namespace();
        ns.mkdir("/d", 0755);
        ns.mkdir("/d/e", 0755);
        ns.create("/d/e/x", 0644, true);
        ns.create("/f", 0644, true);
        ns.symlink("d", "/ld");
        ns.symlink("f", "/lf");
        ns.symlink("nope", "/dang");
        ns.symlink("loop", "/loop");
        ns.symlink("miss/x", "/dang2");
        ns.symlink("f/x", "/dangf");
        ns.symlink("d/", "/ldslash");
        ns.symlink("nope/", "/dangslash");
        ns.symlink(".", "/d/dot");
        return ns;
    }

    private static final String LONG = "n".repeat(256);

    @Test
    void aTrailingSlashOrDotAfterANonDirectoryIsNotADirectory() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = linuxShapes(v);
            long d = ns.lookup("/d");
            assertErrno(Errno.ENOTDIR, () -> ns.lstat("/f/"));
            assertErrno(Errno.ENOTDIR, () -> ns.lstat("/f/."));
            assertErrno(Errno.ENOTDIR, () -> ns.lstat("/f/.."));
            assertErrno(Errno.ENOTDIR, () -> ns.stat("/f/"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/d/e/x/"));
            assertErrno(Errno.ENOTDIR, () -> ns.readlink("/f/"));
            assertErrno(Errno.ENOTDIR, () -> ns.readlink("/lf/"));
            assertErrno(Errno.EINVAL, () -> ns.readlink("/ld/"));
            assertErrno(Errno.ENOENT, () -> ns.readlink("/dang/"));
            assertErrno(Errno.ENOTDIR, () -> ns.link("/f/", "/g"));
            assertErrno(Errno.ENOENT, () -> ns.lstat("/g"));
            assertErrno(Errno.EPERM, () -> ns.link("/ld/", "/g"));
            // a "." or a trailing slash after a symlink follows it
            assertEquals(d, ns.lstat("/ld/.").ino());
            assertEquals(d, ns.lstat("/ld/").ino());
            assertTrue(ns.lstat("/ldslash").isSymlink());
            assertEquals(d, ns.stat("/ldslash").ino());
            assertErrno(Errno.ENOTDIR, () -> ns.lstat("/lf/"));
            assertErrno(Errno.ENOENT, () -> ns.lstat("/dang/"));
            assertErrno(Errno.ELOOP, () -> ns.lstat("/loop/"));
            assertTrue(ns.lstat("/loop").isSymlink());
            // unlink and rename look at the entry itself, not where a symlink leads
            assertErrno(Errno.ENOTDIR, () -> ns.unlink("/ld/"));
            assertErrno(Errno.ENOTDIR, () -> ns.unlink("/dang/"));
            assertErrno(Errno.ENOENT, () -> ns.unlink("/new/"));
            assertErrno(Errno.ENOTDIR, () -> ns.rmdir("/ld/"));
            assertErrno(Errno.ENOTDIR, () -> ns.rename("/ld/", "/z"));
            assertErrno(Errno.ENOENT, () -> ns.rename("/f/", "/miss/x"));
            assertErrno(Errno.EEXIST, () -> ns.link("/f", "/dang/"));
            assertErrno(Errno.EEXIST, () -> ns.symlink("x", "/dang/"));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/dang/", 0755));
            assertErrno(Errno.ENOTDIR, () -> ns.mkdir("/f/./x", 0755));
            assertChecked(ns);
        }
    }

    @Test
    void createFollowsAFinalSymlinkAsOpenWithOCreatDoes() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = linuxShapes(v);
            for (String p : List.of("/ld", "/lf", "/dang", "/dang2", "/dangf", "/ldslash", "/dangslash", "/loop", "/d/dot")) {
                assertErrno(Errno.EEXIST, () -> ns.create(p, 0644, true));
            }
            assertErrno(Errno.EISDIR, () -> ns.create("/ld", 0644, false));
            assertErrno(Errno.EISDIR, () -> ns.create("/ldslash", 0644, false));
            assertErrno(Errno.EISDIR, () -> ns.create("/dangslash", 0644, false));
            assertErrno(Errno.EISDIR, () -> ns.create("/d/dot", 0644, false));
            assertErrno(Errno.ENOENT, () -> ns.create("/dang2", 0644, false));
            assertErrno(Errno.ENOTDIR, () -> ns.create("/dangf", 0644, false));
            assertErrno(Errno.ELOOP, () -> ns.create("/loop", 0644, false));
            assertEquals(ns.lookup("/f"), ns.create("/lf", 0644, false));
            long made = ns.create("/dang", 0644, false);
            assertEquals(made, ns.lookup("/nope"));
            assertTrue(ns.lstat("/nope").isRegularFile());
            assertEquals(made, ns.create("/dang", 0644, false));
            // symlinks count over the whole call: 30 to find the directory, then 10 or 11 at the end
            for (int i = 0; i < 30; i++) {
                ns.symlink(i < 29 ? "s" + (i + 1) : "d", "/s" + i);
            }
            for (int i = 0; i < 11; i++) {
                ns.symlink(i < 10 ? "x" + (i + 1) : "t", "/d/x" + i);
            }
            assertErrno(Errno.ELOOP, () -> ns.create("/s0/x0", 0644, false));
            assertEquals(ns.create("/s0/x1", 0644, false), ns.lookup("/d/t"));
            try (Handle root = ns.openRoot()) {
                ns.symlink(root, "dang3", "d/made");
                try (Handle h = ns.create(root, "dang3", 0644, false)) {
                    assertEquals(ns.lookup("/d/made"), ns.stat(h).ino());
                }
                assertErrno(Errno.EISDIR, () -> ns.create(root, "ld", 0644, false));
            }
            assertChecked(ns);
        }
    }

    @Test
    void dotAndDotDotAsTheLastComponentGetLinuxsAnswers() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = linuxShapes(v);
            List<DirEntry> before = ns.list("/d");
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/d/.", 0755));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/d/..", 0755));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/", 0755));
            assertErrno(Errno.ENOENT, () -> ns.mkdir("/new/.", 0755));
            assertErrno(Errno.EEXIST, () -> ns.create("/d/.", 0644, true));
            assertErrno(Errno.EISDIR, () -> ns.create("/d/..", 0644, false));
            assertErrno(Errno.EEXIST, () -> ns.create("/", 0644, true));
            assertErrno(Errno.EISDIR, () -> ns.create("/", 0644, false));
            assertErrno(Errno.EEXIST, () -> ns.symlink("x", "/d/."));
            assertErrno(Errno.EEXIST, () -> ns.symlink("x", "/"));
            assertErrno(Errno.EEXIST, () -> ns.link("/f", "/d/.."));
            assertErrno(Errno.EISDIR, () -> ns.unlink("/d/."));
            assertErrno(Errno.EISDIR, () -> ns.unlink("/"));
            assertErrno(Errno.EINVAL, () -> ns.rmdir("/d/."));
            assertErrno(Errno.ENOTEMPTY, () -> ns.rmdir("/d/e/.."));
            assertErrno(Errno.ENOTDIR, () -> ns.rmdir("/d/e/x/.."));
            assertErrno(Errno.EBUSY, () -> ns.rmdir("/"));
            assertErrno(Errno.EBUSY, () -> ns.rename("/d/.", "/z"));
            assertErrno(Errno.EBUSY, () -> ns.rename("/f", "/d/.."));
            assertErrno(Errno.EBUSY, () -> ns.rename("/nope", "/d/."));
            assertErrno(Errno.EBUSY, () -> ns.rename("/f", "/"));
            assertErrno(Errno.ENOENT, () -> ns.rename("/d/.", "/miss/x"));
            assertEquals(before, ns.list("/d"));
            assertChecked(ns);
        }
    }

    @Test
    void handleFormsTakeDotAndDotDotAsTheAtCallsDo() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = linuxShapes(v);
            long dIno = ns.lookup("/d");
            try (Handle root = ns.openRoot(); Handle d = ns.open("/d"); Handle f = ns.open("/f")) {
                assertEquals(dIno, ns.lstat(d, ".").ino());
                assertEquals(ns.root(), ns.lstat(d, "..").ino());
                try (Handle up = ns.open(d, ".."); Handle self = ns.open(d, ".")) {
                    assertEquals(ns.root(), ns.stat(up).ino());
                    assertEquals(dIno, ns.stat(self).ino());
                }
                assertErrno(Errno.EINVAL, () -> ns.lstat(root, "..")); // documented: no '..' above the root
                assertErrno(Errno.EINVAL, () -> ns.lstat(d, "e/x")); // documented: a name, not a path
                assertErrno(Errno.EINVAL, () -> ns.create(d, null, 0644, false));
                assertErrno(Errno.EINVAL, () -> ns.rename(d, null, d, "z"));
                assertErrno(Errno.ENOTDIR, () -> ns.lstat(f, "."));
                assertErrno(Errno.ENOTDIR, () -> ns.lstat(f, LONG));
                assertErrno(Errno.ENAMETOOLONG, () -> ns.lstat(d, LONG));
                for (String dot : List.of(".", "..")) {
                    assertErrno(Errno.EEXIST, () -> ns.mkdir(d, dot, 0755));
                    assertErrno(Errno.EEXIST, () -> ns.create(d, dot, 0644, true));
                    assertErrno(Errno.EISDIR, () -> ns.create(d, dot, 0644, false));
                    assertErrno(Errno.EEXIST, () -> ns.symlink(d, dot, "x"));
                    assertErrno(Errno.EEXIST, () -> ns.link(f, d, dot));
                    assertErrno(Errno.EISDIR, () -> ns.unlink(d, dot));
                    assertErrno(Errno.EBUSY, () -> ns.rename(d, dot, d, "z"));
                    assertErrno(Errno.EBUSY, () -> ns.rename(d, "e", d, dot));
                    assertErrno(Errno.EBUSY, () -> ns.rename(d, "nope", d, dot));
                    assertErrno(Errno.ENOTDIR, () -> ns.mkdir(f, dot, 0755));
                }
                assertErrno(Errno.EINVAL, () -> ns.rmdir(d, "."));
                assertErrno(Errno.ENOTEMPTY, () -> ns.rmdir(d, ".."));
                assertErrno(Errno.ENOTDIR, () -> ns.mkdir(f, LONG, 0755));
                assertErrno(Errno.ENOTDIR, () -> ns.create(f, LONG, 0644, true));
                assertErrno(Errno.ENOTDIR, () -> ns.rmdir(f, LONG));
                assertErrno(Errno.ENAMETOOLONG, () -> ns.mkdir(d, LONG, 0755));
                assertErrno(Errno.ENOENT, () -> ns.rename(d, "nope", d, LONG));
                assertErrno(Errno.ENAMETOOLONG, () -> ns.rename(d, LONG, d, "nope"));
            }
            ns.mkdir("/gone", 0755);
            try (Handle gone = ns.open("/gone")) {
                ns.rmdir("/gone");
                assertErrno(Errno.ENOENT, () -> ns.lstat(gone, ".")); // documented: Linux still answers
                assertErrno(Errno.ENOENT, () -> ns.mkdir(gone, "x", 0755));
            }
            assertChecked(ns);
        }
    }

    @Test
    void aTrailingSlashOnCreateIsADirectoryOnceTheParentIsThere() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = linuxShapes(v);
            for (boolean exclusive : new boolean[] {true, false}) {
                assertErrno(Errno.EISDIR, () -> ns.create("/f/", 0644, exclusive));
                assertErrno(Errno.ENOENT, () -> ns.create("/missing/x/", 0644, exclusive));
                assertErrno(Errno.EISDIR, () -> ns.create("/d/new/", 0644, exclusive));
                assertErrno(Errno.EISDIR, () -> ns.create("/d/e/", 0644, exclusive));
                assertErrno(Errno.EISDIR, () -> ns.create("/d/" + LONG + "/", 0644, exclusive));
                assertErrno(Errno.EISDIR, () -> ns.create("/ld/", 0644, exclusive));
            }
            // the shape that answered ELOOP: the slash is answered before the looping symlink is looked at
            ns.mkdir("/b", 0755);
            ns.mkdir("/b/b", 0755);
            ns.symlink("c", "/b/b/c");
            assertErrno(Errno.EISDIR, () -> ns.create("/b/b/c/", 0644, false));
            assertErrno(Errno.ELOOP, () -> ns.create("/b/b/c", 0644, false));
            assertErrno(Errno.ENOENT, () -> ns.lstat("/d/new"));
            assertChecked(ns);
        }
    }

    @Test
    void aNameTooLongIsMeasuredWhenTheWalkReachesIt() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = linuxShapes(v);
            assertErrno(Errno.ENOENT, () -> ns.mkdir("/miss/" + LONG, 0755));
            assertErrno(Errno.ENOTDIR, () -> ns.mkdir("/f/" + LONG, 0755));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.mkdir("/d/" + LONG, 0755));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.mkdir("/d/" + LONG + "/x", 0755));
            assertErrno(Errno.ENOENT, () -> ns.create("/miss/" + LONG, 0644, true));
            assertErrno(Errno.ENOTDIR, () -> ns.create("/f/" + LONG, 0644, false));
            assertErrno(Errno.ENOENT, () -> ns.link("/f", "/miss/" + LONG));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.link("/f", "/d/" + LONG));
            assertErrno(Errno.ENOENT, () -> ns.symlink("x", "/miss/" + LONG));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lstat("/" + LONG + "/x"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lstat("/d/" + LONG + "/.."));
            assertErrno(Errno.ENOTDIR, () -> ns.lstat("/f/" + LONG));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.unlink("/d/" + LONG + "/"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.rmdir("/d/" + LONG));
            assertErrno(Errno.ENOENT, () -> ns.rename("/nope", "/" + LONG));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.rename("/" + LONG, "/nope"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.rename("/f/", "/" + LONG));
            // and a whole path is at most PATH_MAX less its NUL
            String p4095 = "/d" + "/.".repeat(2046) + "/";
            assertEquals(4095, p4095.length());
            assertEquals(ns.lookup("/d"), ns.lookup(p4095));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup(p4095 + "/"));
            assertChecked(ns);
        }
    }

    @Test
    void anUnlinkedOpenFileLivesUntilItsLastClose() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            long used = v.statfs().inodes() - v.statfs().freeInodes();
            Handle a = ns.open("/");
            Handle f = ns.create(a, "f", 0644, true);
            Handle again = ns.open(a, "f");
            ns.unlink("/f");
            assertErrno(Errno.ENOENT, () -> ns.lookup("/f"));
            assertEquals(0, ns.stat(f).nlink());
            assertEquals(List.of(f.ino()), v.group(v.geometry().agOfInode(f.ino())).orphanInodes());
            assertChecked(ns);
            f.close();
            assertEquals(0, ns.stat(again).nlink());
            again.close();
            assertEquals(used, v.statfs().inodes() - v.statfs().freeInodes());
            assertTrue(v.group(v.geometry().agOfInode(f.ino())).orphanInodes().isEmpty());
            a.close();
            assertChecked(ns);
        }
    }

    /**
     * Creates in a tree directory find an existing name through the insert itself (or, when the group
     * must make a new inode chunk, by a lookup first): either way the right errno, and nothing changed.
     */
    @Test
    void createsOverExistingNamesInATreeDirectoryChangeNothing() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            long t = ns.mkdir("/t", 0755);
            long sub = ns.mkdir("/t/d", 0755);
            ns.symlink("f0", "/t/s");
            AllocationGroup ag = v.group(v.geometry().agOfInode(t));
            long f0 = ns.create("/t/f0", 0644, true);
            int n = 1;
            while (n < 200 || ag.freeInodes() != 0) { // a tree by now, and the next create needs a new chunk
                ns.create("/t/f" + n++, 0644, true);
                assertTrue(n < 10_000, "group " + ag.agno + " never ran out of free inodes");
            }
            for (int round = 0; round < 2; round++) { // without, then with a listed free inode
                VolumeStats before = v.statfs();
                assertErrno(Errno.EEXIST, () -> ns.create("/t/f0", 0600, true));
                assertEquals(f0, ns.create("/t/f0", 0600, false));
                assertErrno(Errno.EISDIR, () -> ns.create("/t/d", 0600, false));
                assertErrno(Errno.EEXIST, () -> ns.create("/t/d", 0600, true));
                assertErrno(Errno.EEXIST, () -> ns.mkdir("/t/f0", 0755));
                assertErrno(Errno.EEXIST, () -> ns.symlink("x", "/t/f1"));
                assertEquals(f0, ns.create("/t/s", 0600, false), "a non-exclusive create follows the symlink");
                assertEquals(before, v.statfs());
                assertEquals(0644 | InodeStat.S_IFREG, ns.stat("/t/f0").mode());
                assertEquals(sub, ns.lookup("/t/d"));
                assertEquals(n + 2, ns.list("/t").size());
                if (round == 0) {
                    ns.create("/t/new", 0644, true); // makes a chunk: free inodes listed again
                    n++;
                    assertTrue(ag.freeInodes() > 0);
                }
            }
            assertChecked(ns);
        }
    }

    @Test
    void lstatThroughADirectoryHandle() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            long f = ns.create("/d/f", 0640, true);
            ns.symlink("f", "/d/s");
            ns.mkdir("/d/sub", 0700);
            Handle d = ns.open("/d");
            assertEquals(f, ns.lstat(d, "f").ino());
            assertEquals(0640 | InodeStat.S_IFREG, ns.lstat(d, "f").mode());
            assertTrue(ns.lstat(d, "s").isSymlink(), "a symlink is not followed");
            assertTrue(ns.lstat(d, "sub").isDirectory());
            assertErrno(Errno.ENOENT, () -> ns.lstat(d, "g"));
            assertErrno(Errno.EINVAL, () -> ns.lstat(d, "a/b"));
            assertErrno(Errno.EINVAL, () -> ns.lstat(d, ""));
            Handle file = ns.open("/d/f");
            assertErrno(Errno.ENOTDIR, () -> ns.lstat(file, "x"));
            file.close();
            d.close();
            assertErrno(Errno.EBADF, () -> ns.lstat(d, "f"));
        }
    }

    @Test
    void orphansLeftByACrashAreFreedAtMount() {
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            MemoryDevice crashed;
            long orphan;
            long usedBefore;
            Volume v = Volume.open(rec, OPTIONS);
            try {
                Namespace ns = v.namespace();
                usedBefore = v.statfs().inodes() - v.statfs().freeInodes();
                ns.mkdir("/big", 0755);
                for (int i = 0; i < 300; i++) {
                    ns.create("/big/" + i, 0644, true);
                }
                Handle dir = ns.open("/big");
                Handle file = ns.open("/big/7");
                for (int i = 0; i < 300; i++) {
                    ns.unlink("/big/" + i);
                }
                ns.rmdir("/big");
                orphan = dir.ino();
                ns.sync();
                crashed = rec.imageAt(rec.eventCount());
                dir.close();
                file.close();
            } finally {
                v.close();
            }
            try (crashed; Volume after = Volume.open(crashed, OPTIONS)) {
                assertFalse(after.mountReport().wasClean());
                assertTrue(after.group(after.geometry().agOfInode(orphan)).orphanInodes().isEmpty());
                assertEquals(usedBefore, after.statfs().inodes() - after.statfs().freeInodes());
                assertChecked(after.namespace());
            }
        }
    }

    @Test
    void renameReplacesAndMovesAtomically() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/a", 0755);
            ns.mkdir("/b", 0755);
            long x = ns.mkdir("/a/x", 0755);
            ns.mkdir("/b/y", 0755);
            ns.rename("/a/x", "/b/y");
            assertEquals(x, ns.lookup("/b/y"));
            assertEquals(2, ns.stat("/a").nlink());
            assertEquals(3, ns.stat("/b").nlink());
            assertEquals(ns.lookup("/b"), ns.lookup("/b/y/.."));
            long f = ns.create("/a/f", 0644, true);
            ns.create("/b/g", 0644, true);
            ns.rename("/a/f", "/b/g");
            assertEquals(f, ns.lookup("/b/g"));
            ns.link("/b/g", "/b/h");
            ns.rename("/b/g", "/b/h");
            assertEquals(Set.of("g", "h", "y"), names(ns, "/b"));
            assertArrayEquals(new Object[0], ns.list("/a").toArray());
            assertChecked(ns);
        }
    }

    /**
     * The create that would turn an inline directory into a tree, with no free inode and room for the
     * tree's blocks but then not for an inode chunk: refused before the conversion, not after it.
     */
    @Test
    void noInodeLeftIsRefusedBeforeTheDirectoryIsConverted() {
        onSmallVolume((v, ns) -> {
            ns.mkdir("/a", 0755);
            ns.mkdir("/b", 0755);
            String name = "x".repeat(180); // two such entries fit inline, a third does not
            ns.create("/b/1" + name, 0644, true);
            ns.create("/b/2" + name, 0644, true);
            for (int i = 0; v.statfs().freeInodes() > 0; i++) {
                ns.create("/a/f" + i, 0644, true);
            }
            // 120 free: a tree's 20 blocks fit (20 + 96 held back), a chunk after them does not (8 + 96)
            int hogged = (int) v.statfs().freeBlocks() - 120;
            long hog = VolumeAllocations.allocBlocks(v, 0, hogged);
            assertEquals(120, v.statfs().freeBlocks());
            VolumeStats before = v.statfs();
            List<DirEntry> entries = ns.list("/b");
            assertThrows(dev.ferrite.io.NoSpaceException.class, () -> ns.create("/b/3" + name, 0644, true));
            assertEquals(before, v.statfs(), "the refused create changed the volume");
            assertEquals(entries, ns.list("/b"));
            VolumeAllocations.freeBlocks(v, hog, hogged);
            assertChecked(ns);
            ns.create("/b/3" + name, 0644, true); // with room again, the conversion and the create go through
            assertEquals(3, ns.list("/b").size());
            assertChecked(ns);
        });
    }

    @Test
    void exhaustionIsNoSpaceWithTheVolumeUnchanged() {
        onSmallVolume((v, ns) -> {
            int hogged = (int) v.statfs().freeBlocks() - 400; // leaves room for a few inode chunks and directory blocks
            long hog = VolumeAllocations.allocBlocks(v, 0, hogged);
            List<String> made = new ArrayList<>();
            String failed = null;
            for (int i = 0; failed == null; i++) {
                String p = "/d" + i % 4 + "/f" + i;
                try {
                    if (i < 4) {
                        ns.mkdir("/d" + i, 0755);
                    }
                    ns.create(p, 0644, true);
                    made.add(p);
                } catch (dev.ferrite.io.NoSpaceException e) {
                    failed = p;
                }
            }
            assertTrue(made.size() > 100, "created " + made.size());
            assertErrno(Errno.ENOENT, () -> ns.lookup("/d0/none"));
            VolumeStats full = v.statfs();
            List<DirEntry> before = ns.list("/d1");
            String again = failed;
            assertThrows(dev.ferrite.io.NoSpaceException.class, () -> ns.create(again, 0644, true));
            assertThrows(dev.ferrite.io.NoSpaceException.class, () -> ns.mkdir("/d1/sub", 0755));
            assertEquals(full, v.statfs());
            assertEquals(before, ns.list("/d1"));
            assertErrno(Errno.ENOENT, () -> ns.lookup(again));
            VolumeAllocations.freeBlocks(v, hog, hogged);
            assertChecked(ns);
            for (int i = 0; i < 10; i++) {
                ns.unlink(made.get(made.size() - 1 - i));
            }
            ns.create(failed, 0644, true);
            assertChecked(ns);
        });
    }

    /** Runs {@code body} on a fresh one-group volume of 2048 blocks with a small cache. */
    @Test
    void filesSpillToTheNextGroupOnceTheirParentsIsFullAndComeBackWhenItHasRoom() {
        try (MemoryDevice dev = MemoryDevice.create(4096, 4096)) {
            VolumeOptions options = VolumeOptions.defaults().withAgCount(2).withCacheBytes(8L << 20);
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                int home = v.geometry().agOfInode(ns.lookup("/d"));
                AllocationGroup g = v.group(home);
                int hogged = (int) g.freeBlockCount() - 150; // room for a few chunks and the directory's blocks
                long hog = VolumeAllocations.allocBlocks(v, home, hogged);
                assertEquals(home, v.geometry().agOfBlock(hog));
                int i = 0;
                while (v.geometry().agOfInode(ns.create("/d/f" + i, 0644, true)) == home) {
                    i++;
                }
                assertTrue(i > 64, "created " + i + " files in the parent's group");
                assertFalse(g.mayAddChunk(), "the parent's group is known to have no room for a chunk");
                for (int k = 0; k < 100; k++) {
                    assertTrue(v.geometry().agOfInode(ns.create("/d/g" + k, 0644, true)) != home, "spilled file " + k);
                }
                VolumeAllocations.freeBlocks(v, hog, hogged);
                assertTrue(g.mayAddChunk(), "freed blocks make room again");
                assertEquals(home, v.geometry().agOfInode(ns.create("/d/back", 0644, true)), "files go to their parent's group again");
                assertChecked(ns);
            }
        }
    }

    private static void onSmallVolume(java.util.function.BiConsumer<Volume, Namespace> body) {
        try (MemoryDevice dev = MemoryDevice.create(2048, 4096)) {
            VolumeOptions options = VolumeOptions.defaults().withAgCount(1).withCacheBytes(8L << 20);
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                body.accept(v, v.namespace());
            }
        }
    }
}
