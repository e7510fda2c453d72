package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A tree's header and root from two groups (issue 16): on a full volume whose free space is down to one
 * block a group past what each holds back, while a file's dirty pages hold blocks promised (which a
 * set-aside pool drawn dry lets happen), the write-back that turns the file's extent list into a tree
 * takes a block of its pair from each of two groups. Before, no group having two, its fsync failed with
 * "no allocation group has 2 free blocks for the tree". The state is staged behind the allocator's back:
 * every usable block but one a group taken, and given back at the end for the checker.
 */
@ExtendWith(TestSeed.class)
class TreePairApartTest {
    private static final int BS = 4096;
    private static final int GROUPS = 16;
    private static final VolumeOptions OPTIONS = VolumeFixtures.OPTIONS.withAgCount(GROUPS);

    @Test
    void aFileConvertedWhereEachGroupHasOneBlockTakesItsPairFromTwo() {
        try (MemoryDevice dev = formatted()) {
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                try (Handle root = ns.openRoot()) {
                    try (Handle f = fullListWithADirtyHole(v, root)) {
                        List<long[]> taken = leaveOneBlockAGroup(v);
                        ns.fsync(f);
                        assertEquals(26, ns.extents(f, 0, Long.MAX_VALUE).size(), "the list became a tree");
                        assertHolds(ns, f, true, "");
                        directoryFillsUntilItsConversionFails(ns, root, f);
                        taken.forEach(e -> VolumeFixtures.giveBack(v, e[0], (int) e[1]));
                    }
                    v.sync();
                    VolumeFixtures.assertChecked(ns);
                }
            }
        }
    }

    /**
     * The same conversion crashed at every flush from the staging's on, two samples each (a subset of the
     * next epoch's writes landed in any order, the last torn half the time): recovered, the staged blocks
     * given back, each checks clean, the file keeps its old blocks, and the new one reads as its bytes once
     * its fsync returned, before that as them or as the hole it was.
     */
    @Test
    void crashesAroundAConversionFromTwoGroupsRecoverClean() {
        Random rnd = new Random(SEED);
        List<long[]> taken;
        int firstFlush, fsynced, lastFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(formatted())) {
            try (Volume v = Volume.open(rec, OPTIONS)) {
                Namespace ns = v.namespace();
                try (Handle root = ns.openRoot(); Handle f = fullListWithADirtyHole(v, root)) {
                    taken = leaveOneBlockAGroup(v);
                    v.journal().forceAll(); // the staging durable, the page still dirty
                    firstFlush = rec.flushCount();
                    ns.fsync(f);
                    fsynced = rec.flushCount();
                    assertTrue(fsynced > firstFlush, "the fsync flushed");
                    assertEquals(26, ns.extents(f, 0, Long.MAX_VALUE).size(), "the list became a tree");
                }
            }
            lastFlush = rec.flushCount();
            for (int k = firstFlush; k < lastFlush; k++) {
                for (int sample = 0; sample < 2; sample++) {
                    RecordingDevice.CrashState state = CrashTest.sampledCrash(rec, rnd, k);
                    String where = "crash " + state + " after flush " + k + ", seed " + SEED;
                    try (MemoryDevice image = rec.materialize(state); Volume v = Volume.open(image, OPTIONS)) {
                        taken.forEach(e -> VolumeFixtures.giveBack(v, e[0], (int) e[1]));
                        Namespace ns = v.namespace();
                        CheckReport report = ns.check();
                        assertTrue(report.clean(), where + ":\n" + report);
                        try (Handle f = ns.open("/f")) {
                            assertHolds(ns, f, k >= fsynced - 1, where);
                        }
                    }
                }
            }
        }
    }

    /** The seed of the crash samples: {@code -Dferrite.seed}, else fixed. */
    private static final long SEED = TestSeed.get(0x9A1F_A9A7L);

    private static MemoryDevice formatted() {
        MemoryDevice dev = MemoryDevice.create(4L * VolumeFixtures.BLOCKS, BS);
        Volume.format(dev, OPTIONS);
        return dev;
    }

    /**
     * File {@code f} of 60 blocks, every other one of its first 48 punched (25 extents: the inline list
     * full), synced, and block 3, a hole, written again: a dirty page whose write-back makes the 26th
     * extent, and so a tree. Returned open.
     */
    private static Handle fullListWithADirtyHole(Volume v, Handle root) {
        Namespace ns = v.namespace();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(pattern(60 * BS, 1)));
            ns.fsync(f);
        }
        Handle f = ns.open(root, "f"); // after the last close trimmed the preallocation
        for (int b = 1; b < 48; b += 2) {
            ns.fallocate(f, Namespace.FALLOC_FL_PUNCH_HOLE | Namespace.FALLOC_FL_KEEP_SIZE, (long) b * BS, BS);
        }
        assertEquals(25, ns.extents(f, 0, Long.MAX_VALUE).size(), "the inline list full");
        v.sync(); // the punched blocks no longer busy
        ns.write(f, 3L * BS, MemorySegment.ofArray(pattern(BS, 2)));
        return f;
    }

    /** {@code f} holds its first block as written and block 3 as rewritten, or, unless {@code durable}, as the hole it was. */
    private static void assertHolds(Namespace ns, Handle f, boolean durable, String where) {
        byte[] head = new byte[BS];
        ns.read(f, 0, MemorySegment.ofArray(head));
        assertArrayEquals(Arrays.copyOf(pattern(60 * BS, 1), BS), head, where + ": block 0");
        byte[] got = new byte[BS];
        ns.read(f, 3L * BS, MemorySegment.ofArray(got));
        if (durable || !Arrays.equals(got, new byte[BS])) {
            assertArrayEquals(pattern(BS, 2), got, where + ": block 3");
        }
    }

    /**
     * A directory's conversion on the same volume claims its pair from the spare count first, which the
     * staging left short: links go in while its inline area holds them, then the one that needs a tree
     * fails with NoSpaceException, changing nothing (a claimer takes no pair from two groups either).
     */
    private static void directoryFillsUntilItsConversionFails(Namespace ns, Handle root, Handle target) {
        try (Handle d = ns.mkdir(root, "d", 0755)) {
            int k = 0;
            try {
                for (; k < 400; k++) {
                    ns.link(target, d, "a-name-long-enough-to-fill-the-inline-area-" + k);
                }
            } catch (NoSpaceException full) {
                assertTrue(k > 0, "no link fitted inline");
            }
            assertTrue(k < 400, "the directory became a tree with no spare blocks to claim");
            assertEquals(k, ns.dirs.allEntries(d.ino()).size());
            for (int i = 0; i < k; i++) {
                ns.unlink(d, "a-name-long-enough-to-fill-the-inline-area-" + i);
            }
        }
        ns.rmdir(root, "d");
    }

    /** {@code n} bytes, each its index mixed with {@code gen}. */
    private static byte[] pattern(int n, int gen) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + gen * 7 + (i >>> 12));
        }
        return b;
    }

    /**
     * Behind the allocator's back: takes every usable block of each group but one past what it holds back
     * (extents of device block and length), so that no group can give a pair; at least three groups keep
     * their one, and none more.
     */
    private static List<long[]> leaveOneBlockAGroup(Volume v) {
        List<long[]> taken = new ArrayList<>();
        int ones = 0;
        for (int g = 0; g < GROUPS; g++) {
            AllocationGroup ag = v.group(g);
            FreeSpace space = ag.space;
            for (boolean more = true; more; ) {
                if (space.needsRefill()) {
                    space.refillFreeList();
                }
                long spare = space.freeBlockCount() - space.heldBack() - 1; // read before the AGF is locked
                try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
                    assertTrue(space.lockForRelease(txn), "group " + g + "'s free list holds its reserve");
                    long[] at = spare > 0 ? space.findUsable(txn, 1, (int) Math.min(64, spare)) : null;
                    more = at != null;
                    if (more) {
                        space.takeRange(txn, at[0], at[1]);
                        taken.add(new long[] {ag.start + FreeSpace.extentStart(at[1]), FreeSpace.extentLength(at[1])});
                        txn.commit();
                    }
                }
            }
            long left = space.freeBlockCount() - space.heldBack();
            assertTrue(left <= 1, "group " + g + " has " + left + " blocks past those it holds back");
            ones += left == 1 ? 1 : 0;
        }
        assertTrue(ones >= 3, ones + " groups with a block to give: the data's block and the pair need three");
        return taken;
    }
}
