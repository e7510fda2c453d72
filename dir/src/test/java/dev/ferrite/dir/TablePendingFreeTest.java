package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.ToLongFunction;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The groups' pending-free lists ({@link FreeSpace#deferData}, {@link FreeSpace#drainPending}): a single
 * delete of an extent value puts its blocks there instead of changing the free-space trees; a drain frees
 * them in bulk, at half full, at sync and unmount, before an allocation short of space forces, and at
 * mount; the checker counts them as owned; a crash anywhere neither frees them twice nor leaks them.
 */
@ExtendWith(TestSeed.class)
class TablePendingFreeTest {
    private static final long SEED = TestSeed.get(17);
    private static final int VALUE = 4 * 4096;

    private static byte[] key(int i) {
        return b(String.format("k%04d", i));
    }

    private static byte[] value(int i, int tag) {
        byte[] v = new byte[VALUE];
        new Random(i * 1_000_003L + tag).nextBytes(v);
        return v;
    }

    /** {@code of} summed over the volume's groups. */
    private static long sum(Volume v, ToLongFunction<AllocationGroup> of) {
        long n = 0;
        for (int g = 0; g < v.geometry().agCount(); g++) {
            n += of.applyAsLong(v.group(g));
        }
        return n;
    }

    private static long pendingCount(Volume v) {
        return sum(v, AllocationGroup::pendingCount);
    }

    private static long drainedRanges(Volume v) {
        return sum(v, ag -> ag.space.drainedRanges);
    }

