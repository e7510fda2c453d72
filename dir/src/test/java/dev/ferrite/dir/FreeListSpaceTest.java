package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.io.internal.OnDisk.U64;
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

    /**
     * The corner the set-aside pool leaves uncovered, forced: the pool dry from the start, so that every node
     * the free-space trees take under the punches below lowers the spare count, with b's dirty pages promised
     * every spare block after each punch. What those pages were promised may then not be there at fsync.
     * Whatever the write-back finds, the failure must be clean: each page of b reads back as written or as
     * a hole (never another file's bytes), fsync reports NO_SPACE at most once, the page cache gives back
     * every promise, and the checker, which accounts for every block, stays clean after every file is gone.
     * (As written, promises end 3 blocks past the spare ones and the fsync still succeeds: the map blocks
     * the pages promised for their file's extents are more than its write-back takes.)
     */
    @Test
    void aDrySetAsidePoolFailsWriteBackCleanly() throws InterruptedException {
        v.counters().setAside(0);
        int files = 125;
        for (int k = 0; k < files; k++) {
            written("s" + k, SMALL, 1).close();
        }
        int hogs = 0;
        for (; v.spareBlocks() > 40; hogs++) {
            try (Handle hog = ns.create(root, "hog" + hogs, 0644, true)) {
                ns.fallocate(hog, 0, 0, Math.min(v.spareBlocks() - 40, 16) * BS);
            }
        }
        long worst = Long.MIN_VALUE;
        long at = 0;
        int failures = 0;
        int refusedPunches = 0;
        int refusedWrites = 0;
        try (Handle b = ns.create(root, "b", 0644, true)) {
            for (int blk = 1; blk < SMALL - 4; blk += 2) {
                for (int k = 0; k < files; k++) {
                    try (Handle f = ns.open(root, "s" + k)) {
                        ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) blk * BS, BS);
                    } catch (NoSpaceException refused) { // a punch that splits an extent claims room for the trees first
                        refusedPunches++;
                    }
                    worst = Math.max(worst, excess());
                    try {
                        while (v.spareBlocks() - v.counters().promised() > 0) {
                            // a heap copy: not aligned for the direct path, so into dirty pages, which promise their blocks
                            ns.write(b, at, MemorySegment.ofArray(stamped(at, 1, 3).toArray(ValueLayout.JAVA_BYTE)));
                            at += BS;
                        }
                    } catch (NoSpaceException full) { // the page wants its file's map blocks too: nothing written
                        refusedWrites++;
                    }
                }
            }
            String seen = "(promised past spare by " + worst + " at worst, " + refusedPunches + " punches and " + refusedWrites
                    + " writes refused)";
            assertTrue(worst > 0, "with the pool dry, the trees' growth should leave promises past the spare blocks " + seen);
            for (int round = 0; round < 2; round++) {
                try {
                    ns.fsync(b);
                } catch (NoSpaceException expected) {
                    failures++;
                }
            }
            assertTrue(failures <= 1, "fsync reported the failed write-back " + failures + " times " + seen);
            MemorySegment got = buffer(1);
            long size = ns.stat(b).size();
            assertTrue(size <= at, "size " + size + " past the " + at + " bytes written " + seen);
            for (long off = 0; off < size; off += BS) {
                ns.read(b, off, got);
                assertStamped(got, off, got.get(U64, 0) == 0 ? 0 : 3);
            }
        }
        ns.unlink(root, "b");
        for (int k = 0; k < files; k++) {
            ns.unlink(root, "s" + k);
        }
        for (int k = 0; k < hogs; k++) {
            ns.unlink(root, "hog" + k);
        }
        ns.sync();
        assertTrue(v.pageCache().awaitClosedFinished(10_000));
        assertEquals(0, v.pageCache().stats().reservedBlocks());
        assertEquals(0, v.counters().promised());
        CheckReport report = ns.check();
        assertTrue(report.clean(), failures + " failed write-backs: " + report);
    }
}
