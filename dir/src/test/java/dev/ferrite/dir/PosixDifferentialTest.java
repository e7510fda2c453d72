package dev.ferrite.dir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.dir.testkit.PosixOps;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random namespace operations ({@link PosixOps}) applied both to a Ferrite volume and to a directory of the
 * host's file system (through its system calls, paths passed as they are): each must give the same answer on
 * both (the same errno, or the same type and link count for a stat, the same target for a readlink), and the
 * trees must end up equal (names, types, symlink targets, link counts). fuse's {@code MountDifferentialTest}
 * runs the same operations through the mount.
 *
 * <p>The one deliberate difference: a {@code ..} above Ferrite's root is EINVAL, where the host would
 * leave its directory. Such an operation is not sent to the host (it changes nothing on Ferrite).
 */
@ExtendWith(TestSeed.class)
class PosixDifferentialTest {
    private static final int OPS = Integer.getInteger("ferrite.differential.ops", 3000);

    @TempDir
    Path tempDir;
    /** The host directory standing for the volume's root in this run. */
    private Path host;

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3})
    void ferriteAgreesWithTheHost(long defaultSeed) throws IOException {
        host = tempDir;
        run(TestSeed.get(defaultSeed), OPS);
    }

    /** Many seeds, each against the temporary directory's file system and, where there is one, tmpfs. */
    @Test
    @Tag("stress")
    void ferriteAgreesWithTheHostOverManySeeds() throws IOException {
        Path shm = Path.of("/dev/shm");
        for (long seed = 100; seed < 160; seed++) {
            boolean tmpfs = seed % 2 == 1 && Files.isDirectory(shm) && Files.isWritable(shm);
            host = tmpfs ? Files.createTempDirectory(shm, "ferrite-differential") : Files.createDirectory(tempDir.resolve("s" + seed));
            try {
                run(seed, 10_000);
            } finally {
                PosixOps.deleteTree(host);
            }
        }
    }

    private void run(long seed, int ops) throws IOException {
        Random rnd = new Random(seed);
        PosixOps hostOps = new PosixOps(host);
        int skipped = 0;
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            for (int i = 0; i < ops; i++) {
                String what = PosixOps.randomOp(rnd);
                String ours = onFerrite(ns, what);
                if (ours == null) {
                    skipped++;
                    continue;
                }
                String theirs = hostOps.apply(what);
                assertEquals(theirs, ours, "op " + i + " '" + PosixOps.shown(what) + "', seed " + seed);
            }
            assertTrue(skipped < ops / 4, skipped + " operations led above the root, seed " + seed);
            assertEquals(hostOps.tree(), ferriteTree(ns, "/"), "final tree, seed " + seed);
            VolumeFixtures.assertChecked(ns);
        }
    }

    /** Ferrite's answer as {@link PosixOps#apply} gives the host's, or null for a '..' above the root. */
    private static String onFerrite(Namespace ns, String what) {
        String[] w = what.split(" ");
        try {
            switch (w[0]) {
                case "mkdir" -> ns.mkdir(w[1], 0755);
                case "create" -> ns.create(w[1], 0644, true);
                case "open" -> ns.create(w[1], 0644, false);
                case "unlink" -> ns.unlink(w[1]);
                case "rmdir" -> ns.rmdir(w[1]);
                case "rename" -> ns.rename(w[1], w[2]);
                case "rename2" -> ns.rename(w[1], w[2], mode(w[3]));
                case "link" -> ns.link(w[1], w[2]);
                case "symlink" -> ns.symlink(w[1], w[2]);
                case "lstat" -> {
                    return describe(ns.lstat(w[1]));
                }
                case "stat" -> {
                    return describe(ns.stat(w[1]));
                }
                case "readlink" -> {
                    return "target " + ns.readlink(w[1]);
                }
                default -> {
                    return onFerriteAt(ns, w);
                }
            }
            return "ok";
        } catch (NamespaceException e) {
            return aboveRoot(e) ? null : Errno.name(e.errno());
        }
    }

    private static String onFerriteAt(Namespace ns, String[] w) {
        try (Handle d = ns.open(w[1])) {
            switch (w[0]) {
                case "lstatat" -> {
                    return describe(ns.lstat(d, w[2]));
                }
                case "mkdirat" -> ns.mkdir(d, w[2], 0755).close();
                case "createat" -> ns.create(d, w[2], 0644, true).close();
                case "unlinkat" -> ns.unlink(d, w[2]);
                case "rmdirat" -> ns.rmdir(d, w[2]);
                default -> {
                    try (Handle to = ns.open(w[3])) {
                        ns.rename(d, w[2], to, w[4], w.length > 5 ? mode(w[5]) : RenameMode.REPLACE);
                    }
                }
            }
            return "ok";
        }
    }

    /** The mode of renameat2's flag {@code flag}. */
    private static RenameMode mode(String flag) {
        return flag.equals("1") ? RenameMode.NO_REPLACE : RenameMode.EXCHANGE;
    }

    private static boolean aboveRoot(NamespaceException e) {
        return e.errno() == Errno.EINVAL && e.getMessage().contains("above the root");
    }

    private static String describe(InodeStat s) {
        return s.isDirectory() ? "dir " + s.nlink() : s.isSymlink() ? "link" : "file " + s.nlink();
    }

    static Map<String, String> ferriteTree(Namespace ns, String dir) {
        Map<String, String> out = new TreeMap<>();
        for (DirEntry e : ns.list(dir)) {
            String p = (dir.equals("/") ? "" : dir) + "/" + e.name();
            InodeStat s = ns.lstat(p);
            if (s.isSymlink()) {
                out.put(p, "link " + ns.readlink(p));
            } else if (s.isDirectory()) {
                out.put(p, "dir");
                out.putAll(ferriteTree(ns, p));
            } else {
                out.put(p, "file " + s.nlink());
            }
        }
        return out;
    }
}
