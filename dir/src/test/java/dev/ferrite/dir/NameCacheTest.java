package dev.ferrite.dir;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;

import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.NamespaceTest.assertErrno;
import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertChecked;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The path walks' name cache: what a walk caches, and that every change taking a name away leaves no
 * entry a later walk could meet (each test caches the names first, so that without the invalidation the
 * walk after the change would answer from the stale entry).
 */
class NameCacheTest {

    /** True if {@code cache} holds {@code name} in {@code dir}: a walk's look into it. */
    static boolean holds(NameCache cache, long dir, String name) {
        NameLookup l = NameLookup.current();
        l.name(name.getBytes(StandardCharsets.UTF_8));
        return cache.get(dir, l);
    }

    /** Runs {@code body} on a fresh volume. */
    private static void withVolume(VolumeOptions options, java.util.function.Consumer<Namespace> body) {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, options)) {
            body.accept(v.namespace());
            assertChecked(v.namespace());
        }
    }

    @Test
    void aWalkCachesEachNameOnItsWayAndHitsThemAfter() {
        withVolume(OPTIONS, ns -> {
            long a = ns.mkdir("/a", 0755);
            long b = ns.mkdir("/a/b", 0755);
            long f = ns.create("/a/b/f", 0644, true);
            assertFalse(holds(ns.names, b, "f"), "a create caches nothing");
            assertEquals(f, ns.lookup("/a/b/f"));
            assertTrue(holds(ns.names, ns.root(), "a"));
            assertTrue(holds(ns.names, a, "b"));
            assertTrue(holds(ns.names, b, "f"));
            assertEquals(f, ns.lookup("/a/b/f"));
            assertEquals(f, ns.lookup("/a/./b/../b/f"));
            try (Handle dir = ns.open("/a/b")) {
                assertEquals(f, ns.lstat(dir, "f").ino());
            }
            assertFalse(holds(ns.names, b, "g"), "no negative entries");
        });
    }

    @Test
    void aNameLongerThanTheCacheTakesIsLookedUpEveryTime() {
        withVolume(OPTIONS, ns -> {
            String name = "n".repeat(NameCache.MAX_NAME + 1);
            long f = ns.create("/" + name, 0644, true);
            assertEquals(f, ns.lookup("/" + name));
            assertFalse(holds(ns.names, ns.root(), name));
            String fits = "m".repeat(NameCache.MAX_NAME);
            long g = ns.create("/" + fits, 0644, true);
            assertEquals(g, ns.lookup("/" + fits));
            assertTrue(holds(ns.names, ns.root(), fits));
            ns.unlink("/" + fits);
            assertErrno(Errno.ENOENT, () -> ns.lookup("/" + fits));
        });
    }

    @Test
    void unlinkByPathAndByHandleLeaveNoEntry() {
        withVolume(OPTIONS, ns -> {
            long a = ns.mkdir("/a", 0755);
            ns.create("/a/f", 0644, true);
            ns.create("/a/g", 0644, true);
            ns.lookup("/a/f");
            ns.lookup("/a/g");
            ns.unlink("/a/f");
            assertFalse(holds(ns.names, a, "f"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/f"));
            assertFalse(ns.statIfExists("/a/f", new StatBuffer()));
            try (Handle dir = ns.open("/a")) {
                ns.unlink(dir, "g");
                assertErrno(Errno.ENOENT, () -> ns.lstat(dir, "g"));
            }
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/g"));
        });
    }

    @Test
    void unlinkInATreeDirectoryBesideCreatesLeavesNoEntry() {
        withVolume(OPTIONS, ns -> {
            long d = ns.mkdir("/big", 0755);
            for (int i = 0; i < 300; i++) {
                ns.create("/big/f" + i, 0644, true); // a tree directory: unlinks take the shared way
            }
            for (int i = 0; i < 300; i++) {
                ns.lookup("/big/f" + i);
            }
            for (int i = 0; i < 300; i += 2) {
                ns.unlink("/big/f" + i);
            }
            for (int i = 0; i < 300; i++) {
                int n = i;
                if (i % 2 == 0) {
                    assertFalse(holds(ns.names, d, "f" + i));
                    assertErrno(Errno.ENOENT, () -> ns.lookup("/big/f" + n));
                } else {
                    ns.lookup("/big/f" + i);
                }
            }
        });
    }

    @Test
    void rmdirLeavesNoEntryAndAFileOfTheNameAnswersAsAFile() {
        withVolume(OPTIONS, ns -> {
            ns.mkdir("/a", 0755);
            ns.mkdir("/a/d", 0755);
            ns.lookup("/a/d/.");
            ns.rmdir("/a/d");
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/d"));
            long f = ns.create("/a/d", 0644, true);
            assertEquals(f, ns.lookup("/a/d"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/a/d/"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/a/d/x"));
            try (Handle dir = ns.open("/a")) {
                ns.unlink(dir, "d");
                ns.mkdir(dir, "d", 0755).close();
                ns.lookup("/a/d/.");
                ns.rmdir(dir, "d");
            }
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/d/."));
        });
    }

    @Test
    void renameTakesBothNamesOut() {
        withVolume(OPTIONS, ns -> {
            long a = ns.mkdir("/a", 0755);
            long x = ns.create("/a/x", 0644, true);
            long y = ns.create("/a/y", 0644, true);
            ns.lookup("/a/x");
            ns.lookup("/a/y");
            ns.rename("/a/x", "/a/y"); // y replaced: its inode freed
            assertFalse(holds(ns.names, a, "x"));
            assertFalse(holds(ns.names, a, "y"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/x"));
            assertEquals(x, ns.lookup("/a/y"));
            assertTrue(y != x);
            ns.mkdir("/b", 0755);
            ns.rename("/a/y", "/b/z");
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/y"));
            assertEquals(x, ns.lookup("/b/z"));
        });
    }

    @Test
    void anExchangeSwapsWhatBothCachedNamesAnswer() {
        withVolume(OPTIONS, ns -> {
            long d = ns.mkdir("/d", 0755);
            long f = ns.create("/f", 0644, true);
            ns.create("/d/in", 0644, true);
            ns.lookup("/d/in");
            ns.lookup("/f");
            ns.rename("/d", "/f", RenameMode.EXCHANGE);
            assertEquals(f, ns.lookup("/d"));
            assertEquals(d, ns.lookup("/f"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/d/in"));
            ns.lookup("/f/in");
            try (Handle root = ns.openRoot()) {
                ns.rename(root, "d", root, "f", RenameMode.EXCHANGE);
            }
            assertEquals(d, ns.lookup("/d"));
            assertEquals(f, ns.lookup("/f"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/f/in"));
        });
    }

    @Test
    void aRenamedDirectoryKeepsItsChildrensEntriesAndLosesItsOwn() {
        withVolume(OPTIONS, ns -> {
            ns.mkdir("/a", 0755);
            long b = ns.mkdir("/a/b", 0755);
            long c = ns.mkdir("/a/b/c", 0755);
            long f = ns.create("/a/b/c/f", 0644, true);
            assertEquals(f, ns.lookup("/a/b/c/f"));
            ns.mkdir("/z", 0755);
            ns.rename("/a/b", "/z/b2");
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/b/c/f"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/b"));
            assertTrue(holds(ns.names, b, "c"), "entries keyed by the directory's inode stay right after its rename");
            assertTrue(holds(ns.names, c, "f"));
            assertEquals(f, ns.lookup("/z/b2/c/f"));
            assertEquals(ns.lookup("/z"), ns.lookup("/z/b2/c/../.."));
            ns.mkdir("/a/b", 0755); // a new directory under the old name
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/b/c/f"));
        });
    }

    @Test
    void anInodeReusedAfterAnUnlinkIsNeverFoundUnderItsOldName() {
        withVolume(OPTIONS, ns -> {
            ns.mkdir("/a", 0755);
            long old = ns.create("/a/f", 0644, true);
            assertEquals(old, ns.lookup("/a/f"));
            ns.unlink("/a/f");
            Set<Long> made = new HashSet<>();
            long reused = 0;
            for (int i = 0; i < 256 && reused == 0; i++) {
                long ino = ns.create("/a/g" + i, 0644, true);
                made.add(ino);
                if (ino == old) {
                    reused = ino;
                    ns.lookup("/a/g" + i);
                }
            }
            assertEquals(old, reused, "the freed inode was not handed out again among " + made.size());
            assertErrno(Errno.ENOENT, () -> ns.lookup("/a/f"));
            long again = ns.create("/a/f", 0644, true);
            assertEquals(again, ns.lookup("/a/f"));
        });
    }

    @Test
    void cachedSymlinksAnswerAsUncachedOnes() {
        withVolume(OPTIONS, ns -> {
            long a = ns.mkdir("/a", 0755);
            long f = ns.create("/a/f", 0644, true);
            ns.symlink("a", "/s");
            ns.symlink("/loop", "/loop");
            ns.symlink("f/x", "/a/down");
            for (int round = 0; round < 2; round++) { // cold, then every name cached
                assertEquals(f, ns.lookup("/s/f"));
                assertEquals(a, ns.lookup("/s/"));
                assertTrue(ns.lstat("/s").isSymlink());
                assertErrno(Errno.ELOOP, () -> ns.lookup("/loop"));
                assertErrno(Errno.ENOTDIR, () -> ns.lookup("/a/down"));
                assertErrno(Errno.ENOTDIR, () -> ns.lookup("/a/f/"));
                assertErrno(Errno.ENOENT, () -> ns.lookup("/s/nothing"));
            }
            ns.unlink("/s");
            ns.symlink("a/f", "/s");
            assertEquals(f, ns.lookup("/s"));
        });
    }

    @Test
    void tablesRemovedOrRenamedLeaveNoEntry() {
        withVolume(OPTIONS, ns -> {
            ns.mkdir("/cat", 0755);
            long cat = ns.lookup("/cat");
            ns.createTableEntry(cat, "t1");
            ns.createTableEntry(cat, "t2");
            try (Handle dir = ns.open("/cat")) {
                ns.lstat(dir, "t1");
                ns.lstat(dir, "t2");
                assertTrue(holds(ns.names, cat, "t1"));
                ns.renameTableEntry(cat, "t1", "t3");
                ns.removeTableEntry(cat, "t2");
                assertFalse(holds(ns.names, cat, "t1"));
                assertFalse(holds(ns.names, cat, "t2"));
                assertErrno(Errno.ENOENT, () -> ns.lstat(dir, "t1"));
                assertErrno(Errno.ENOENT, () -> ns.lstat(dir, "t2"));
                ns.lstat(dir, "t3");
                ns.removeTableEntry(cat, "t3");
                assertErrno(Errno.ENOENT, () -> ns.lstat(dir, "t3"));
            }
        });
    }

    @Test
    void anInsertAfterARemovalBeganOrEndedIsRefused() {
        NameCache cache = new NameCache(64);
        NameLookup l = NameLookup.current();
        byte[] name = "f".getBytes(StandardCharsets.UTF_8);
        try (EntryKey key = EntryKey.take("f", true)) {
            // a walk misses, reads the directory; the name is removed before it inserts
            l.name(name);
            assertFalse(cache.get(7, l));
            cache.beginRemove(7, key);
            cache.endRemove(7, key);
            l.ino = 99;
            l.type = InodeFormat.S_IFREG;
            cache.put(7, l);
            assertFalse(holds(cache, 7, "f"), "an insert from a lookup older than a removal");
            // a walk misses while a removal is in progress: it may not insert, and the bucket is not used
            l.name(name);
            assertFalse(cache.get(7, l));
            l.ino = 99;
            cache.put(7, l);
            assertTrue(holds(cache, 7, "f"));
            cache.beginRemove(7, key);
            assertFalse(holds(cache, 7, "f"), "an entry read while its removal runs");
            l.name(name);
            assertFalse(cache.get(7, l));
            l.ino = 99;
            cache.put(7, l);
            cache.endRemove(7, key);
            assertFalse(holds(cache, 7, "f"), "an insert from a lookup during a removal");
            assertFalse(holds(cache, 8, "f"));
        }
    }

    @Test
    void theKnobSizesTheTableAndTheDefaultFollowsTheBufferCache() {
        assertEquals(8, new NameCache(5).capacity());
        assertEquals(2, new NameCache(1).capacity());
        assertEquals(64 << 20 >> 12, VolumeOptions.defaults().withCacheBytes(64L << 20).effectiveNameCacheEntries(0));
        assertEquals(VolumeOptions.MIN_NAME_CACHE, VolumeOptions.defaults().withCacheBytes(1L << 20).effectiveNameCacheEntries(0));
        assertEquals(VolumeOptions.MAX_NAME_CACHE, VolumeOptions.defaults().withCacheBytes(8L << 30).effectiveNameCacheEntries(0));
        withVolume(OPTIONS.withNameCacheEntries(2), ns -> { // one bucket: every name evicts another, answers stay right
            ns.mkdir("/a", 0755);
            for (int i = 0; i < 20; i++) {
                ns.create("/a/f" + i, 0644, true);
            }
            try (Handle dir = ns.open("/a")) {
                for (int round = 0; round < 3; round++) {
                    for (int i = 0; i < 20; i++) {
                        assertEquals(ns.lstat(dir, "f" + i).ino(), ns.lookup("/a/f" + i));
                    }
                }
            }
            assertEquals(2, ns.names.capacity());
        });
    }
}
