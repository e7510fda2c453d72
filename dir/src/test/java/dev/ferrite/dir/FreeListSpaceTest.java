package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The groups' free lists and free-space trees inside the promises of blocks (issue 16): a volume of one
 * group, so that its free-space trees grow to tens of nodes, and a data cache large enough to hold every
 * page the tests promise dirty.
 */
class FreeListSpaceTest extends FileTestBase {
    /** Blocks of each small file, and the odd blocks of its first 46 punched: 24 extents inline, no tree. */
    private static final int SMALL = 50;

    @Override
    BlockDevice device(MemoryDevice formatted) {
        Volume.format(formatted, VolumeFixtures.OPTIONS.withAgCount(1));
        return formatted;
    }

    @Override
    VolumeOptions options() {
        return VolumeFixtures.OPTIONS.withDataCacheBytes(64L << 20).withDirtyExpireMillis(0);
    }

    private long excess() {
        return v.counters().promised() - v.spareBlocks();
    }

    /**
     * Single-block punches of small files' middles, each freeing a block between written ones: a record added
     * to both free-space trees, whose leaves split now and then, their nodes off the group's free list, which
     * is refilled from free space once below its reserve. Beside them, b's dirty pages are topped up after each
     * punch to promise all but 2 of the spare blocks. Nothing in flight, so promises must never exceed the
     * spare blocks: before, each refill (of up to 48 blocks less the list's entries) lowered the spare count
     * with nothing promised for it, and promises exceeded it by 4 at the worst (3 refills).
     */
    @Test
    void freeSpaceTreesGrowingUnderFreesTakeNoPromisedBlock() {
        int files = 125;
        for (int k = 0; k < files; k++) {
            written("s" + k, SMALL, 1).close();
        }
        for (int k = 0; v.spareBlocks() > 40; k++) { // what is left but a few blocks, in a few inline files
            try (Handle hog = ns.create(root, "hog" + k, 0644, true)) {
                ns.fallocate(hog, 0, 0, Math.min(v.spareBlocks() - 40, 16) * BS);
            }
        }
        FreeList list = v.group(0).agfl;
        long worst = Long.MIN_VALUE;
        int refills = 0;
        long at = 0;
        try (Handle b = ns.create(root, "b", 0644, true)) {
            for (int blk = 1; blk < SMALL - 4; blk += 2) {
                for (int k = 0; k < files; k++) {
                    int before = list.count();
                    try (Handle f = ns.open(root, "s" + k)) {
                        ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) blk * BS, BS);
                    }
                    if (list.count() > before) {
                        refills++;
                    }
                    worst = Math.max(worst, excess());
                    while (v.spareBlocks() - v.counters().promised() > 2) {
                        ns.write(b, at, MemorySegment.ofArray(new byte[BS]));
                        at += BS;
                    }
                }
            }
            assertTrue(refills > 0, "the free list was never refilled");
            assertTrue(worst <= 0, "promised blocks exceeded the spare ones by " + worst + " (" + refills + " refills)");
            ns.fsync(b);
        }
        try (Handle b = ns.open(root, "b")) {
            assertEquals(at, ns.stat(b).size());
            byte[] got = new byte[BS];
            ns.read(b, at - BS, MemorySegment.ofArray(got));
            assertArrayEquals(new byte[BS], got);
        }
        assertEquals(0, v.pageCache().stats().reservedBlocks());
        AllocationGroup ag = v.group(0);
        assertEquals(FreeList.lack(ag.agfl.count()) + FreeList.lack(ag.agil.count()), v.counters().listsLack.sum());
    }
}
