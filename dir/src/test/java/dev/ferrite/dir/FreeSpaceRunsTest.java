package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A batch's run of medium values ({@link FreeSpace#allocRuns}) where no free extent holds the rest it
 * wants: it takes the small extents in the order of the tree by length, each looked up once, where it
 * looked for one holding the rest and then for the smallest again for every extent it took.
 */
class FreeSpaceRunsTest {
    @Test
    void aRunFromSmallExtentsLooksEachUpOnce() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            AllocationGroup ag = v.group(0);
            int holes = 40;
            long[] taken = allocate(v, ag, 2 * holes);
            for (int i = 0; i < taken.length; i += 2) { // every other one: holes of 4 blocks between those kept
                try (Txn txn = begin(v, ag, ag.blockItems())) {
                    assertEquals(AllocOutcome.DONE, ag.releaseData(txn, taken[i], 4));
                    ag.freedData(txn).settle(txn.commit());
                }
            }
            v.sync(); // the holes stop being busy
            int largest = AgTreeFormat.cntLength(MemorySegment.ofArray(ag.space.cnt.lastKey()));
            long[] into = new long[2 * TableExtents.Run.SEGMENTS];
            long looks = ag.space.lengthLooks;
            int n;
            try (Txn txn = begin(v, ag, ag.runsItems())) {
                n = ag.allocRuns(txn, 4, largest + 4 * holes, ag.runsItems(), into); // more than the largest extent holds
                txn.commit();
            }
            looks = ag.space.lengthLooks - looks;
            assertTrue(n >= 8, "extents taken: " + n);
            for (int i = 0; i < n; i++) {
                assertEquals(4, into[2 * i + 1], "extent " + i + " is a hole");
            }
            assertTrue(looks <= n + 2, n + " extents taken in " + looks + " lookups");
        }
    }

    /**
     * Allocations of a value's length while the holes of that length are busy (freed, not yet durable), as
     * single overwrites of medium values leave them: the first few allocations pass the busy holes a few at a
     * time, noting how far they got, and each one after starts there, where every allocation looked at the
     * same busy holes again before it fell back on the largest extent (ten lookups in the tree by length
     * each). No allocation takes a busy block.
     */
    @Test
    void allocationsPassTheBusyHolesOnce() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            AllocationGroup ag = v.group(0);
            int holes = 40, allocations = 100;
            long[] taken = allocate(v, ag, 2 * holes);
            v.sync();
            long lastFree = 0;
            for (int i = 0; i < taken.length; i += 2) { // every other one: busy holes of 4 blocks between those kept
                try (Txn txn = begin(v, ag, ag.blockItems())) {
                    assertEquals(AllocOutcome.DONE, ag.releaseData(txn, taken[i], 4));
                    ag.freedData(txn).settle(lastFree = txn.commit());
                }
            }
            long looks = ag.space.lengthLooks;
            for (int i = 0; i < allocations; i++) {
                long b = allocate(v, ag, 1)[0];
                for (int h = 0; h < taken.length && v.cache().journal().durableSeq() < lastFree; h += 2) { // busy till then
                    assertTrue(b + 4 <= taken[h] || b >= taken[h] + 4, "allocation " + i + " took [" + b + ", +4), which overlaps busy hole " + taken[h]);
                }
            }
            looks = ag.space.lengthLooks - looks;
            assertTrue(looks <= 2L * allocations + holes, allocations + " allocations past " + holes + " busy holes in " + looks + " lookups");
        }
    }

    /** The first blocks of {@code n} extents of 4 blocks, each allocated in a transaction of its own. */
    private static long[] allocate(Volume v, AllocationGroup ag, int n) {
        long[] taken = new long[n];
        for (int i = 0; i < n; i++) {
            try (Txn txn = begin(v, ag, ag.blockItems())) {
                assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                taken[i] = ag.allocatedBlock(txn);
                txn.commit();
            }
        }
        return taken;
    }

    private static Txn begin(Volume v, AllocationGroup ag, int items) {
        if (ag.needsRefill()) {
            ag.refillFreeList();
        }
        return Txn.begin(v.cache(), items);
    }
}
