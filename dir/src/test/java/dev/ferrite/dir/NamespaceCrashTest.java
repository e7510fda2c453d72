package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.RecordingDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Crashes at sampled flushes of a namespace workload (with random subsets of the next epoch's writes, and
 * in a third of the samples one more of them torn at sector boundaries):
 * the recovered volume is sound, and its tree is exactly the tree after some operation at or after the
 * last one a sync or fsync acknowledged before the crash (so every operation, renames included, is all
 * or nothing, and nothing acknowledged is lost).
 */
class NamespaceCrashTest {
    private static final long SEED = Long.getLong("ferrite.seed", 7);
    private static final String[] NAMES = {"b", "c", "d", "e"};
    private static final int OPS = 600;
    private static final int SAMPLES = Integer.getInteger("ferrite.crash.samples", 90);

    @Test
    void recoveredTreesArePrefixesOfTheWorkloadKeepingEverythingSynced() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeTest.formatted())) {
            List<Map<String, String>> after = new ArrayList<>(); // after.get(i): the tree after op i (0: before any)
            List<Integer> syncFlush = new ArrayList<>();
            List<Integer> syncedOps = new ArrayList<>();
            int firstFlush, lastFlush;
            boolean grewIntoATree = false;
            try (Volume v = Volume.open(rec, VolumeTest.OPTIONS)) {
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
                            case 5, 6 -> ns.rename(p, q);
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
                        ns.sync();
                        syncFlush.add(rec.flushCount() - 1);
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
            assertTrue(grewIntoATree, "/a never outgrew its inode, seed " + SEED);
            for (int sample = 0; sample < SAMPLES; sample++) {
                int k = firstFlush + rnd.nextInt(lastFlush - firstFlush);
                List<Integer> extras = new ArrayList<>();
                List<RecordingDevice.Event> next = rec.epochWrites(k + 1);
                for (RecordingDevice.Event e : next) {
                    if (rnd.nextBoolean()) {
                        extras.add(e.index());
                    }
                }
                Collections.shuffle(extras, rnd);
                RecordingDevice.CrashState state = rec.crashAfterFlush(k, extras.stream().mapToInt(Integer::intValue).toArray());
                if (!next.isEmpty() && sample % 3 == 0) { // one more write of the epoch, torn at sector boundaries
                    RecordingDevice.Event e = next.get(rnd.nextInt(next.size()));
                    if (!extras.contains(e.index())) {
                        BitSet sectors = new BitSet();
                        for (int s = 0; s < e.sectorCount(); s++) {
                            if (rnd.nextBoolean()) {
                                sectors.set(s);
                            }
                        }
                        state = state.plusTorn(e.index(), sectors);
                    }
                }
                String where = "crash " + state + ", seed " + SEED;
                int synced = 0;
                for (int i = 0; i < syncFlush.size() && syncFlush.get(i) <= k; i++) {
                    synced = syncedOps.get(i);
                }
                try (MemoryDevice image = rec.materialize(state); Volume v = Volume.open(image, VolumeTest.OPTIONS)) {
                    List<String> problems = v.namespace().check();
                    assertTrue(problems.isEmpty(), where + ":\n" + String.join("\n", problems));
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
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeTest.formatted())) {
            MemoryDevice crashed;
            Volume v = Volume.open(rec, VolumeTest.OPTIONS);
            try (Handle root = v.namespace().openRoot()) {
                Handle d = v.namespace().mkdir(root, "d", 0755);
                Handle f = v.namespace().create(d, "f", 0644, true);
                v.namespace().fsync(f);
                crashed = rec.imageAt(rec.eventCount());
                f.close();
                d.close();
            } finally {
                v.close();
            }
            try (crashed; Volume after = Volume.open(crashed, VolumeTest.OPTIONS)) {
                assertTrue(after.namespace().stat("/d/f").isRegularFile());
                NamespaceTest.assertChecked(after.namespace());
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
