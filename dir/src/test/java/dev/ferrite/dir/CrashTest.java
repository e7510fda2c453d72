package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.RecordingDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeTest.OPTIONS;
import static dev.ferrite.dir.VolumeTest.assertSound;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A volume that was never unmounted: recovery replays the journal and the counters come back exact. */
class CrashTest {
    private static final long SEED = Long.getLong("ferrite.seed", 5);

    @Test
    void countersAreRebuiltFromTheGroupsAfterACrash() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeTest.formatted())) {
            List<Long> live = new ArrayList<>();
            VolumeStats atSync;
            MemoryDevice crashed;
            Volume v = Volume.open(rec, OPTIONS);
            try {
                for (int i = 0; i < 900; i++) {
                    if (live.isEmpty() || rnd.nextInt(4) > 0) {
                        int mode = rnd.nextInt(3) == 0 ? InodeFormat.S_IFDIR | 0700 : InodeFormat.S_IFREG | 0600;
                        live.add(v.allocInode(mode, 7, 7, 1, v.rootInode()));
                    } else {
                        v.freeInode(live.remove(rnd.nextInt(live.size())));
                    }
                }
                v.sync();
                atSync = v.statfs();
                // the crash: the device as it is now, without the unmount (the superblock still says mounted)
                crashed = rec.imageAt(rec.eventCount());
            } finally {
                v.close();
            }
            try (crashed; Volume after = Volume.open(crashed, OPTIONS)) {
                MountReport r = after.mountReport();
                assertFalse(r.wasClean(), r.toString());
                assertTrue(r.rebuiltCounters(), r.toString());
                assertTrue(r.replayedBlocks() > 0, r.toString());
                assertEquals(atSync, after.statfs(), "seed " + SEED);
                assertEquals(live.size() + 1, atSync.inodes() - atSync.freeInodes());
                for (long ino : live) {
                    assertEquals(7, after.stat(ino).uid(), "inode " + ino + ", seed " + SEED);
                }
                assertSound(after);
            }
        }
    }

    @Test
    void syncedInodesSurviveCrashesAtSampledFlushes() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeTest.formatted())) {
            List<Integer> syncFlush = new ArrayList<>(); // the flush that made sync i durable
            List<Set<Long>> liveAtSync = new ArrayList<>();
            Set<Long> live = new LinkedHashSet<>();
            Set<Long> freedEver = new HashSet<>();
            List<Set<Long>> freedAfterSync = new ArrayList<>();
            int firstFlush, lastFlush, drainFlush = -1;
            try (Volume v = Volume.open(rec, OPTIONS)) {
                firstFlush = rec.flushCount();
                // 1500 random steps, then every inode freed (emptied chunks go back to free space), then 300
                // allocations (chunks made again, on blocks just freed): crash points among all of it
                long mostInodes = 0, drainedInodes = -1;
                int refilled = 0;
                for (int i = 0; i < 1500 || drainedInodes < 0 || refilled < 300; i++) {
                    if (i == 1500) {
                        drainFlush = rec.flushCount();
                        mostInodes = v.statfs().inodes();
                    }
                    if (i >= 1500 && drainedInodes < 0 && live.isEmpty()) {
                        drainedInodes = v.statfs().inodes();
                    }
                    boolean alloc = i < 1500 ? live.isEmpty() || rnd.nextInt(3) > 0 : drainedInodes >= 0;
                    if (alloc) {
                        live.add(v.allocInode(InodeFormat.S_IFREG | 0644, 1, 1, 1, rnd.nextBoolean() ? 0 : v.rootInode()));
                        refilled += drainedInodes >= 0 ? 1 : 0;
                    } else {
                        long victim = new ArrayList<>(live).get(rnd.nextInt(live.size()));
                        live.remove(victim);
                        v.freeInode(victim);
                        freedEver.add(victim);
                        for (Set<Long> f : freedAfterSync) {
                            f.add(victim);
                        }
                    }
                    if (rnd.nextInt(100) == 0) {
                        v.sync();
                        syncFlush.add(rec.flushCount() - 1);
                        liveAtSync.add(new HashSet<>(live));
                        freedAfterSync.add(new HashSet<>());
                    }
                }
                lastFlush = rec.flushCount();
                assertTrue(drainedInodes < mostInodes, "the drain freed no chunk: " + drainedInodes + " inodes of " + mostInodes);
                assertTrue(v.statfs().inodes() > drainedInodes, "the refill made no chunk: " + v.statfs());
            }
            assertTrue(syncFlush.size() > 5, "syncs: " + syncFlush.size());
            for (int sample = 0; sample < 15; sample++) {
                int from = sample < 10 ? firstFlush : drainFlush; // a third of the crashes fall in the drain or refill
                int k = from + rnd.nextInt(lastFlush - from);
                List<RecordingDevice.Event> next = rec.epochWrites(k + 1);
                List<Integer> extras = new ArrayList<>();
                for (RecordingDevice.Event e : next) {
                    if (rnd.nextBoolean()) {
                        extras.add(e.index());
                    }
                }
                Collections.shuffle(extras, rnd);
                RecordingDevice.CrashState state = rec.crashAfterFlush(k, extras.stream().mapToInt(Integer::intValue).toArray());
                String where = "crash " + state + ", seed " + SEED;
                int durable = -1;
                for (int i = 0; i < syncFlush.size() && syncFlush.get(i) <= k; i++) {
                    durable = i;
                }
                try (MemoryDevice image = rec.materialize(state); Volume after = Volume.open(image, OPTIONS)) {
                    List<String> problems = after.check();
                    assertTrue(problems.isEmpty(), where + ":\n" + String.join("\n", problems));
                    if (durable >= 0) {
                        for (long ino : liveAtSync.get(durable)) {
                            if (!freedAfterSync.get(durable).contains(ino)) {
                                assertEquals(1, after.stat(ino).uid(), "inode " + ino + " synced before the " + where);
                            }
                        }
                    }
                }
            }
        }
    }
}
