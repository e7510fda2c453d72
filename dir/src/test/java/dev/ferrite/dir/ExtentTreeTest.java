package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Regular files whose extents outgrow the record's inline list: the per-inode extent tree they move to,
 * reads and writes through it, freeing from it, its return to an inline list, its accounting, the
 * superblock's incompatible-feature bit, and a damaged tree block.
 */
class ExtentTreeTest extends FileTestBase {
    private static final int PUNCH = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

    private int fork(Handle f) {
        return ns.records.readRecord(f.ino(), InodeFormat::fork);
    }

    /** Writes every other block of {@code [0, 2 * extents)}, generation {@code gen}: as many extents, none merging. */
    private void fragment(Handle f, int extents, int gen) {
        MemorySegment one = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        for (int i = 0; i < extents; i++) {
            long offset = 2L * i * BS;
            for (long w = 0; w < BS; w += 8) {
                one.set(U64, w, (offset + w) << 16 | gen);
            }
            ns.write(f, offset, one);
        }
    }

    /** Reads {@code f} whole in pieces of 64 blocks: block {@code b} holds generation {@code gen.applyAsInt(b)}. */
    private void assertContents(Handle f, java.util.function.LongToIntFunction gen) {
        long size = ns.stat(f).size();
        MemorySegment r = buffer(64);
        for (long at = 0; at < size; at += r.byteSize()) {
            int n = ns.read(f, at, r);
            assertEquals(Math.min(r.byteSize(), size - at), n);
            for (long b = 0; b < n / BS; b++) {
                long offset = at + b * BS;
                assertStamped(r.asSlice(b * BS, BS), offset, gen.applyAsInt(offset / BS));
            }
        }
    }