    /**
     * Deletes of values written side by side go on the list: the trees and the AGF's free count do not move,
     * the volume's free count does, the live volume checks clean; the sync drains them as one tree change,
     * and the superblock carries the feature that refuses code without the lists.
     */
    @Test
    void singleDeletesGoOnThePendingListAndSyncDrainsThemAsOneRange() {
        int n = 100; // under half of a list: no drain on the deleting thread
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Table none = t.withDurability(Durability.NONE);
            for (int i = 0; i < n; i++) {
                none.put(key(i), value(i, 0));
            }
            v.sync();
            assertFalse(v.hasIncompatFeature(SuperblockFormat.INCOMPAT_PENDING_FREES), "no pending free yet");
            long statfsBefore = v.statfs().freeBlocks(), agfBefore = sum(v, AllocationGroup::freeBlockCount);
            for (int i = 0; i < n; i++) {
                assertTrue(none.delete(key(i)));
            }
            assertTrue(v.hasIncompatFeature(SuperblockFormat.INCOMPAT_PENDING_FREES), "set before the first entry");
            // the first delete looks first, then puts its value on the list as the others do
            assertEquals(n, pendingCount(v), "entries on the pending-free lists");
            assertEquals(agfBefore, sum(v, AllocationGroup::freeBlockCount), "the trees took none yet");
            assertEquals(statfsBefore + 4L * n, v.statfs().freeBlocks(), "the counters count pending frees free");
            VolumeFixtures.assertChecked(v.namespace()); // the list's extents owned, overlapping nothing
            long rangesBefore = drainedRanges(v);
            v.sync();
            assertEquals(0L, pendingCount(v), "sync drains every list");
            assertEquals(1, drainedRanges(v) - rangesBefore, "adjacent values freed as one range");
            assertEquals(agfBefore + 4L * n, sum(v, AllocationGroup::freeBlockCount));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * Deletes of values that lie in two groups, each in another group than the one before (values that
     * random puts scattered): each looks first and puts its value on its group's list, as one in the
     * group the last delete found does. Until 2026-12-06 each freed its value into the trees at once
     * after its guess missed, and the next one missed again.
     */
    @Test
    void deletesOfValuesScatteredAcrossGroupsAllGoOnTheLists() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Table none = t.withDurability(Durability.NONE);
            int n = (int) (1.5 * v.geometry().agBlocks() / (VALUE / 4096)); // values in two groups
            for (int i = 0; i < n; i++) {
                none.put(key(i), value(i, 0));
            }
            v.sync();
            Map<Integer, List<Integer>> byGroup = new HashMap<>();
            for (int i = 0; i < n; i++) {
                byte[] stored = t.storedValue(key(i));
                int group = v.geometry().agOfBlock(TableValueFormat.readExtent(java.lang.foreign.MemorySegment.ofArray(stored)).block());
                byGroup.computeIfAbsent(group, g -> new ArrayList<>()).add(i);
            }
            List<List<Integer>> groups = new ArrayList<>(byGroup.values());
            assertTrue(groups.size() >= 2 && groups.get(0).size() > 60 && groups.get(1).size() > 60, "values in two groups: " + byGroup.keySet());
            long agfBefore = sum(v, AllocationGroup::freeBlockCount);
            int deletes = 120; // 60 a group: under half a list, no drain
            for (int i = 0; i < deletes; i++) {
                assertTrue(none.delete(key(groups.get(i % 2).get(i / 2))));
            }
            assertEquals(deletes, pendingCount(v), "every delete's value on its group's list");
            assertEquals(agfBefore, sum(v, AllocationGroup::freeBlockCount), "none freed into the trees at once");
            VolumeFixtures.assertChecked(v.namespace());
            v.sync();
            assertEquals(0L, pendingCount(v));
            assertEquals(agfBefore + 4L * deletes, sum(v, AllocationGroup::freeBlockCount));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** The deleting thread drains a list once it is half full: it never fills while deletes go on. */
    @Test
    void theDeletingThreadDrainsAtHalfFull() {
        int half = AgHeaderFormat.pendingCapacity(4096) / 2;
        int n = half + 40;
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Table none = t.withDurability(Durability.NONE);
            for (int i = 0; i < n; i++) {
                none.put(key(i), value(i, 0));
            }
            v.sync();
            for (int i = 0; i < n; i++) {
                assertTrue(none.delete(key(i)));
                // a drain gives up where it would wait (a refill due: the next delete refills, the one after drains)
                assertTrue(pendingCount(v) <= half + 8, pendingCount(v) + " entries after " + (i + 1) + " deletes");
            }
            assertTrue(drainedRanges(v) >= 1, "a drain ran on the deleting thread");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * Unmount drains (a clean volume's lists are empty), and a mount drains what a crash left: a volume
     * copied with entries on its lists mounts with them freed, its counts exact, every block accounted.
     */
    @Test
    void unmountAndMountDrainTheLists() {
        MemoryDevice dev = VolumeFixtures.formatted();
        int n = 60;
        long statfs;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (int i = 0; i < n; i++) {
                t.put(key(i), value(i, 0));
            }
            for (int i = 0; i < n; i += 2) {
                assertTrue(t.delete(key(i))); // SYNC: each delete and its entry durable
            }
            assertTrue(pendingCount(v) > 0);
            statfs = v.statfs().freeBlocks();
            try (MemoryDevice crashed = dev.copy("crashed"); Volume c = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                assertFalse(c.mountReport().wasClean(), "a copy of a mounted volume");
                assertEquals(0L, pendingCount(c), "mount drains the lists");
                assertEquals(statfs, c.statfs().freeBlocks(), "counts rebuilt with the pending frees");
                VolumeFixtures.assertChecked(c.namespace());
            }
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            assertTrue(v.mountReport().wasClean());
            assertEquals(statfs, v.statfs().freeBlocks());
            for (int g = 0; g < v.geometry().agCount(); g++) {
                assertEquals(0, AgHeaderFormat.u32(v.group(g).agf.data(), AgHeaderFormat.PENDING_COUNT), "unmount drained group " + g);
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A volume filled with values, some deleted (their blocks pending free, the lists under half full), takes
     * nearly as many values again: an allocation short of space drains the lists before it forces.
     */
    @Test
    void anAllocationShortOfSpaceDrainsTheLists() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Table none = t.withDurability(Durability.NONE);
            int n = 0;
            try {
                for (; ; n++) {
                    none.put(key(n), value(n, 0));
                }
            } catch (NoSpaceException full) {
                // as full as values make it
            }
            v.sync();
            int deleted = 0;
            for (int i = 1; i < n && deleted < 100; i += 3, deleted++) {
                assertTrue(none.delete(key(i)));
            }
            assertTrue(pendingCount(v) > 0, "deletes left on the lists");
            int again = deleted * 9 / 10; // the rest kept for the trees' growth and the held-back blocks
            for (int i = 0; i < again; i++) {
                none.put(b("again" + i), value(i, 1));
            }
            VolumeFixtures.assertChecked(v.namespace());
            assertEquals(0L, pendingCount(v), "the puts drained the lists");
            for (int i = 0; i < again; i++) {
                assertArrayEquals(value(i, 1), t.get(b("again" + i)));
            }
        }
    }

    /** The checker finds a pending entry that overlaps a value's blocks: owned twice. */
    @Test
    void theCheckerFindsAPendingEntryOverlappingAnOwner() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(key(0), value(0, 0));
            TableValueFormat.Extent x = TableValueFormat.readExtent(java.lang.foreign.MemorySegment.ofArray(t.storedValue(key(0))));
            AllocationGroup ag = v.tables().extents.groupOf(x);
            v.tables().extents.featurePendingFrees();
            try (Txn txn = Txn.begin(v.cache(), ag.blockItems())) {
                assertTrue(ag.lockForRelease(txn));
                assertTrue(ag.deferData(txn, x.block(), x.blocks(4096))); // still the key's
                txn.commit();
            }
            CheckReport report = v.namespace().check();
            assertFalse(report.clean());
            assertTrue(report.toString().contains("is also PENDING_FREE"), report.toString());
        }
    }

    /** A mount refuses a pending-free entry outside its group, naming it. */
    @Test
    void theMountRefusesAnEntryOutsideItsGroup() {
        MemoryDevice dev = VolumeFixtures.formatted();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            AllocationGroup ag = v.group(1);
            v.quiesce(); // the AGF home, the log replaying nothing
            try (MemoryDevice bad = dev.copy("bad")) {
                VolumeTest.rewriteRaw(bad, ag.agf.block(), h -> {
                    AgHeaderFormat.setU32(h, AgHeaderFormat.pendingStartOffset(0), ag.length - 2); // across the group's end
                    AgHeaderFormat.setU32(h, AgHeaderFormat.pendingLengthOffset(0), 4);
                    AgHeaderFormat.setU32(h, AgHeaderFormat.PENDING_COUNT, 1);
                    BlockHeaderFormat.stamp(h, BlockHeaderFormat.lsn(h));
                });
                CorruptionException e = assertThrows(CorruptionException.class, () -> Volume.open(bad, VolumeFixtures.OPTIONS).close());
                assertTrue(e.getMessage().contains("pending-free entry 0 of group 1"), e.getMessage());
            }
        }
    }

