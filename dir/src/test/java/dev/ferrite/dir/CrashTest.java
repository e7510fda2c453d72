package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertSound;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A volume that was never unmounted: recovery replays the journal and the counters come back exact.
 * Crash states are sampled inside epochs (subsets of the writes after a flush, torn writes); a sync's
 * durable point is its own flush ({@link SyncPoint}). {@code -Dferrite.seed=N} repeats the workload
 * (one thread) and the random choices; the recording itself may differ between runs, since the AIL and
 * the log writer issue their writes and flushes in the background, so a failure names its crash state too.
 */
@ExtendWith(TestSeed.class)
class CrashTest {
    private static final long SEED = TestSeed.get(5);

    @Test
    void countersAreRebuiltFromTheGroupsAfterACrash() {
        countersAreRebuilt(SEED, 12);
    }

    @Test
    @Tag("stress")
    void countersAreRebuiltAfterManyCrashes() {
        for (long seed = SEED; seed < SEED + 4; seed++) {
            countersAreRebuilt(seed, 60);
        }
    }

    /**
     * Allocations and frees, a sync, then more of them never synced; crashes at the sync's own flush and
     * at sampled points after it (random subsets of an epoch's writes, some torn): recovery must rebuild
     * the counters from the groups (the superblock still says mounted), agree with a full check, keep every
     * inode live at the sync that was not freed after it, and at the sync's flush give its counters exactly.
     */
    private static void countersAreRebuilt(long seed, int samples) {
        Random rnd = new Random(seed);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            List<Long> live = new ArrayList<>();
            Set<Long> liveAtSync = Set.of();
            Set<Long> freedAfterSync = new HashSet<>();
            VolumeStats atSync = null;
            int syncFlush = -1, lastFlush;
            try (Volume v = Volume.open(rec, OPTIONS)) {
                for (int i = 0; i < 1200; i++) {
                    if (i == 900) {
                        syncFlush = SyncPoint.of(rec, v, v::sync);
                        atSync = v.statfs();
                        liveAtSync = new HashSet<>(live);
                    }
                    if (live.isEmpty() || rnd.nextInt(4) > 0) {
                        int mode = rnd.nextInt(3) == 0 ? InodeFormat.S_IFDIR | 0700 : InodeFormat.S_IFREG | 0600;
                        live.add(VolumeAllocations.allocInode(v, mode, 7, 7, 1, v.rootInode()));
                    } else {
                        long freed = live.remove(rnd.nextInt(live.size()));
                        VolumeAllocations.freeInode(v, freed);
                        if (i >= 900) {
                            freedAfterSync.add(freed);
                        }
                    }
                }
                lastFlush = rec.flushCount();
                // the crash: the volume is closed below, but every state sampled lies before its unmount
            }
            String seedInfo = "seed " + seed;
            assertTrue(syncFlush >= 0 && lastFlush > syncFlush, seedInfo + ": the sync flushed nothing: " + rec);
            for (int sample = 0; sample <= samples; sample++) {
                RecordingDevice.CrashState state = sample == 0 ? rec.crashAfterFlush(syncFlush)
                        : sampledCrash(rec, rnd, syncFlush + rnd.nextInt(lastFlush - syncFlush)); // epochs up to the unmount's first flush
                String where = "crash " + state + ", " + seedInfo;
                try (MemoryDevice crashed = rec.materialize(state); Volume after = Volume.open(crashed, OPTIONS)) {
                    MountReport r = after.mountReport();
                    assertFalse(r.wasClean(), where + ": " + r);
                    assertTrue(r.rebuiltCounters(), where + ": " + r);
                    List<CheckProblem> problems = after.check();
                    assertTrue(problems.isEmpty(), where + ":\n" + VolumeFixtures.describe(problems));
                    if (sample == 0) {
                        assertTrue(r.replayedBlocks() > 0, where + ": " + r);
                        assertEquals(atSync, after.statfs(), where);
                        assertEquals(liveAtSync.size() + 1, atSync.inodes() - atSync.freeInodes(), where);
                    }
                    for (long ino : liveAtSync) {
                        if (!freedAfterSync.contains(ino)) {
                            assertEquals(7, after.stat(ino).uid(), "inode " + ino + " synced before the " + where);
                        }
                    }
                }
            }
        }
    }

    /** A crash state and the flush it follows with nothing of the next epoch landed, or -1 (a sampled state). */
    record Crash(RecordingDevice.CrashState state, int afterFlush) {
    }

    /**
     * {@code acked} crashes right after flushes drawn from {@code flushes} (those after which an acknowledged
     * operation returned), then {@code sampled} states sampled from flush {@code firstFlush} to the last.
     */
    static List<Crash> ackedAndSampled(RecordingDevice rec, Random rnd, List<Integer> flushes, int acked, int sampled, int firstFlush) {
        List<Crash> crashes = new ArrayList<>();
        for (int s = 0; s < acked; s++) {
            int k = flushes.get(rnd.nextInt(flushes.size()));
            crashes.add(new Crash(rec.crashAfterFlush(k), k));
        }
        int lastFlush = rec.flushCount();
        for (int s = 0; s < sampled; s++) {
            crashes.add(new Crash(sampledState(rec, rnd, s, firstFlush, lastFlush), -1));
        }
        return crashes;
    }

    /**
     * Sample {@code sample} of the crash states between flushes {@code firstFlush} and {@code lastFlush}:
     * two in three after a flush, with a random subset of the next epoch's writes ({@link #sampledCrash});
     * the third anywhere inside an epoch, in order, every event before a random one landed and that one
     * torn half the time.
     */
    static RecordingDevice.CrashState sampledState(RecordingDevice rec, Random rnd, int sample, int firstFlush, int lastFlush) {
        if (sample % 3 != 2) {
            return sampledCrash(rec, rnd, firstFlush + rnd.nextInt(lastFlush - firstFlush));
        }
        int firstEvent = rec.flushEvent(firstFlush) + 1, lastEvent = rec.flushEvent(lastFlush - 1) + 1;
        int at = firstEvent + rnd.nextInt(lastEvent - firstEvent);
        RecordingDevice.Event e = rec.event(at);
        return e.kind() == RecordingDevice.Event.Kind.WRITE && rnd.nextBoolean()
                ? rec.crashTornAt(at, tornMask(rnd, e.sectorCount())) : new RecordingDevice.CrashState(at);
    }

    /**
     * The crash after flush {@code k} with a random subset of the next epoch's writes landed in a random
     * order, the last of them torn at sector boundaries half the time.
     */
    static RecordingDevice.CrashState sampledCrash(RecordingDevice rec, Random rnd, int k) {
        List<Integer> extras = new ArrayList<>();
        for (RecordingDevice.Event e : rec.epochWrites(k + 1)) {
            if (rnd.nextBoolean()) {
                extras.add(e.index());
            }
        }
        Collections.shuffle(extras, rnd);
        RecordingDevice.CrashState state = rec.crashAfterFlush(k, extras.stream().mapToInt(Integer::intValue).toArray());
        if (extras.isEmpty() || rnd.nextBoolean()) {
            return state;
        }
        int last = extras.getLast();
        return new RecordingDevice.CrashState(state.prefix(), state.extras().subList(0, extras.size() - 1))
                .plusTorn(last, tornMask(rnd, rec.event(last).sectorCount()));
    }

    /** Some sectors of a write, not none and not all (a single-sector write lands whole or not at all). */
    static BitSet tornMask(Random rnd, int sectors) {
        BitSet mask = new BitSet();
        while (sectors > 1 && (mask.isEmpty() || mask.cardinality() == sectors)) {
            mask.clear();
            for (int s = 0; s < sectors; s++) {
                if (rnd.nextBoolean()) {
                    mask.set(s);
                }
            }
        }
        return mask;
    }

    @Test
    void syncedInodesSurviveCrashesAtSampledFlushes() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
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
                        live.add(VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0644, 1, 1, 1, rnd.nextBoolean() ? 0 : v.rootInode()));
                        refilled += drainedInodes >= 0 ? 1 : 0;
                    } else {
                        long victim = new ArrayList<>(live).get(rnd.nextInt(live.size()));
                        live.remove(victim);
                        VolumeAllocations.freeInode(v, victim);
                        freedEver.add(victim);
                        for (Set<Long> f : freedAfterSync) {
                            f.add(victim);
                        }
                    }
                    if (rnd.nextInt(100) == 0) {
                        syncFlush.add(SyncPoint.of(rec, v, v::sync));
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
                RecordingDevice.CrashState state = sampledCrash(rec, rnd, k);
                String where = "crash " + state + ", seed " + SEED;
                int durable = -1;
                for (int i = 0; i < syncFlush.size() && syncFlush.get(i) <= k; i++) {
                    durable = i;
                }
                try (MemoryDevice image = rec.materialize(state); Volume after = Volume.open(image, OPTIONS)) {
                    List<CheckProblem> problems = after.check();
                    assertTrue(problems.isEmpty(), where + ":\n" + VolumeFixtures.describe(problems));
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
