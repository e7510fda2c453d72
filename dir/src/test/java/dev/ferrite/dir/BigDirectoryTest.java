package dev.ferrite.dir;

import java.util.HashSet;
import java.util.Set;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One directory grown to many entries, walked, looked up and emptied again. The default suite grows it
 * to 50k entries (a three-level tree); 200k and 1M are stress variants (a 2-core machine shared with
 * other builds creates at a few thousand per second, which puts 200k at about a minute).
 */
class BigDirectoryTest {

    @Test
    void fiftyThousandEntries() {
        grow(Integer.getInteger("ferrite.bigdir.entries", 50_000));
    }

    @Test
    @Tag("stress")
    void twoHundredThousandEntries() {
        grow(200_000);
    }

    @Test
    @Tag("stress")
    void oneMillionEntries() {
        grow(1_000_000);
    }

    private static void grow(int n) {
        long blocks = n / 8 * 3 / 2 + n / 40 + 16_384; // inode chunks, the directory tree, the log and slack
        try (MemoryDevice dev = MemoryDevice.create(blocks, 4096)) {
            VolumeOptions options = VolumeOptions.defaults().withAgCount(4).withCacheBytes(256L << 20).withLogBlocks(16_384);
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
                NamespaceTest.assertChecked(ns);
                try (Handle big = ns.open("/big")) {
                    for (int i = 0; i < n; i++) {
                        ns.unlink(big, "file-" + i);
                    }
                }
                long t3 = System.nanoTime();
                ns.rmdir("/big");
                NamespaceTest.assertChecked(ns);
                System.out.printf("%d entries: create %.0f/s, walk %.0f/s, unlink %.0f/s%n", n,
                        n / ((t1 - t0) / 1e9), n / ((t2 - t1) / 1e9), n / ((t3 - t2) / 1e9));
            }
        }
    }
}
