package dev.ferrite.fuse;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.testkit.PosixOps;
import dev.ferrite.io.testkit.TestSeed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * dir's {@code PosixDifferentialTest} through the mount: the same random namespace operations ({@link PosixOps}),
 * made by the host's system calls on the mounted volume (the kernel's VFS and FUSE in front of Ferrite) and on
 * a directory of the host file system, must give the same answers, errno included, and leave the same trees
 * (names, types, link counts, symlink targets); the volume's checker then finds nothing. So the FUSE layer's
 * errno mapping is checked as well as the namespace's answers.
 *
 * <p>The volume is mounted as {@code ./ferrite mount} and {@link dev.ferrite.dir.Volume#mount} mount it: entries and
 * attributes cached by the kernel for 1 s, requests served by libfuse's worker threads. Operations whose paths lead
 * above the root (through {@code ..} or a symlink to it, which the host resolves to the mount point's parent) are
 * not made, on either side: what lies above is the host's. Nothing else is left out.
 */
@ExtendWith(TestSeed.class)
class MountDifferentialTest {
    private static final int OPS = Integer.getInteger("ferrite.differential.ops", 1500);

    @TempDir
    Path scratch;

    @Test
    void theMountAgreesWithTheHost() throws Exception {
        run(TestSeed.get(1), OPS);
    }

    @Test
    @Tag("stress")
    void theMountAgreesWithTheHostOverManySeeds() throws Exception {
        for (long seed = 100; seed < 120; seed++) {
            run(seed, 10_000);
        }
    }

    private void run(long seed, int ops) throws Exception {
        Path host = Files.createDirectory(scratch.resolve("host" + seed));
        try (FuseFixture fx = new FuseFixture(Files.createDirectory(scratch.resolve("volume" + seed)), 64)) {
            PosixOps hostOps = new PosixOps(host), mountOps = new PosixOps(fx.mountPoint);
            Random rnd = new Random(seed);
            int skipped = 0;
            for (int i = 0; i < ops; i++) {
                String what = PosixOps.randomOp(rnd);
                if (hostOps.leavesRoot(what)) {
                    skipped++;
                    continue;
                }
                String expected = hostOps.apply(what);
                assertEquals(expected, mountOps.apply(what), "op " + i + " '" + PosixOps.shown(what) + "', seed " + seed);
            }
            assertTrue(skipped < ops / 4, skipped + " operations led above the root, seed " + seed);
            assertEquals(hostOps.tree(), mountOps.tree(), "final tree, seed " + seed);
            CheckReport report = fx.volume.namespace().check();
            assertTrue(report.clean(), "seed " + seed + ": " + report);
        } finally {
            PosixOps.deleteTree(host);
        }
    }
}
