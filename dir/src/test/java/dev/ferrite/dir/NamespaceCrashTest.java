package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Crashes at sampled points of a namespace workload, after a flush with random subsets of the next
 * epoch's writes (reordered, the last one torn half the time), or anywhere inside an epoch with every
 * earlier event landed (the last write torn half the time); a sync's durable point is its own flush
 * ({@link SyncPoint}):
 * the recovered volume is sound, and its tree is exactly the tree after some operation at or after the
 * last one a sync or fsync acknowledged before the crash (so every operation, renames included, is all
 * or nothing, and nothing acknowledged is lost).
 */
@ExtendWith(TestSeed.class)
class NamespaceCrashTest {
    private static final long SEED = TestSeed.get(7);
    private static final String[] NAMES = {"b", "c", "d", "e"};
    private static final int OPS = 600;
    private static final int SAMPLES = Integer.getInteger("ferrite.crash.samples", 90);

    @Test
    void recoveredTreesArePrefixesOfTheWorkloadKeepingEverythingSynced() {
        recoverSampledCrashes(SEED, SAMPLES);
    }

    @Test
    @Tag("stress")
    void manyMoreCrashStates() {
        for (long seed = SEED; seed < SEED + 4; seed++) {
            recoverSampledCrashes(seed, 400);
        }
    }

    private static void recoverSampledCrashes(long seed, int samples) {
        Random rnd = new Random(seed);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            List<Map<String, String>> after = new ArrayList<>(); // after.get(i): the tree after op i (0: before any)
            List<Integer> syncFlush = new ArrayList<>();
            List<Integer> syncedOps = new ArrayList<>();
            int firstFlush, lastFlush;
            boolean grewIntoATree = false;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/a", 0755); // only its entries change: it grows into a tree and shrinks
                firstFlush = rec.flushCount();
                after.add(PosixDifferentialTest.ferriteTree(ns, "/"));
                Handle open = null;
                for (int i = 1; i <= OPS; i++) {
                    String p = path(rnd), q = path(rnd);
                    try {
                        switch (rnd.nextInt(9)) {
                            case 0 -> ns.mkdir(p, 0755);
                            case 1, 2 -> ns.create(p, 0644, true);
                            case 3 -> ns.unlink(p);
                            case 4 -> ns.rmdir(p);
                            case 5 -> ns.rename(p, q);
                            case 6 -> ns.rename(p, q, rnd.nextBoolean() ? RenameMode.EXCHANGE : RenameMode.NO_REPLACE);
                            case 7 -> ns.link(p, q);
                            default -> ns.symlink(rnd.nextBoolean() ? "x" : "y".repeat(600), q); // inline, or in a block
                        }
                    } catch (NamespaceException expected) {
                        // refused with nothing changed: the tree is the previous one
                    }
                    after.add(PosixDifferentialTest.ferriteTree(ns, "/"));
                    grewIntoATree |= ns.stat("/a").blocks() > 0;
                    if (open != null && rnd.nextInt(25) == 0) {
                        ns.fsync(open); // durable up to the open inode's last change only: acknowledges nothing here
                    }
                    if (rnd.nextInt(25) == 0) {
                        syncFlush.add(SyncPoint.of(rec, v, ns::sync));
                        syncedOps.add(i);
                    }
                    if (open == null && rnd.nextInt(50) == 0) {
                        try {
                            open = ns.open(p); // kept open through unlinks: an orphan at the crash
                        } catch (NamespaceException absent) {
                            open = null;
                        }
                    }
                }
                lastFlush = rec.flushCount();
                if (open != null) {
                    open.close();
                }
            }
            assertTrue(syncFlush.size() > 5, "syncs: " + syncFlush.size());
            assertTrue(grewIntoATree, "/a never outgrew its inode, seed " + seed);
            for (int sample = 0; sample < samples; sample++) {
                RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, sample, firstFlush, lastFlush);
                String where = "crash " + state + ", seed " + seed;
                int synced = 0; // the last op a sync made durable within the events the crash kept in order
                for (int i = 0; i < syncFlush.size() && rec.flushEvent(syncFlush.get(i)) < state.prefix(); i++) {
                    synced = syncedOps.get(i);
                }
                try (MemoryDevice image = rec.materialize(state); Volume v = Volume.open(image, VolumeFixtures.OPTIONS)) {
                    CheckReport report = v.namespace().check();
                    assertTrue(report.clean(), where + ":\n" + report);
                    Map<String, String> tree = PosixDifferentialTest.ferriteTree(v.namespace(), "/");
                    boolean matched = false;
                    for (int j = synced; j < after.size() && !matched; j++) {
                        matched = after.get(j).equals(tree);
                    }
                    assertTrue(matched, where + ": the recovered tree is no state at or after op " + synced + ": " + tree + " synced: " + after.get(synced));
                }
            }
        }
    }

    @Test
    void fsyncOfAHandleMakesItsCreationDurable() {
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            MemoryDevice crashed;
            Volume v = Volume.open(rec, VolumeFixtures.OPTIONS);
            try (Handle root = v.namespace().openRoot()) {
                Handle d = v.namespace().mkdir(root, "d", 0755);
                Handle f = v.namespace().create(d, "f", 0644, true);
                // the crash right after the fsync's own flush: nothing written after it landed
                crashed = rec.materialize(rec.crashAfterFlush(SyncPoint.of(rec, v, () -> v.namespace().fsync(f))));
                f.close();
                d.close();
            } finally {
                v.close();
            }
            try (crashed; Volume after = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                assertTrue(after.namespace().stat("/d/f").isRegularFile());
                VolumeFixtures.assertChecked(after.namespace());
            }
        }
    }

    private static String path(Random rnd) {
        if (rnd.nextInt(3) == 0) {
            return "/a/n" + rnd.nextInt(60); // enough names in /a to make it a tree
        }
        StringBuilder sb = new StringBuilder();
        for (int d = 1 + rnd.nextInt(2); d > 0; d--) {
            sb.append('/').append(NAMES[rnd.nextInt(NAMES.length)]);
        }
        return sb.toString();
    }
}
