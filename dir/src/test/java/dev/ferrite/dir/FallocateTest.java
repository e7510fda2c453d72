package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.List;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** fallocate's modes (contents, size, block counts, free space), fdatasync's journal forces and concurrent appends. */
class FallocateTest extends FileTestBase {
    private static final int PUNCH = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

    /** Blocks {@code [from, to)} of {@code f} hold generation {@code gen} (0: zeros). */
    private void assertBlocks(Handle f, long from, long to, int gen) {
        MemorySegment r = buffer((int) (to - from));
        assertEquals(r.byteSize(), ns.read(f, from * BS, r));
        assertStamped(r, from * BS, gen);
    }

    /** {@code f}'s block count is what it took from free space since {@code start}, and the checker agrees. */
    private void assertAccounted(Handle f, long start, long blocks) {
        assertEquals(blocks, ns.stat(f).blocks(), "the inode's block count");
        assertEquals(start - blocks, free(), "free blocks");
        VolumeFixtures.assertChecked(ns);
    }

    @Test
    void allocateMapsHolesUnwrittenAndExtendsTheSizeUnlessKeepSize() {
        long start = free();
        try (Handle f = written("f", 2, 1)) {
            ns.fallocate(f, 0, 0, 8 * BS); // blocks 0-1 stay as they are
            assertEquals(8 * BS, ns.stat(f).size());
            assertAccounted(f, start, 8);
            assertBlocks(f, 0, 2, 1);
            assertBlocks(f, 2, 8, 0);
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 10 * BS, 3 * BS); // past the end: the size stays
            assertEquals(8 * BS, ns.stat(f).size());
            assertAccounted(f, start, 11);
            ns.fallocate(f, 0, 0, 13 * BS); // only the holes 8-9 are new
            assertEquals(13 * BS, ns.stat(f).size());
            assertAccounted(f, start, 13);
            assertBlocks(f, 2, 13, 0);
            ns.write(f, 4 * BS, stamped(4 * BS, 2, 2)); // into unwritten blocks: no new space
            assertAccounted(f, start, 13);
            assertBlocks(f, 4, 6, 2);
            assertBlocks(f, 6, 13, 0);
        }
        ns.unlink("/f");
        assertEquals(start, free());
    }

    @Test
    void punchHoleFreesWrittenAndUnwrittenBlocksAndKeepsTheSize() {
        long start = free();
        try (Handle f = written("f", 8, 1)) {
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 8 * BS, 4 * BS);
            ns.fallocate(f, PUNCH, 2 * BS, 3 * BS); // the middle of a written extent: it splits
            assertEquals(8 * BS, ns.stat(f).size());
            assertAccounted(f, start, 9);
            assertBlocks(f, 0, 2, 1);
            assertBlocks(f, 2, 5, 0);
            assertBlocks(f, 5, 8, 1);
            ns.fallocate(f, PUNCH, 7 * BS, 4 * BS); // a written block and three of the four unwritten ones past the end
            assertAccounted(f, start, 5);
            ns.fallocate(f, PUNCH, 20 * BS, BS); // nothing mapped: nothing changes
            assertAccounted(f, start, 5);
            ns.write(f, 3 * BS, stamped(3 * BS, 1, 2)); // the hole fills again
            assertAccounted(f, start, 6);
            assertBlocks(f, 3, 4, 2);
            assertBlocks(f, 4, 5, 0);
        }
        ns.unlink("/f");
        assertEquals(start, free(), "punch then unlink gives every block back");
    }

    @Test
    void zeroRangeUnwritesWrittenBlocksAndAllocatesHoles() {
        long start = free();
        try (Handle f = written("f", 8, 1)) {
            ns.fallocate(f, FALLOC_FL_ZERO_RANGE, 6 * BS, 4 * BS); // 6-7 unwritten, 8-9 allocated, the size 10 blocks
            assertEquals(10 * BS, ns.stat(f).size());
            assertAccounted(f, start, 10);
            assertBlocks(f, 0, 6, 1);
            assertBlocks(f, 6, 10, 0);
            ns.fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, BS, 2 * BS); // inside one extent: it splits in three
            assertEquals(10 * BS, ns.stat(f).size());
            assertAccounted(f, start, 10);
            assertBlocks(f, 0, 1, 1);
            assertBlocks(f, 1, 3, 0);
            assertBlocks(f, 3, 6, 1);
            ns.fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 9 * BS, 3 * BS); // past the end: the size stays
            assertEquals(10 * BS, ns.stat(f).size());
            assertAccounted(f, start, 12);
        }
        ns.unlink("/f");
        assertEquals(start, free());
    }

    @Test
    void badInputGetsItsErrnoAndChangesNothing() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 4, 1));
            assertErrno(Errno.EOPNOTSUPP, h -> ns.fallocate(h, 0x40, 0, BS), f);
            assertErrno(Errno.EINVAL, h -> ns.fallocate(h, FALLOC_FL_PUNCH_HOLE, 0, BS), f);
            assertErrno(Errno.EINVAL, h -> ns.fallocate(h, PUNCH | FALLOC_FL_ZERO_RANGE, 0, BS), f);
            assertErrno(Errno.EINVAL, h -> ns.fallocate(h, 0, 0, 0), f);
            assertErrno(Errno.EINVAL, h -> ns.fallocate(h, 0, -BS, BS), f);
            assertErrno(Errno.EFBIG, h -> ns.fallocate(h, 0, Namespace.MAX_FILE_SIZE, BS), f);
            assertErrno(Errno.EFBIG, h -> ns.fallocate(h, FALLOC_FL_KEEP_SIZE, BS, Long.MAX_VALUE & -BS), f);
        }
        try (Handle d = ns.mkdir(root, "d", 0755)) {
            e(Errno.EISDIR, () -> ns.fallocate(d, 0, 0, BS));
        }
        Handle closed = ns.create(root, "g", 0644, true);
        closed.close();
        e(Errno.EBADF, () -> ns.fallocate(closed, 0, 0, BS));
    }

    private static void e(int errno, Runnable op) {
        assertEquals(errno, assertThrows(NamespaceException.class, op::run).errno());
    }

    @Test
    void aSplitOrAHoleTheExtentListCannotHoldMakesAnExtentTree() {
        int capacity = ExtentFormat.capacity(InodeFormat.inlineCapacity(BS));
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            for (int i = 0; i < capacity; i++) {
                ns.write(f, 4L * i * BS, stamped(4L * i * BS, 3, 1)); // extents of three blocks, a hole between
            }
            ns.fallocate(f, PUNCH, BS, BS); // splits an extent: one too many for the record
            assertEquals(InodeFormat.FORK_TREE, (int) ns.records.readRecord(f.ino(), InodeFormat::fork));
            ns.fallocate(f, FALLOC_FL_ZERO_RANGE, 5 * BS, BS);
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 3 * BS, BS);
            assertEquals(capacity + 4, ns.extents.all(f.ino()).count());
            assertBlocks(f, 0, 1, 1);
            assertBlocks(f, 1, 2, 0);
            assertBlocks(f, 2, 3, 1);
            assertBlocks(f, 3, 4, 0);
            assertBlocks(f, 4, 5, 1);
            assertBlocks(f, 5, 6, 0);
            assertBlocks(f, 6, 7, 1);
            long tree = ns.stat(f).blocks() - 3L * capacity; // the tree and its reserve: one data block punched, one allocated
            assertTrue(tree > 0, "tree blocks " + tree);
            assertAccounted(f, start, 3L * capacity + tree);
            ns.fallocate(f, PUNCH, 0, 4L * capacity * BS); // everything goes, the tree too
            assertEquals(InodeFormat.FORK_EMPTY, (int) ns.records.readRecord(f.ino(), InodeFormat::fork));
            assertAccounted(f, start, 0);
        }
    }

    @Test
    void aWriteWhoseConversionSplitsAnExtentTheListCannotHoldMakesAnExtentTreeFirst() {
        int capacity = ExtentFormat.capacity(InodeFormat.inlineCapacity(BS));
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.fallocate(f, 0, 3 * BS, 2 * BS); // blocks 3-4 unwritten
            ns.write(f, 0, stamped(0, 3, 1)); // blocks 0-2 written, elsewhere on the device: no merging with 3
            for (int i = 0; i < capacity - 2; i++) {
                ns.write(f, (6 + 2L * i) * BS, stamped((6 + 2L * i) * BS, 1, 1)); // one-block extents, a hole between
            }
            assertEquals(capacity, ns.records.readRecord(f.ino(), (b, rec) -> ExtentFormat.decode(b, rec, v.geometry())).count());
            // block 2 is overwritten in place, block 3 converted: 4 splits off, one extent too many
            ns.write(f, 2 * BS, stamped(2 * BS, 2, 2));
            assertEquals(InodeFormat.FORK_TREE, (int) ns.records.readRecord(f.ino(), InodeFormat::fork));
            assertBlocks(f, 0, 2, 1);
            assertBlocks(f, 2, 4, 2);
            assertBlocks(f, 4, 5, 0);
        }
    }

    @Test
    void runningOutOfSpaceLeaksNothing() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            assertThrows(NoSpaceException.class, () -> ns.fallocate(f, 0, 0, 4L * VolumeFixtures.BLOCKS * BS));
            assertEquals(start, free(), "more than is free: nothing is promised, nothing allocated");
            // all there is but what the claim holds for the free-space trees' growth: allocated
            ns.fallocate(f, 0, 0, (v.spareBlocks() - AllocationGroup.OP_BLOCKS) * BS);
            long took = start - free();
            assertAccounted(f, start, took);
            ns.truncate(f, 0);
        }
        assertEquals(start, free());
    }

    @Test
    void extentsReportTheMappingWithItsHolesAndUnwrittenPieces() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 8L * BS);
            ns.write(f, 0, stamped(0, 2, 1));
            ns.fallocate(f, PUNCH, 4L * BS, 2L * BS);
            List<FileExtent> x = ns.extents(f, 0, Long.MAX_VALUE);
            assertEquals(3, x.size(), x.toString());
            long dev = x.get(0).deviceOffset();
            assertEquals(new FileExtent(0, 2L * BS, dev, false), x.get(0));
            assertEquals(new FileExtent(2L * BS, 2L * BS, dev + 2L * BS, true), x.get(1));
            assertEquals(new FileExtent(6L * BS, 2L * BS, dev + 6L * BS, true), x.get(2));
            assertEquals(List.of(x.get(1)), ns.extents(f, 3L * BS, 1), "a range inside one extent");
            assertEquals(List.of(), ns.extents(f, 4L * BS, 2L * BS), "the punched hole");
            assertEquals(Errno.EINVAL, assertThrows(NamespaceException.class, () -> ns.extents(f, -1, 1)).errno());
            assertEquals(Errno.EISDIR, assertThrows(NamespaceException.class, () -> ns.extents(root, 0, 1)).errno());
        }
    }

    @Test
    void fdatasyncForcesTheJournalOnlyForSizeOrExtentChanges() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 4, 1));
            ns.fsync(f);
            long forces = v.journalStats().forces();
            ns.write(f, BS, stamped(BS, 2, 2)); // in place
            ns.fdatasync(f);
            ns.setattr(f, 0600, 0, 0, 1, 2); // times and mode only
            ns.fdatasync(f);
            assertEquals(forces, v.journalStats().forces(), "an overwrite in place and a setattr force nothing");
            ns.fsync(f);
            assertEquals(forces + 1, v.journalStats().forces(), "fsync forces the setattr");
            ns.write(f, 4 * BS, stamped(4 * BS, 1, 3)); // extends
            ns.fdatasync(f);
            assertEquals(forces + 2, v.journalStats().forces(), "an extending write is forced");
            ns.fallocate(f, PUNCH, 0, BS);
            ns.fdatasync(f);
            assertEquals(forces + 3, v.journalStats().forces(), "a punch is forced");
        }
    }

    @Test
    void concurrentAppendsEachLandWholeAndOnce() throws InterruptedException {
        int threads = 4, appends = 40;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            runThreads(threads, "appender", (me, mine) -> {
                for (int k = 0; k < appends; k++) {
                    int blocks = 1 + k % 3;
                    MemorySegment src = mine.allocate((long) blocks * BS, BlockDevice.BUFFER_ALIGNMENT);
                    for (long w = 0; w < src.byteSize(); w += 8) {
                        src.set(U64, w, (long) me << 48 | (long) k << 32 | w); // writer, record, place in it
                    }
                    assertEquals(0, ns.append(f, src) % BS);
                }
            });
            long total = 0;
            for (int k = 0; k < appends; k++) {
                total += (long) threads * (1 + k % 3) * BS;
            }
            assertEquals(total, ns.stat(f).size());
            MemorySegment r = arena.allocate(total, BlockDevice.BUFFER_ALIGNMENT);
            assertEquals(total, ns.read(f, 0, r));
            boolean[][] seen = new boolean[threads][appends];
            for (long at = 0; at < total; ) { // records one after another, each whole
                long w0 = r.get(U64, at);
                int t = (int) (w0 >>> 48), k = (int) (w0 >>> 32 & 0xffff);
                assertEquals(0, w0 & 0xffff_ffffL, "a record starts at " + at);
                assertTrue(!seen[t][k], "record " + k + " of writer " + t + " appears twice");
                seen[t][k] = true;
                long len = (1 + k % 3) * (long) BS;
                for (long w = 0; w < len; w += 8) {
                    assertEquals((long) t << 48 | (long) k << 32 | w, r.get(U64, at + w), "record " + k + " of writer " + t);
                }
                at += len;
            }
        }
    }
}
