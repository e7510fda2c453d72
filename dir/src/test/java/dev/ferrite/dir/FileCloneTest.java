package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Random;

import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Clones ({@link Namespace#cloneRange}) share blocks, counted in the groups' refcount trees: both files
 * read the same bytes, writes to either (direct, buffered, into unwritten blocks) copy on write so that
 * each sees only its own, truncate, punch, zero range and unlink of one leave the other's data, free
 * space comes back exactly once every clone is gone, and bad input changes nothing. Every test ends with
 * the checker (FileTestBase), which counts each block's extents against its refcount.
 */
@ExtendWith(TestSeed.class)
class FileCloneTest extends FileTestBase {
    private static final long SEED = TestSeed.get(16);

    /** Reads all of {@code f}'s {@code blocks} blocks and checks each against {@code gens} (0: zeros). */
    private void assertBlocks(Handle f, int... gens) {
        MemorySegment in = buffer(1);
        for (int b = 0; b < gens.length; b++) {
            assertEquals(BS, ns.read(f, (long) b * BS, in), "block " + b + " of inode " + f.ino());
            assertStamped(in, (long) b * BS, gens[b]);
        }
    }

    private static int[] gens(int blocks, int gen) {
        int[] g = new int[blocks];
        java.util.Arrays.fill(g, gen);
        return g;
    }

    @Test
    void aCloneReadsAsItsSourceAndTakesNoDataBlocks() {
        try (Handle src = written("src", 64, 1); Handle dst = ns.create(root, "dst", 0644, true)) {
            long free = free();
            ns.cloneRange(src, 0, dst, 0, 0);
            assertEquals(free, free(), "a clone shares the source's blocks");
            assertEquals(64L * BS, ns.stat(dst).size());
            assertEquals(ns.stat(src).blocks(), ns.stat(dst).blocks());
            assertBlocks(dst, gens(64, 1));
            assertEquals(ns.extents(src, 0, 64L * BS).getFirst().deviceOffset(), ns.extents(dst, 0, 64L * BS).getFirst().deviceOffset());
            assertTrue((VolumeFixtures.incompat(dev) & SuperblockFormat.INCOMPAT_REFLINK) != 0, "the feature is on disk");
            String dump = VolumeDump.refcounts(v);
            assertTrue(dump.contains("+64) shared by 2"), dump);
        }
    }

    @Test
    void directOverwritesOfEitherCloneCopyOnWrite() {
        try (Handle src = written("src", 16, 1); Handle dst = ns.create(root, "dst", 0644, true)) {
            ns.cloneRange(src, 0, dst, 0, 16L * BS);
            long shared = ns.extents(src, 0, BS).getFirst().deviceOffset();
            ns.write(dst, 5L * BS, stamped(5L * BS, 2, 2));
            ns.write(src, 7L * BS, stamped(7L * BS, 1, 3));
            ns.write(src, 0, stamped(0, 1, 4));
            int[] s = gens(16, 1), d = gens(16, 1);
            d[5] = d[6] = 2;
            s[7] = 3;
            s[0] = 4;
            assertBlocks(src, s);
            assertBlocks(dst, d);
            assertNotEquals(shared, ns.extents(src, 0, BS).getFirst().deviceOffset(), "the write went to a new block");
            assertEquals(shared, ns.extents(dst, 0, BS).getFirst().deviceOffset(), "the other clone keeps the shared one");
            ns.write(dst, 5L * BS, stamped(5L * BS, 1, 5)); // its own block now: in place
            d[5] = 5;
            assertBlocks(dst, d);
        }
    }

    @Test
    void bufferedWritesCopyOnWriteAtWriteBack() {
        try (Handle src = written("src", 8, 1); Handle dst = ns.create(root, "dst", 0644, true)) {
            ns.cloneRange(src, 0, dst, 0, 0);
            byte[] bytes = new byte[100];
            java.util.Arrays.fill(bytes, (byte) 0x7E);
            ns.write(dst, 3L * BS + 10, MemorySegment.ofArray(bytes)); // a partial block through the page cache
            ns.fsync(dst);
            MemorySegment in = buffer(1);
            ns.read(dst, 3L * BS, in);
            for (int at = 0; at < BS; at += 8) {
                if (at + 8 <= 10 || at >= 110) {
                    assertEquals((3L * BS + at) << 16 | 1, in.get(U64, at), "byte " + at + " of the cloned block");
                }
            }
            assertEquals(0x7E, in.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 50));
            assertBlocks(src, gens(8, 1));
        }
    }

    @Test
    void freeingEitherCloneLeavesTheOthersDataAndDeletingAllGivesEveryBlockBack() {
        long start = free();
        try (Handle src = written("src", 32, 1); Handle a = ns.create(root, "a", 0644, true); Handle b = ns.create(root, "b", 0644, true)) {
            ns.cloneRange(src, 0, a, 0, 0);
            ns.cloneRange(a, 0, b, 0, 0); // three files map every block
            ns.write(b, 2L * BS, stamped(2L * BS, 1, 9));
            ns.truncate(src, 4L * BS);
            ns.fallocate(a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8L * BS, 4L * BS);
            int[] ga = gens(32, 1);
            for (int i = 8; i < 12; i++) {
                ga[i] = 0;
            }
            int[] gb = gens(32, 1);
            gb[2] = 9;
            assertBlocks(a, ga);
            assertBlocks(b, gb);
            assertBlocks(src, gens(4, 1));
            ns.fallocate(b, FALLOC_FL_ZERO_RANGE, 20L * BS, 2L * BS);
            gb[20] = gb[21] = 0;
            assertBlocks(b, gb);
            assertBlocks(a, ga);
            VolumeFixtures.assertChecked(ns);
        }
        ns.unlink(root, "src");
        ns.unlink(root, "a");
        assertTrue(free() < start);
        ns.unlink(root, "b");
        assertEquals(start, free(), "every block back once no file maps it");
    }

    @Test
    void unwrittenExtentsStayUnwrittenAndAWriteIntoThemCopies() {
        try (Handle src = ns.create(root, "src", 0644, true); Handle dst = ns.create(root, "dst", 0644, true)) {
            ns.fallocate(src, 0, 0, 8L * BS);
            ns.cloneRange(src, 0, dst, 0, 0);
            List<FileExtent> x = ns.extents(dst, 0, 8L * BS);
            assertTrue(x.stream().allMatch(FileExtent::unwritten), x.toString());
            ns.write(src, 2L * BS, stamped(2L * BS, 1, 3));
            assertBlocks(dst, gens(8, 0));
            int[] s = gens(8, 0);
            s[2] = 3;
            assertBlocks(src, s);
            ns.write(dst, 2L * BS, stamped(2L * BS, 1, 4));
            s[2] = 4;
            assertBlocks(dst, s);
            s[2] = 3;
            assertBlocks(src, s);
        }
    }

    @Test
    void rangesCloneAtOffsetsIntoAFileWithBlocksOfItsOwnAndWithinOneFile() {
        try (Handle src = written("src", 16, 1); Handle dst = written("dst", 4, 2)) {
            long free = free();
            ns.cloneRange(src, 4L * BS, dst, 2L * BS, 6L * BS); // dst's blocks 2 and 3 let go, size grows to 8 blocks
            assertEquals(free + 2, free());
            assertEquals(8L * BS, ns.stat(dst).size());
            MemorySegment in = buffer(1);
            for (int b = 0; b < 8; b++) {
                ns.read(dst, (long) b * BS, in);
                for (long w = 0; w < BS; w += 8) {
                    long want = b < 2 ? ((long) b * BS + w) << 16 | 2 : ((long) (b + 2) * BS + w) << 16 | 1;
                    assertEquals(want, in.get(U64, w), "block " + b);
                }
            }
            ns.cloneRange(src, 0, src, 32L * BS, 4L * BS); // within one file, past its end
            assertEquals(36L * BS, ns.stat(src).size());
            ns.read(src, 33L * BS, in);
            assertStamped(in, BS, 1);
            ns.write(src, 33L * BS, stamped(BS, 1, 7));
            ns.read(src, BS, in);
            assertStamped(in, BS, 1);
        }
    }

    @Test
    void aPartialLastBlockClonesOnlyAtTheSourcesEnd() {
        try (Handle src = ns.create(root, "src", 0644, true); Handle dst = ns.create(root, "dst", 0644, true)) {
            ns.write(src, 0, stamped(0, 3, 1));
            ns.truncate(src, 2L * BS + 100);
            ns.cloneRange(src, 0, dst, 0, 2L * BS + 100);
            assertEquals(2L * BS + 100, ns.stat(dst).size());
            MemorySegment in = buffer(3);
            assertEquals(2 * BS + 100, ns.read(dst, 0, in));
            assertStamped(in.asSlice(0, 2L * BS + 96), 0, 1);
        }
    }

    @Test
    void filesWithExtentTreesCloneAndCopyOnWrite() {
        try (Handle src = ns.create(root, "src", 0644, true); Handle dst = ns.create(root, "dst", 0644, true)) {
            for (int b = 0; b < 120; b += 2) { // 60 extents: a tree
                ns.write(src, (long) b * BS, stamped((long) b * BS, 1, 1));
            }
            assertEquals(InodeFormat.FORK_TREE, (int) ns.records.readRecord(src.ino(), InodeFormat::fork));
            ns.truncate(src, 120L * BS);
            ns.cloneRange(src, 0, dst, 0, 0);
            Random rnd = new Random(SEED);
            int[] s = new int[120], d = new int[120];
            for (int b = 0; b < 120; b += 2) {
                s[b] = d[b] = 1;
            }
            for (int n = 0; n < 80; n++) {
                int b = rnd.nextInt(120), gen = 10 + n;
                boolean toSrc = rnd.nextBoolean();
                ns.write(toSrc ? src : dst, (long) b * BS, stamped((long) b * BS, 1, gen));
                (toSrc ? s : d)[b] = gen;
            }
            assertBlocks(src, s);
            assertBlocks(dst, d);
        }
    }

    @Test
    void badInputFailsPreciselyAndChangesNothing() {
        ns.mkdir("/dir", 0755);
        try (Handle src = written("src", 4, 1); Handle dst = written("dst", 2, 2); Handle dir = ns.open("/dir");
             Handle ro = ns.open(root, "dst", Namespace.O_RDONLY); Handle wo = ns.open(root, "src", Namespace.O_WRONLY);
             Handle app = ns.open(root, "dst", Namespace.O_RDWR | Namespace.O_APPEND)) {
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(src, 1, f, 0, BS), dst);
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(src, 0, f, 100, BS), dst);
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(src, 0, f, 0, 100), dst); // not the source's end
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(src, 0, f, 0, 5L * BS), dst); // past the source's end
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(src, 8L * BS, f, 0, 0), dst);
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(src, -BS, f, 0, BS), dst);
            assertErrno(Errno.EINVAL, f -> ns.cloneRange(f, 0, f, BS, 2L * BS), src); // overlapping ranges of one file
            assertErrno(Errno.EISDIR, f -> ns.cloneRange(src, 0, dir, 0, BS), dst);
            assertErrno(Errno.EISDIR, f -> ns.cloneRange(dir, 0, f, 0, BS), dst);
            assertErrno(Errno.EBADF, f -> ns.cloneRange(src, 0, ro, 0, BS), dst);
            assertErrno(Errno.EBADF, f -> ns.cloneRange(wo, 0, f, 0, BS), dst);
            assertErrno(Errno.EBADF, f -> ns.cloneRange(src, 0, app, 0, BS), dst);
            assertErrno(Errno.EFBIG, f -> ns.cloneRange(src, 0, f, FileData.MAX_FILE_SIZE - BS, 2L * BS), dst);
            Handle closed = ns.open(root, "src");
            closed.close();
            assertErrno(Errno.EBADF, f -> ns.cloneRange(closed, 0, f, 0, BS), dst);
            assertErrno(Errno.EINVAL, f -> ns.cloneFile(f, f), dst);
            try (MemoryDevice other = VolumeFixtures.formatted(); Volume v2 = Volume.open(other, VolumeFixtures.OPTIONS)) {
                v2.namespace().create("/x", 0644, true);
                try (Handle there = v2.namespace().open("/x")) {
                    assertErrno(Errno.EXDEV, f -> ns.cloneRange(src, 0, there, 0, BS), dst);
                }
            }
            assertBlocks(dst, 2, 2);
            assertEquals(0, VolumeFixtures.incompat(dev) & SuperblockFormat.INCOMPAT_REFLINK, "no clone, no feature");
        }
    }

    @Test
    void cloneFileReplacesTheWholeDestination() {
        try (Handle src = written("src", 3, 1); Handle dst = written("dst", 9, 2)) {
            ns.cloneFile(src, dst);
            assertEquals(3L * BS, ns.stat(dst).size());
            assertBlocks(dst, 1, 1, 1);
        }
    }

    /** The checker counts each block's extents against the refcount tree: a record lost is found. */
    @Test
    void theCheckerFindsACountThatDisagreesWithTheExtents() {
        try (Handle src = written("src", 4, 1); Handle dst = ns.create(root, "dst", 0644, true)) {
            ns.cloneRange(src, 0, dst, 0, 0);
            long dev = ns.extents(src, 0, BS).getFirst().deviceOffset() / BS;
            AllocationGroup ag = v.group(v.geometry().agOfBlock(dev));
            try (Txn txn = Txn.begin(v.cache(), ag.refcounts.items(1))) {
                assertTrue(ag.refcounts.lockForChange(txn));
                ag.refcounts.set(txn, dev, 4, 2, 3); // counted once too often
                txn.commit();
            }
            CheckReport report = ns.check();
            assertFalse(report.clean());
            assertTrue(report.toString().contains("counted 3 in the refcount tree"), report.toString());
            try (Txn txn = Txn.begin(v.cache(), ag.refcounts.items(1))) {
                assertTrue(ag.refcounts.lockForChange(txn));
                ag.refcounts.set(txn, dev, 4, 3, 2);
                txn.commit();
            }
        }
    }

    /**
     * Two writers copy on write into a file and its clone at once (direct and buffered), a third clones
     * ranges of the first into a third file and cuts it back, and a reader checks that each block of the
     * first two only ever reads its own file's writes: none lands in a block the other still maps. Each
     * file ends holding its writer's last write per block; the checker (at the end) finds every count right,
     * and deleting the files gives every block back.
     */
    @Test
    void writersCopyOnWriteIntoTwoClonesAtOnceBesideAReaderAndACloner() throws InterruptedException {
        int blocks = 48, writes = 300;
        long start = free();
        Handle a = written("a", blocks, 1), b = ns.create(root, "b", 0644, true), c = ns.create(root, "c", 0644, true);
        ns.cloneRange(a, 0, b, 0, 0);
        int[][] last = new int[2][blocks];
        java.util.Arrays.fill(last[0], 1);
        java.util.Arrays.fill(last[1], 1);
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicInteger running = new java.util.concurrent.atomic.AtomicInteger(2);
        runThreads(4, "clone-writers", (me, mine) -> {
            Random rnd = new Random(SEED + me);
            if (me < 2) { // writer me of file me: generations 2 + 2n + me, so each file's are its own
                Handle f = me == 0 ? a : b;
                MemorySegment m = mine.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                try {
                    for (int n = 0; n < writes; n++) {
                        int blk = rnd.nextInt(blocks), gen = 2 + 2 * n + me;
                        for (long w = 0; w < BS; w += 8) {
                            m.set(U64, w, ((long) blk * BS + w) << 16 | gen);
                        }
                        ns.write(f, (long) blk * BS, rnd.nextInt(4) == 0 ? MemorySegment.ofArray(m.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)) : m);
                        last[me][blk] = gen;
                    }
                    ns.fsync(f);
                } finally {
                    if (running.decrementAndGet() == 0) {
                        done.set(true);
                    }
                }
            } else if (me == 2) { // the reader
                MemorySegment m = mine.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                while (!done.get()) {
                    int which = rnd.nextInt(2), blk = rnd.nextInt(blocks);
                    ns.read(which == 0 ? a : b, (long) blk * BS, m);
                    long word = m.get(U64, 0), gen = word & 0xFFFF;
                    if (word >>> 16 != (long) blk * BS || gen != 1 && (gen - 2) % 2 != which) {
                        throw new AssertionError("block " + blk + " of file " + which + " reads 0x" + Long.toHexString(word));
                    }
                }
            } else { // the cloner: ranges of a into c and back out
                while (!done.get()) {
                    int at = rnd.nextInt(blocks), n = 1 + rnd.nextInt(blocks - at);
                    ns.cloneRange(a, (long) at * BS, c, (long) at * BS, (long) n * BS);
                    ns.truncate(c, (long) rnd.nextInt(blocks) * BS);
                }
            }
        });
        for (int which = 0; which < 2; which++) {
            assertBlocks(which == 0 ? a : b, last[which]);
        }
        VolumeFixtures.assertChecked(ns);
        a.close();
        b.close();
        c.close();
        ns.unlink(root, "a");
        ns.unlink(root, "b");
        ns.unlink(root, "c");
        assertEquals(start, free(), "every block back");
    }

    @Test
    void aVolumeWithClonesRemountsWithItsSharingIntact() {
        try (Handle src = written("src", 8, 1); Handle dst = ns.create(root, "dst", 0644, true)) {
            ns.cloneRange(src, 0, dst, 0, 0);
        }
        root.close();
        v.close();
        v = Volume.open(dev, options());
        ns = v.namespace();
        root = ns.openRoot();
        try (Handle src = ns.open(root, "src"); Handle dst = ns.open(root, "dst")) {
            ns.write(src, 0, stamped(0, 1, 2));
            int[] s = gens(8, 1);
            s[0] = 2;
            assertBlocks(src, s);
            assertBlocks(dst, gens(8, 1));
        }
    }
}
