package dev.ferrite.dir;

import java.util.HashSet;
import java.util.Set;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One directory grown to a quarter of a million entries (a tree of three levels or more), walked, looked up and
 * emptied again, checked full and empty, with a cache of half the inode blocks, so that blocks
 * are written back and read again on the way; a million under {@code -Pstress}.
 * {@code -Dferrite.bigdir.entries=N} changes the size.
 */
class BigDirectoryTest {

    @Test
    void aQuarterOfAMillionEntries() {
        grow(Integer.getInteger("ferrite.bigdir.entries", 250_000));
    }

    @Test
    @Tag("stress")
    void oneMillionEntries() {
        grow(1_000_000);
    }

    private static void grow(int n) {
        long blocks = n / 8 * 3 / 2 + n / 40 + 16_384; // inode chunks, the directory tree, the log and slack
        try (MemoryDevice dev = MemoryDevice.create(blocks, 4096)) {
            // 256 bytes an entry: half of the inode blocks (eight 512-byte inodes a block)
            VolumeOptions options = VolumeOptions.defaults().withAgCount(4).withCacheBytes(Math.max(16L << 20, n * 256L)).withLogBlocks(16_384);
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                Namespace ns = v.namespace();
                ns.mkdir("/big", 0755);
                long t0 = System.nanoTime();
                try (Handle big = ns.open("/big")) {
                    for (int i = 0; i < n; i++) {
                        ns.create(big, "file-" + i, 0644, true).close();
                    }
                }
                long t1 = System.nanoTime();
                assertEquals(n, ns.stat("/big").size());
                Set<String> seen = new HashSet<>(n * 2);
                DirCookie c = DirCookie.START;
                for (;;) {
                    DirPage p = ns.readdir("/big", c, 4096);
                    for (DirEntry e : p.entries()) {
                        assertTrue(seen.add(e.name()), "returned twice: " + e.name());
                    }
                    if (p.end()) {
                        break;
                    }
                    c = p.next();
                }
                assertEquals(n, seen.size());
                long t2 = System.nanoTime();
                for (int i = 0; i < n; i += 97) {
                    assertTrue(ns.lookup("/big/file-" + i) > 0);
                }
                assertTrue(ns.stat("/big").blocks() > 0, "the directory is a tree");
                Inode d = v.inodeCache().acquire(ns.lookup("/big"));
                try {
                    int height = ns.dirs.treeOrNull(d).height();
                    assertTrue(height >= 3, "a tree of three levels or more, not " + height);
                } finally {
                    v.inodeCache().release(d);
                }
                VolumeFixtures.assertChecked(ns);
                try (Handle big = ns.open("/big")) {
                    for (int i = 0; i < n; i++) {
                        ns.unlink(big, "file-" + i);
                    }
                }
                long t3 = System.nanoTime();
                var cache = v.cacheStats();
                assertTrue(cache.leafEvictions() + cache.interiorEvictions() > 0 && cache.misses() > 0,
                        "the cache held every block, so nothing was written back and read again: " + cache);
                ns.rmdir("/big");
                VolumeFixtures.assertChecked(ns);
                System.out.printf("%d entries: create %.0f/s, walk %.0f/s, unlink %.0f/s%n", n,
                        n / ((t1 - t0) / 1e9), n / ((t2 - t1) / 1e9), n / ((t3 - t2) / 1e9));
            }
        }
    }
}