    private long tree(Handle f) {
        return ns.records.readRecord(f.ino(), (b, rec) -> DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE));
    }

    private BTree openTree(Handle f) {
        long ino = f.ino();
        return BTree.open(v.cache(), new DirAllocator(v.cache(), ns.records.block(ino), v.geometry().agOfInode(ino),
                ns.records.rec(ino), () -> null), tree(f), ino);
    }

    @Test
    void thousandsOfExtentsReadBackByteForByteAndTheTreeGoesWhenTruncatedToZero() {
        long start = free();
        int extents = 1500;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, extents, 1);
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            ExtentList x = ns.extents.all(f.ino());
            assertEquals(extents, x.count());
            assertEquals(extents, x.blocks());
            BTree t = openTree(f);
            assertTrue(t.height() > 1, "a tree of " + extents + " extents has " + t.height() + " levels");
            long meta = ns.stat(f).blocks() - extents;
            assertTrue(meta > 2 && meta < 64, "tree and reserve blocks: " + meta);
            assertEquals(start - extents - meta, free());
            assertContents(f, b -> b % 2 == 0 ? 1 : 0);
            String dump = VolumeDump.inode(v, f.ino());
            assertTrue(dump.contains("extent tree: header block " + tree(f) + ", " + extents + " extents counted")
                    && dump.contains(ns.stat(f).blocks() + " blocks in " + extents + " extents") && dump.contains("the first 32"), dump);
            VolumeFixtures.assertChecked(ns);

            fragment(f, extents, 2); // overwrites in place: one lookup each
            for (int i = 0; i < extents; i++) { // the holes, filled
                ns.write(f, (2L * i + 1) * BS, stamped((2L * i + 1) * BS, 1, 3));
            }
            assertContents(f, b -> b % 2 == 0 ? 2 : 3);
            assertEquals(null, ns.extents.all(f.ino()).firstGap(0, 2L * extents, true), "every block written");
            VolumeFixtures.assertChecked(ns);

            ns.truncate(f, (long) extents * BS); // half goes, the tree stays
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            assertContents(f, b -> b % 2 == 0 ? 2 : 3);
            ns.truncate(f, 0);
            assertEquals(InodeFormat.FORK_EMPTY, fork(f));
            assertEquals(0, ns.stat(f).blocks());
            assertEquals(start, free());
            fragment(f, 30, 4); // and a tree again
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            assertContents(f, b -> b % 2 == 0 ? 4 : 0);
        }
        ns.unlink("/f");
        assertEquals(start, free());
    }

    @Test
    void punchAndUnlinkOfTreeFilesGiveBackEveryBlock() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, 400, 1);
            ns.fallocate(f, PUNCH, 100L * BS, 300L * BS); // blocks 100..399 go
            assertContents(f, b -> b % 2 == 0 && (b < 100 || b >= 400) ? 1 : 0);
            assertEquals(400 - 150, ns.extents.all(f.ino()).count());
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 800L * BS); // every hole mapped unwritten
            assertContents(f, b -> b % 2 == 0 && (b < 100 || b >= 400) ? 1 : 0);
            VolumeFixtures.assertChecked(ns);
            ns.fallocate(f, PUNCH, 0, 800L * BS);
            assertEquals(InodeFormat.FORK_EMPTY, fork(f));
            assertEquals(start, free());
        }
        Handle g = ns.create(root, "g", 0644, true);
        fragment(g, 300, 1);
        ns.unlink("/g"); // open: an orphan until its last close
        assertTrue(free() < start);
        g.close();
        assertEquals(start, free());
        try (Handle h = ns.create(root, "h", 0644, true)) {
            fragment(h, 300, 1);
        }
        ns.unlink("/h");
        assertEquals(start, free());
    }

    @Test
    void aTreeMappingFewExtentsBecomesAnInlineListAgain() {
        long start = free();
        int capacity = ExtentFormat.capacity(InodeFormat.inlineCapacity(BS));
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, 200, 1);
            ns.fallocate(f, PUNCH, 0, 300L * BS); // 50 extents left: still a tree
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            ns.truncate(f, 2L * (150 + capacity / 2 + 1) * BS); // half the list and one more
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            ns.truncate(f, 2L * (150 + capacity / 2) * BS - BS); // half the list: back inline, the tree's blocks freed
            assertEquals(InodeFormat.FORK_EXTENTS, fork(f));
            ExtentList x = ns.extents.all(f.ino());
            assertEquals(capacity / 2, x.count(), x.toString());
            assertEquals(capacity / 2, ns.stat(f).blocks());
            assertEquals(start - capacity / 2, free());
            assertContents(f, b -> b % 2 == 0 && b >= 300 ? 1 : 0);
            VolumeFixtures.assertChecked(ns);
            fragment(f, 200, 2); // a tree again
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            assertContents(f, b -> b % 2 == 0 ? 2 : 0);
        }
        try (Handle g = ns.create(root, "g", 0644, true)) { // fallocate's preallocation past the end stays through it
            fragment(g, 40, 1);
            ns.fallocate(g, FALLOC_FL_KEEP_SIZE, 100L * BS, 8L * BS);
            ns.fallocate(g, PUNCH, 0, 60L * BS);
            assertEquals(InodeFormat.FORK_EXTENTS, fork(g));
            assertEquals(10 + 1, ns.extents.all(g.ino()).count());
            assertEquals(10 + 8, ns.stat(g).blocks());
            assertContents(g, b -> b % 2 == 0 && b >= 60 ? 1 : 0);
        }
        ns.unlink("/f");
        ns.unlink("/g");
        assertEquals(start, free());
    }

    @Test
    void aTreeFileReachingTheLargestFileKeepsItsTreeUntilItsSizeComesDown() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, 30, 1);
            ns.write(f, Namespace.MAX_FILE_SIZE - BS, stamped(Namespace.MAX_FILE_SIZE - BS, 1, 2));
            ns.fallocate(f, PUNCH, 0, 50L * BS); // 5 extents left, but no file block past them for the tree's own
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            MemorySegment one = buffer(1);
            assertEquals(BS, ns.read(f, Namespace.MAX_FILE_SIZE - BS, one));
            assertStamped(one, Namespace.MAX_FILE_SIZE - BS, 2);
            ns.truncate(f, 0); // frees everything while the size is still the largest: the empty tree stays
            assertEquals(InodeFormat.FORK_TREE, fork(f));
            VolumeFixtures.assertChecked(ns);
            ns.truncate(f, 0); // now it goes
            assertEquals(InodeFormat.FORK_EMPTY, fork(f));
            assertEquals(start, free());
        }
    }

    @Test
    void theCheckerFindsAWrongExtentCountOrBlockCountOfATreeFile() {
        long ino;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ino = f.ino();
            fragment(f, 100, 1);
        }
        long blocks = ns.stat("/f").blocks();
        editRecord(ino, (m, rec) -> ExtentTreeFormat.setCount(m, rec + InodeFormat.INLINE, 99));
        CheckReport report = ns.check();
        assertTrue(report.toString().contains("file " + ino + " counts 99 extents in its tree but it holds 100"), report.toString());
        editRecord(ino, (m, rec) -> {
            ExtentTreeFormat.setCount(m, rec + InodeFormat.INLINE, 100);
            InodeFormat.setBlocks(m, rec, blocks - 1);
        });
        report = ns.check();
        assertTrue(report.toString().contains("file " + ino + " counts " + (blocks - 1) + " blocks but its extents map 100 and its"
                + " tree and reserve take " + (blocks - 100)), report.toString());
        editRecord(ino, (m, rec) -> InodeFormat.setBlocks(m, rec, blocks));
        VolumeFixtures.assertChecked(ns);
    }

    @Test
    void aVolumeWithAnExtentTreeIsMarkedSoThatCodeWithoutThemRefusesIt() {
        assertEquals(0, incompat(), "a volume without extent trees stays readable by code that knows none");
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, 20, 1);
            assertEquals(0, incompat());
            fragment(f, 40, 1);
        }
        assertEquals(SuperblockFormat.INCOMPAT_EXTENT_TREE, incompat(), "set before the first tree");
        v.quiesce();
        assertEquals(SuperblockFormat.INCOMPAT_EXTENT_TREE, incompat());
        reopen();
        assertEquals(SuperblockFormat.INCOMPAT_EXTENT_TREE, incompat(), "kept by the mount and unmount");
        try (Handle f = ns.open("/f")) {
            assertContents(f, b -> b % 2 == 0 ? 1 : 0);
        }
        // what code without extent trees (which knows no incompatible feature) does with it, shown with a bit this code does not know
        root.close();
        v.close();
        setIncompat(SuperblockFormat.INCOMPAT_EXTENT_TREE | 1L << 40);
        IncompatibleVolumeException e = assertThrows(IncompatibleVolumeException.class, () -> Volume.open(dev, OPTIONS));
        assertTrue(e.getMessage().contains("incompatible features 0x10000000000"), e.getMessage());
        setIncompat(SuperblockFormat.INCOMPAT_EXTENT_TREE);
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
    }

    /** The incompatible features in the primary superblock on the device, but the log's (set while mounted) and the B-tree's (set by the format). */
    private long incompat() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            return SuperblockFormat.read(b).incompat() & ~(SuperblockFormat.LOG_INCOMPAT | Volume.FORMAT_FEATURES);
        }
    }

    private void setIncompat(long bits) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            SuperblockFormat.Fields f = SuperblockFormat.read(b).withIncompat(bits);
            for (long copy : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
                SuperblockFormat.write(b, copy, f);
                dev.write(copy, b);
            }
        }
    }

    private void reopen() {
        root.close();
        v.close();
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
    }

    @Test
    void aDamagedTreeBlockIsCorruptionNamingIt() {
        long ino;
        List<Long> blocks = new ArrayList<>();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ino = f.ino();
            fragment(f, 600, 1);
            TreeWalk.blocks(openTree(f), blocks::add);
        }
        long leaf = blocks.get(blocks.size() - 1); // the walk's last: a leaf
        root.close();
        v.close();
        MemorySegment saved;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            dev.read(leaf, b);
            saved = MemorySegment.ofArray(b.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            b.set(U64, 200, b.get(U64, 200) ^ 0x5A5A);
            dev.write(leaf, b);
        }
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
        try (Handle f = ns.open("/f")) {
            CorruptionException e = assertThrows(CorruptionException.class, () -> assertContents(f, b -> b % 2 == 0 ? 1 : 0));
            assertEquals(leaf, e.block(), e.getMessage());
        }
        CheckReport report = ns.check();
        assertTrue(!report.clean() && report.toString().contains(Long.toString(leaf)), report.toString());
        root.close();
        v.close();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            MemorySegment.copy(saved, 0, b, 0, BS);
            dev.write(leaf, b);
        }
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
        assertEquals(ino, ns.stat("/f").ino());
    }

    @Test
    void writersAndReadersShareATreeFile() throws InterruptedException {
        int extents = 200, threads = 3;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, 2 * extents, 1);
            runThreads(threads, "tree-io", (me, mine) -> {
                MemorySegment one = mine.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                java.util.Random rnd = new java.util.Random(me);
                for (int n = 0; n < 400; n++) {
                    if (me == 0) {
                        long b = 2L * rnd.nextInt(2 * extents); // reads even blocks, which only ever hold generation 1
                        ns.read(f, b * BS, one);
                        assertStamped(one, b * BS, 1);
                    } else { // writers fill odd blocks of their own halves: holes become extents, splits and merges
                        long block = 2L * (rnd.nextInt(extents) + (me - 1) * extents) + 1;
                        for (long w = 0; w < BS; w += 8) {
                            one.set(U64, w, (block * BS + w) << 16 | 2);
                        }
                        ns.write(f, block * BS, one);
                    }
                }
            });
            MemorySegment one = buffer(1);
            for (long b = 0; b < 4L * extents; b++) {
                ns.read(f, b * BS, one);
                long word = one.get(U64, 0);
                assertTrue(b % 2 == 0 ? word == (b * BS << 16 | 1) : word == 0 || word == (b * BS << 16 | 2), "block " + b);
            }
        }
    }

    /**
     * bench randwrite --unwritten in small: writers converting a fallocated file's blocks each once in a
     * random order, so the tree splits and merges under many transactions at once (its reserve must stay
     * between its marks under the inode's lock, not only when each writer looked).
     */
    @Test
    void concurrentFirstWritesIntoUnwrittenSpace() throws InterruptedException {
        int blocks = 3000, threads = 8;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.fallocate(f, 0, 0, (long) blocks * BS);
            java.util.List<Integer> order = new java.util.ArrayList<>();
            for (int b = 0; b < blocks; b++) {
                order.add(b);
            }
            java.util.Collections.shuffle(order, new java.util.Random(7));
            java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
            runThreads(threads, "first-writer", (me, mine) -> {
                MemorySegment one = mine.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                for (int k; (k = next.getAndIncrement()) < blocks; ) {
                    long block = order.get(k);
                    for (long w = 0; w < BS; w += 8) {
                        one.set(U64, w, (block * BS + w) << 16 | 1);
                    }
                    ns.write(f, block * BS, one);
                }
            });
            assertContents(f, b -> 1);
        }
    }

    /** Longer: tens of thousands of extents. */
    @Test
    @Tag("stress")
    void tensOfThousandsOfExtents() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            fragment(f, 3000, 1);
            assertContents(f, b -> b % 2 == 0 ? 1 : 0);
            VolumeFixtures.assertChecked(ns);
        }
        ns.unlink("/f");
        assertEquals(start, free());
    }
}