    /**
     * Single puts and deletes of 16 KiB values (most deletes through the pending-free lists, drained at half
     * full, by syncs, by the mount), committed SYNC, ASYNC or NONE, crashed at sampled points (a random
     * subset of the next epoch's writes, reordered, or one torn): each recovered volume checks clean (every
     * block one owner's or free: nothing freed twice, nothing lost), every key holds a value it was given,
     * and once every key is deleted and the volume synced, its free space is exactly what it was before
     * the churn.
     */
    @Test
    void crashesNeitherFreeTwiceNorLeak() {
        Random rnd = new Random(SEED);
        int keys = 90;
        Map<Integer, List<byte[]>> given = new HashMap<>();
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            int firstFlush;
            long spareAtStart;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                v.sync();
                spareAtStart = spareWith(v, t);
                firstFlush = rec.flushCount();
                churn(v, t, rnd, keys, 700, given);
                assertTrue(drainedRanges(v) > 0, "the workload drained on the deleting thread or at sync");
            }
            int flushes = rec.flushCount(), drainedAtMount = 0;
            for (int s = 0; s < 24; s++) {
                int k = firstFlush + rnd.nextInt(flushes - firstFlush);
                drainedAtMount += recoverAndVerify(rec, TableCrashTest.sampleAfter(rec, k, rnd), keys, given, spareAtStart);
            }
            assertTrue(drainedAtMount > 0, "some crash left entries for the mount to drain");
        }
    }

    /**
     * Crashes inside the epochs of a sync that drains scattered lists (every other value deleted, the
     * deletes durable first):
     * whatever subset of those epochs' writes lands, or whichever is torn, recovery neither frees an entry
     * twice nor leaks one.
     */
    @Test
    void crashesInsideADrainNeitherFreeTwiceNorLeak() {
        int drainedAtMount = crashesInside(SEED + 1, (v, none) -> {
            for (int k = 0; k < KEYS; k += 2) {
                assertTrue(none.delete(key(k)));
            }
            v.journal().forceAll(); // the deletes and their entries durable, the lists not drained
        }, (v, none) -> {
            long drainsBefore = sum(v, ag -> ag.space.drains);
            assertTrue(pendingCount(v) > 0);
            v.sync();
            assertTrue(sum(v, ag -> ag.space.drains) - drainsBefore >= 1, "the sync drained");
        }, new HashMap<>());
        assertTrue(drainedAtMount > 0, "some crash left entries for the mount to drain");
    }

    /**
     * Crashes inside transactions that delete or replace runs of values lying side by side, whose frees
     * ({@code TableExtents#freeAll}) change the free-space trees once a run ({@code FreeSpace#releaseDataRuns})
     * while each value keeps its busy entry, beside single deletes onto the lists: whatever subset of those
     * epochs' writes lands, or whichever is torn, the recovered volume checks clean, every key holds a
     * value it was given, and nothing is freed twice or leaked.
     */
    @Test
    void crashesInTransactionsFreeingAdjacentValuesNeitherFreeTwiceNorLeak() {
        Map<Integer, List<byte[]>> given = new HashMap<>();
        crashesInside(SEED + 2, (v, none) -> { }, (v, none) -> {
            for (int from = 0; from < KEYS; from += 40) {
                try (WriteTransaction tx = v.begin(from % 80 == 0 ? Durability.SYNC : Durability.NONE)) {
                    for (int k = from; k < from + 40; k++) {
                        if (k % 40 < 30) {
                            assertTrue(tx.delete(none, key(k)));
                        } else { // a replacement: its old value freed beside the deleted ones
                            byte[] val = value(k, 1);
                            given.get(k).add(val);
                            tx.put(none, key(k), val);
                        }
                    }
                    tx.commit();
                }
                none.delete(key(from + 39)); // a single delete onto a list between the transactions
            }
            v.sync();
        }, given);
    }

    /** {@link #crashesInside}'s steps: {@code none} is the table {@code "t"} with {@code NONE} commits. */
    private interface Step {
        void run(Volume v, Table none);
    }

    /** Keys {@link #crashesInside} puts. */
    private static final int KEYS = 240;

    /**
     * On a recorded volume: puts keys {@code [0, KEYS)} their first values one at a time (NONE, noted in
     * {@code given}) and syncs, runs {@code prepare}, then {@code recorded}; then recovers 30 crash states
     * sampled inside {@code recorded}'s epochs, each checked by {@link #recoverAndVerify}. Returns how
     * many of them left entries on a list for the mount to drain.
     */
    private static int crashesInside(long seed, Step prepare, Step recorded, Map<Integer, List<byte[]>> given) {
        Random rnd = new Random(seed);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            int before, after;
            long spareAtStart;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                v.sync();
                spareAtStart = spareWith(v, t);
                Table none = t.withDurability(Durability.NONE);
                for (int k = 0; k < KEYS; k++) {
                    byte[] val = value(k, 0);
                    given.computeIfAbsent(k, x -> new ArrayList<>()).add(val);
                    none.put(key(k), val);
                }
                v.sync();
                prepare.run(v, none);
                before = rec.flushCount();
                recorded.run(v, none);
                after = rec.flushCount();
            }
            int drainedAtMount = 0;
            for (int s = 0; s < 30; s++) {
                int k = before - 1 + rnd.nextInt(after - before + 1);
                drainedAtMount += recoverAndVerify(rec, TableCrashTest.sampleAfter(rec, k, rnd), KEYS, given, spareAtStart);
            }
            return drainedAtMount;
        }
    }

    /**
     * A drain transaction with room for one range frees the lowest and leaves the list holding exactly the
     * entries it did not free, sorted; the next drains the rest.
     */
    @Test
    void aDrainTransactionClearsExactlyTheEntriesItFreed() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Table none = t.withDurability(Durability.NONE);
            for (int k = 0; k < 40; k++) {
                none.put(key(k), value(k, 0));
            }
            v.sync();
            for (int k = 38; k >= 0; k -= 2) { // scattered, listed in descending order
                assertTrue(none.delete(key(k)));
            }
            AllocationGroup ag = null;
            for (int g = 0; g < v.geometry().agCount(); g++) {
                if (v.group(g).pendingCount() > 1) {
                    ag = v.group(g);
                }
            }
            assertTrue(ag != null, "a group with entries");
            FreeSpace space = ag.space;
            int n = space.pendingCount();
            long[] sorted = new long[n];
            for (int i = 0; i < n; i++) {
                sorted[i] = space.pendingEntry(i);
            }
            java.util.Arrays.sort(sorted);
            long free = ag.freeBlockCount();
            BusyExtents.Entry[] busy = new BusyExtents.Entry[n];
            try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
                assertEquals(1, space.drain(txn, 1, busy), "room for one range: the first always goes");
                busy[0].settle(txn.commit());
            }
            assertEquals(n - 1, space.pendingCount());
            for (int i = 0; i < n - 1; i++) {
                assertEquals(sorted[i + 1], space.pendingEntry(i), "entry " + i);
            }
            assertEquals(free + FreeSpace.extentLength(sorted[0]), ag.freeBlockCount());
            VolumeFixtures.assertChecked(v.namespace());
            v.sync();
            assertEquals(0, space.pendingCount());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A drain of the pending-free list whose free list needs a refill while every free block of the group
     * is busy (freed, not durable yet): the refill's wait forces the log and goes on. It used to drain the
     * pending list first, which needed that refill again: the recursion overflowed the stack (a sync after
     * 100,000 scattered 16 KiB deletes, one run in three).
     */
    @Test
    void aDrainsRefillFindingEveryFreeBlockBusyForcesInsteadOfDrainingAgain() {
        try (Volume v = Volume.open(oneGroup(), ONE_GROUP)) {
            Staged st = stageEveryFreeBlockBusy(v);
            st.space.drainPending(true); // what a sync does first
            assertEquals(0, st.space.pendingCount(), "the drain went on after the forced refill");
            giveBack(v, st);
        }
    }

    /**
     * The same state met by an allocation's wait for busy blocks inside a journal group (a group commit's
     * free, in a harness of 100,000 scattered 16 KiB deletes): the group's own frees stay busy to its end,
     * so the drain the wait starts with goes only as far as it can without a refill, and the wait goes on
     * to its force. It used to retry the refill and throw NoSpaceException with the group's space pending.
     */
    @Test
    void aWaitForBusyBlocksInsideAJournalGroupDrainsWithoutRefilling() {
        try (Volume v = Volume.open(oneGroup(), ONE_GROUP)) {
            Staged st = stageEveryFreeBlockBusy(v);
            try (var pin = v.journal().pin()) {
                st.space.awaitBusy(0);
            }
            v.sync();
            assertEquals(0, st.space.pendingCount(), "the sync after the group drained the list");
            giveBack(v, st);
        }
    }

    /**
     * The same state met by a write transaction's frees (`TableExtents.freeAll`, inside the commit's
     * journal group): its refills find the group's free space busy until the group ends, so the commit
     * is undone and applied once more after a force and a drain of the pending-free lists, as a commit
     * that met busy space in its allocations is. It used to fail with NoSpaceException (the harness of
     * 100,000 scattered 16 KiB deletes, once the two tests above were fixed).
     */
    @Test
    void aTransactionFreeingValuesWhileEveryFreeBlockIsBusyCommitsAfterItsGroup() {
        try (Volume v = Volume.open(oneGroup(), ONE_GROUP); Table t = v.tables().create("t")) {
            Table none = t.withDurability(Durability.NONE);
            for (int k = 0; k < 12; k++) {
                none.put(key(k), value(k, 0));
            }
            v.sync();
            Staged st = stageEveryFreeBlockBusy(v);
            try (WriteTransaction tx = v.tables().begin(Durability.NONE)) {
                for (int k = 0; k < 12; k += 2) {
                    assertTrue(tx.delete(t, key(k)));
                }
                tx.commit();
            }
            for (int k = 0; k < 12; k++) {
                if (k % 2 == 0) {
                    assertEquals(null, t.get(key(k)), "key " + k);
                } else {
                    assertArrayEquals(value(k, 0), t.get(key(k)), "key " + k);
                }
            }
            giveBack(v, st);
        }
    }

    private static final VolumeOptions ONE_GROUP = VolumeFixtures.OPTIONS.withAgCount(1);

    private static MemoryDevice oneGroup() {
        MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096);
        Volume.format(dev, ONE_GROUP);
        return dev;
    }

    /** What {@link #stageEveryFreeBlockBusy} did, for {@link #giveBack}. */
    private record Staged(FreeSpace space, List<long[]> taken, Set<Long> released, List<Long> popped) {
    }

    /**
     * Behind the allocator's back: every usable block of the volume's one group taken (extents of device
     * block and length), eight of them put on the pending list and others freed, busy (committed, not
     * durable), and the free list popped below its reserve.
     */
    private static Staged stageEveryFreeBlockBusy(Volume v) {
        AllocationGroup ag = v.group(0);
        FreeSpace space = ag.space;
        List<long[]> taken = new ArrayList<>();
        for (int want : new int[] {64, 4, 1}) {
            for (boolean more = true; more; ) {
                if (space.needsRefill()) {
                    space.refillFreeList();
                }
                try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
                    long[] at = space.lockForRelease(txn) ? space.findUsable(txn, 1, want) : null;
                    more = at != null;
                    if (more) {
                        space.takeRange(txn, at[0], at[1]);
                        taken.add(new long[] {ag.start + FreeSpace.extentStart(at[1]), FreeSpace.extentLength(at[1])});
                        txn.commit();
                    }
                }
            }
        }
        v.sync();
        try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
            assertTrue(space.lockForRelease(txn), "the free list holds its reserve");
            assertEquals(null, space.findUsable(txn, 1, 1), "every usable block taken");
        }
        List<long[]> pending = new ArrayList<>(), busy = new ArrayList<>();
        for (int i = 0; i < taken.size(); i++) {
            if (i % 7 == 0 && pending.size() < 8) {
                pending.add(taken.get(i));
            } else if (i % 2 == 0) {
                busy.add(taken.get(i));
            }
        }
        try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
            assertTrue(space.lockForRelease(txn));
            for (long[] e : pending) {
                assertTrue(space.deferData(txn, e[0], (int) e[1]));
            }
            txn.commit();
        }
        for (long[] e : busy) {
            try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
                assertEquals(AllocOutcome.DONE, space.releaseData(txn, e[0], (int) e[1]));
                BusyExtents.Entry entry = space.freedData(txn);
                entry.settle(txn.commit());
            }
        }
        List<Long> popped = new ArrayList<>();
        try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
            assertTrue(space.lockForRelease(txn));
            while (ag.agfl.holds(AllocationGroup.RESERVE)) {
                popped.add(ag.agfl.allocate(txn));
            }
            txn.commit();
        }
        assertTrue(space.needsRefill() && space.pendingCount() == pending.size() && space.busyDataBlocks() > 0,
                "staged: a refill needed, " + space.pendingCount() + " entries pending, every free block busy");
        Set<Long> released = new HashSet<>();
        pending.forEach(e -> released.add(e[0]));
        busy.forEach(e -> released.add(e[0]));
        return new Staged(space, taken, released, popped);
    }

    /** Returns what {@link #stageEveryFreeBlockBusy} took and did not free, and checks the volume: every block accounted for. */
    private static void giveBack(Volume v, Staged st) {
        AllocationGroup ag = v.group(0);
        try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
            assertTrue(st.space.lockForRelease(txn));
            for (long b : st.popped) {
                ag.agfl.free(txn, b);
            }
            txn.commit();
        }
        for (long[] e : st.taken) {
            if (st.released.contains(e[0])) {
                continue;
            }
            VolumeFixtures.giveBack(v, e[0], (int) e[1]);
        }
        v.sync();
        VolumeFixtures.assertChecked(v.namespace());
    }

    /** Free blocks, the free lists' and the table tree's blocks: what deleting every key and a sync bring back to its start. */
    private static long spareWith(Volume v, Table t) {
        return TableExtentTest.spare(v) + t.stats().bytes() / 4096;
    }

    /** {@code ops} single puts and deletes of {@code keys} keys, SYNC, ASYNC or NONE, now and then a sync. */
    private static void churn(Volume v, Table t, Random rnd, int keys, int ops, Map<Integer, List<byte[]>> given) {
        boolean[] present = new boolean[keys];
        for (int op = 0; op < ops; op++) {
            Table w = t.withDurability(Durability.values()[rnd.nextInt(3)]);
            int k = rnd.nextInt(keys);
            if (!present[k] || rnd.nextInt(4) == 0) {
                byte[] val = value(k, op);
                given.computeIfAbsent(k, x -> new ArrayList<>()).add(val);
                w.put(key(k), val);
                present[k] = true;
            } else {
                assertTrue(w.delete(key(k)));
                present[k] = false;
            }
            if (rnd.nextInt(150) == 0) {
                v.sync();
            }
        }
    }

    /**
     * Recovers crash {@code state}: the volume checks clean with the lists drained, every key holds a value
     * it was given, and once every key is deleted and the volume synced its free space is {@code spareAtStart}.
     * Returns the groups whose lists the mount found entries on.
     */
    private static int recoverAndVerify(RecordingDevice rec, RecordingDevice.CrashState state, int keys,
                                        Map<Integer, List<byte[]>> given, long spareAtStart) {
        String where = "seed " + SEED + ", crash " + state;
        int drained = 0;
        try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), where + ": " + report);
            assertEquals(0L, pendingCount(v), where + ": mount drained the lists");
            for (int g = 0; g < v.geometry().agCount(); g++) {
                drained += v.group(g).pendingAtOpen > 0 ? 1 : 0;
            }
            try (Table t = v.tables().open("t")) {
                for (int k = 0; k < keys; k++) {
                    byte[] got = t.get(key(k));
                    if (got != null) {
                        boolean known = given.getOrDefault(k, List.of()).stream().anyMatch(g -> java.util.Arrays.equals(g, got));
                        assertTrue(known, where + ": key " + k + " holds a value it was never given");
                        assertTrue(t.delete(key(k)));
                    }
                }
                v.sync();
                assertEquals(spareAtStart, spareWith(v, t), where + ": free space after every key is deleted");
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
        return drained;
    }
}
