package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.function.Consumer;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Regular files' data through the direct path: round trips, holes, EOF, in-place overwrites, truncate, freeing, limits and bad input. */
class FileDataTest extends FileTestBase {
    @Test
    void writtenDataReadsBackAndSurvivesARemount() {
        long ino;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ino = f.ino();
            ns.write(f, 0, stamped(0, 3, 1));
            ns.write(f, 3 * BS, stamped(3 * BS, 2, 2)); // grows in place: one extent
            MemorySegment r = buffer(5);
            assertEquals(5 * BS, ns.read(f, 0, r));
            assertStamped(r.asSlice(0, 3 * BS), 0, 1);
            assertStamped(r.asSlice(3 * BS), 3 * BS, 2);
        }
        InodeStat s = ns.stat("/f"); // closed: what the writes preallocated past the end is trimmed
        assertEquals(5 * BS, s.size());
        assertEquals(5, s.blocks());
        ExtentList x = ns.records.readRecord(ino, (b, rec) -> ExtentFormat.decode(b, rec, v.geometry()));
        assertEquals(1, x.count());
        String dump = VolumeDump.inode(v, ino);
        assertTrue(dump.contains("5 blocks in 1 extents") && dump.contains("[0+5@" + x.deviceBlock(0) + "]"), dump);
        v.close();
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
        try (Handle f = ns.open("/f")) {
            MemorySegment r = buffer(5);
            assertEquals(5 * BS, ns.read(f, 0, r));
            assertStamped(r.asSlice(0, 3 * BS), 0, 1);
            assertStamped(r.asSlice(3 * BS), 3 * BS, 2);
        }
    }

    @Test
    void aWriteLargerThanAnyGroupTakesItsBlocksFromSeveral() {
        long start = free();
        int blocks = 3000; // a group of this volume holds about 2000
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, blocks, 1));
            assertTrue(ns.records.readRecord(f.ino(), (b, rec) -> ExtentFormat.decode(b, rec, v.geometry())).count() > 1);
            MemorySegment r = buffer(blocks);
            assertEquals((long) blocks * BS, ns.read(f, 0, r));
            assertStamped(r, 0, 1);
            VolumeFixtures.assertChecked(ns);
        }
        assertEquals(blocks, ns.stat("/f").blocks(), "closed: what the write preallocated past the end is trimmed");
        ns.unlink(root, "f");
        assertEquals(start, free());
    }

    @Test
    void holesReadAsZerosAndReadsStopAtTheEnd() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 10L * BS, stamped(10L * BS, 1, 7));
            assertEquals(11L * BS, ns.stat(f).size());
            assertEquals(1, ns.stat(f).blocks());
            MemorySegment r = buffer(4);
            r.fill((byte) 0x55);
            assertEquals(4 * BS, ns.read(f, 0, r));
            assertStamped(r, 0, 0);
            r.fill((byte) 0x55);
            assertEquals(BS, ns.read(f, 10L * BS, r)); // short at the end
            assertStamped(r.asSlice(0, BS), 10L * BS, 7);
            r.fill((byte) 0x55);
            assertEquals(2 * BS, ns.read(f, 9L * BS, r)); // a hole, then data, then the end
            assertStamped(r.asSlice(0, BS), 9L * BS, 0);
            assertStamped(r.asSlice(BS, BS), 10L * BS, 7);
            assertEquals(0, ns.read(f, 11L * BS, r));
            assertEquals(0, ns.read(f, 1L << 40, r));
        }
    }

    @Test
    void overwritingWrittenBlocksAllocatesAndLogsNothing() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 8, 1));
            long free = free();
            long commits = v.journalStats().commits();
            InodeStat before = ns.stat(f);
            ns.write(f, 2 * BS, stamped(2 * BS, 4, 2));
            assertEquals(free, free());
            assertEquals(commits, v.journalStats().commits(), "an in-place overwrite commits no transaction");
            InodeStat after = ns.stat(f);
            assertEquals(before.size(), after.size());
            assertEquals(before.blocks(), after.blocks());
            assertTrue(after.mtimeNanos() >= before.mtimeNanos(), "the times only move forward (ModificationTimeTest)");
            MemorySegment r = buffer(8);
            ns.read(f, 0, r);
            assertStamped(r.asSlice(0, 2 * BS), 0, 1);
            assertStamped(r.asSlice(2 * BS, 4 * BS), 2 * BS, 2);
            assertStamped(r.asSlice(6 * BS), 6 * BS, 1);
        }
    }

    @Test
    void truncateDownFreesTheBlocksPastItAndUpLeavesAHole() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            long afterCreate = free();
            ns.write(f, 0, stamped(0, 4, 1));
            ns.write(f, 6L * BS, stamped(6L * BS, 4, 2)); // two extents
            assertEquals(afterCreate - 8, free());
            ns.truncate(f, 7L * BS); // cuts the second extent's tail
            assertEquals(7L * BS, ns.stat(f).size());
            assertEquals(5, ns.stat(f).blocks());
            assertEquals(afterCreate - 5, free());
            ns.truncate(f, 2L * BS); // frees the second and the first's tail
            assertEquals(2, ns.stat(f).blocks());
            assertEquals(afterCreate - 2, free());
            ns.truncate(f, 12L * BS); // up: a hole
            assertEquals(12L * BS, ns.stat(f).size());
            assertEquals(2, ns.stat(f).blocks());
            MemorySegment r = buffer(12);
            assertEquals(12 * BS, ns.read(f, 0, r));
            assertStamped(r.asSlice(0, 2 * BS), 0, 1);
            assertStamped(r.asSlice(2 * BS), 2 * BS, 0); // what was cut off reads as zeros, not the old data
            ns.truncate(f, 0);
            assertEquals(0, ns.stat(f).blocks());
            assertEquals(afterCreate, free());
            VolumeFixtures.assertChecked(ns);
        }
        ns.unlink(root, "f");
        assertEquals(start, free());
    }

    @Test
    void unlinkFreesEveryBlockAtTheLastClose() {
        long start = free();
        Handle f = ns.create(root, "f", 0644, true);
        for (int i = 0; i < 6; i++) {
            ns.write(f, i * 3L * BS, stamped(i * 3L * BS, 2, i + 1)); // six extents
        }
        ns.unlink(root, "f");
        assertTrue(free() < start - 11, "the open orphan keeps its blocks");
        MemorySegment r = buffer(2);
        ns.read(f, 15L * BS, r);
        assertStamped(r, 15L * BS, 6);
        VolumeFixtures.assertChecked(ns);
        f.close();
        assertEquals(start, free());
        // and without a handle: unlink frees at once
        try (Handle g = ns.create(root, "g", 0644, true)) {
            ns.write(g, 0, stamped(0, 3, 1));
        }
        ns.unlink("/g");
        assertEquals(start, free());
    }

    @Test
    void aWriteNeedingMoreExtentsThanTheRecordHoldsMakesAnExtentTree() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            int capacity = ExtentFormat.capacity(InodeFormat.inlineCapacity(BS));
            for (int i = 0; i < capacity; i++) {
                ns.write(f, 2L * i * BS, stamped(2L * i * BS, 1, 1)); // every other block: nothing merges
            }
            assertEquals(InodeFormat.FORK_EXTENTS, (int) ns.records.readRecord(f.ino(), InodeFormat::fork));
            ns.write(f, 2L * capacity * BS, stamped(2L * capacity * BS, 1, 2));
            assertEquals(InodeFormat.FORK_TREE, (int) ns.records.readRecord(f.ino(), InodeFormat::fork));
            ns.write(f, BS, stamped(BS, 3, 2)); // fills two holes and overwrites a block between them
            assertEquals(capacity + 3, ns.extents.all(f.ino()).count()); // the two new blocks merge with nothing
            MemorySegment r = buffer(2 * capacity + 1);
            assertEquals(r.byteSize(), ns.read(f, 0, r));
            assertStamped(r.asSlice(0, BS), 0, 1);
            assertStamped(r.asSlice(BS, 3 * BS), BS, 2);
            for (int i = 2; i < capacity; i++) {
                assertStamped(r.asSlice(2L * i * BS, BS), 2L * i * BS, 1);
                assertStamped(r.asSlice((2L * i + 1) * BS, BS), (2L * i + 1) * BS, 0);
            }
            assertStamped(r.asSlice(2L * capacity * BS, BS), 2L * capacity * BS, 2);
            ns.write(f, 0, stamped(0, 1, 3)); // an overwrite in place: a lookup in the tree
            MemorySegment one = buffer(1);
            ns.read(f, 0, one);
            assertStamped(one, 0, 3);
        }
    }

    @Test
    void runningOutOfSpaceMidWriteChangesNoByteOrSizeAndLeaksNothing() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 2, 1));
            InodeStat before = ns.stat(f);
            int more = (int) free() + 16; // more blocks than are free: some holes get mapped before the groups run dry
            assertThrows(NoSpaceException.class, () -> ns.write(f, BS, stamped(BS, more, 2)));
            assertEquals(before.size(), ns.stat(f).size());
            MemorySegment r = buffer(2);
            assertEquals(2 * BS, ns.read(f, 0, r));
            assertStamped(r, 0, 1);
            assertTrue(ns.check().clean(), "checker after the failed write");
        }
        // the blocks the failed write mapped past the end were unwritten and flagged: the last close trims them
        assertEquals(start - 2, free());
        ns.unlink(root, "f");
        assertEquals(start, free());
    }

    @Test
    void anFsyncWhoseForceWritesACheckpointPaysNoDataFlushOfItsOwn() {
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Volume vol = Volume.open(rec, OPTIONS)) {
            Namespace n = vol.namespace();
            try (Handle r = n.openRoot(); Handle f = n.create(r, "f", 0644, true)) {
                n.fsync(f);
                n.write(f, 0, stamped(0, 2, 1)); // a hole filled: its conversion is ordered after the data
                int before = rec.flushCount();
                n.fsync(f);
                assertEquals(2, rec.flushCount() - before, "the checkpoint's preflush and its own flush, no third for the data");
                n.write(f, 0, stamped(0, 2, 2)); // in place: nothing to force
                before = rec.flushCount();
                n.fdatasync(f);
                assertEquals(1, rec.flushCount() - before, "no checkpoint: the data gets a flush of its own");
                n.fdatasync(f);
                assertEquals(1, rec.flushCount() - before, "nothing written since: no flush");
            }
        }
    }

    @Test
    void badInputGetsItsErrnoAndChangesNothing() {
        Handle f = written("f", 2, 1);
        ns.symlink(root, "l", "f");
        Handle l = ns.open(root, "l");
        Handle d = ns.mkdir(root, "d", 0755);
        InodeStat before = ns.stat(f);
        long free = free();
        MemorySegment one = stamped(0, 1, 9);
        MemorySegment heap = MemorySegment.ofArray(new byte[BS]);
        MemorySegment unaligned = arena.allocate(2 * BS, BlockDevice.BUFFER_ALIGNMENT).asSlice(512, BS);
        Handle direct = ns.open(root, "f", Namespace.O_RDWR | Namespace.O_DIRECT);
        Handle readOnly = ns.open("/f", Namespace.O_RDONLY);
        Handle writeOnly = ns.open(root, "f", Namespace.O_WRONLY);
        try {
            assertErrno(Errno.EISDIR, h -> ns.write(d, 0, one), f);
            assertErrno(Errno.EISDIR, h -> ns.read(d, 0, buffer(1)), f);
            assertErrno(Errno.EISDIR, h -> ns.truncate(d, 0), f);
            assertErrno(Errno.EINVAL, h -> ns.write(l, 0, one), f);
            assertErrno(Errno.EINVAL, h -> ns.truncate(l, 0), f);
            assertErrno(Errno.EINVAL, h -> ns.write(h, -BS, one), f);
            assertErrno(Errno.EINVAL, h -> ns.read(h, -BS, buffer(1)), f);
            // not aligned for the direct path, through a handle that forces it
            assertErrno(Errno.EINVAL, h -> ns.write(direct, 512, one), f);
            assertErrno(Errno.EINVAL, h -> ns.write(direct, 0, one.asSlice(0, 512)), f);
            assertErrno(Errno.EINVAL, h -> ns.write(direct, 0, heap), f);
            assertErrno(Errno.EINVAL, h -> ns.write(direct, 0, unaligned), f);
            assertErrno(Errno.EINVAL, h -> ns.append(direct, heap), f);
            assertErrno(Errno.EINVAL, h -> ns.read(direct, 0, unaligned), f);
            assertErrno(Errno.EINVAL, h -> ns.read(direct, 100, buffer(1)), f);
            // access modes
            assertErrno(Errno.EBADF, h -> ns.write(readOnly, 0, one), f);
            assertErrno(Errno.EBADF, h -> ns.write(readOnly, 1, heap), f);
            assertErrno(Errno.EBADF, h -> ns.append(readOnly, heap), f);
            assertErrno(Errno.EBADF, h -> ns.fallocate(readOnly, 0, 0, 4 * BS), f);
            assertErrno(Errno.EINVAL, h -> ns.truncate(readOnly, 0), f);
            assertErrno(Errno.EBADF, h -> ns.read(writeOnly, 0, buffer(1)), f);
            assertErrno(Errno.EBADF, h -> ns.read(writeOnly, 1, heap), f);
            assertErrno(Errno.EINVAL, h -> ns.write(h, -1, heap), f);
            assertErrno(Errno.EINVAL, h -> ns.read(h, -1, heap), f);
            assertErrno(Errno.EFBIG, h -> ns.write(h, Namespace.MAX_FILE_SIZE - 10, heap), f);
            assertErrno(Errno.EFBIG, h -> ns.write(h, Namespace.MAX_FILE_SIZE, one), f);
            assertErrno(Errno.EFBIG, h -> ns.write(h, Long.MAX_VALUE & -BS, one), f);
            assertErrno(Errno.EINVAL, h -> ns.truncate(h, -1), f);
            assertErrno(Errno.EFBIG, h -> ns.truncate(h, Long.MAX_VALUE), f);
            ns.write(f, Namespace.MAX_FILE_SIZE - BS, stamped(0, 1, 2)); // the last block of the largest file
            assertEquals(Namespace.MAX_FILE_SIZE, ns.stat(f).size());
            ns.truncate(f, before.size());
            Handle closed = ns.open("/f");
            closed.close();
            assertErrno(Errno.EBADF, h -> ns.write(closed, 0, one), f);
            assertErrno(Errno.EBADF, h -> ns.read(closed, 0, buffer(1)), f);
            assertErrno(Errno.EBADF, h -> ns.truncate(closed, 0), f);
            assertErrno(Errno.EBADF, h -> ns.write(closed, 1, heap), f);
            assertErrno(Errno.EBADF, h -> ns.read(closed, 1, heap), f);
            assertErrno(Errno.EBADF, h -> ns.append(closed, heap), f);
            assertEquals(before.size(), ns.stat(f).size());
            assertEquals(before.blocks(), ns.stat(f).blocks());
            assertEquals(free, free());
            MemorySegment r = buffer(2);
            assertEquals(2 * BS, ns.read(f, 0, r));
            assertStamped(r, 0, 1);
        } finally {
            f.close();
            direct.close();
            readOnly.close();
            writeOnly.close();
            l.close();
            d.close();
        }
    }

    @Test
    void concurrentWritersOfDisjointRangesEachKeepTheirOwnBytes() throws InterruptedException {
        int threads = 4, region = 16;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            int[][] last = new int[threads][region]; // the generation each block of each writer's region holds last
            runThreads(threads, "writer", (me, mine) -> {
                java.util.Random rnd = new java.util.Random(me);
                for (int gen = 1; gen <= 150; gen++) {
                    int at = rnd.nextInt(region - 1), n = 1 + rnd.nextInt(2);
                    long offset = (long) (me * region + at) * BS;
                    MemorySegment src = mine.allocate((long) n * BS, BlockDevice.BUFFER_ALIGNMENT);
                    for (long w = 0; w < src.byteSize(); w += 8) {
                        src.set(U64, w, (offset + w) << 16 | gen);
                    }
                    ns.write(f, offset, src); // the four writers' extents together outgrow the record: a tree
                    for (int b = at; b < at + n; b++) {
                        last[me][b] = gen;
                    }
                }
            });
            MemorySegment r = buffer(1);
            for (int t = 0; t < threads; t++) {
                for (int b = 0; b < region; b++) {
                    long offset = (long) (t * region + b) * BS;
                    if (offset < ns.stat(f).size()) {
                        ns.read(f, offset, r);
                        assertStamped(r, offset, last[t][b]);
                    }
                }
            }
        }
    }

    @Test
    void theCheckerFindsBadExtents() {
        long a, b;
        try (Handle f = ns.create(root, "a", 0644, true); Handle g = ns.create(root, "b", 0644, true)) {
            a = f.ino();
            b = g.ino();
            ns.write(f, 0, stamped(0, 2, 1));
            ns.write(g, 0, stamped(0, 2, 1));
        }
        int rec = ns.records.rec(a);
        long aDev = ns.records.readRecord(a, (m, r) -> ExtentFormat.decode(m, r, v.geometry())).deviceBlock(0);
        // b's extent moved onto a's blocks: blocks owned twice
        long bDev = editExtent(b, x -> x.insert(8, aDev, 2, false), 2);
        assertProblem(b, "overlaps");
        editExtent(b, x -> {
        }, 0); // b back as it was, but counting no blocks
        assertProblem(b, "counts 0 blocks but its extents map 2");
        editExtent(b, x -> {
        }, 2);
        VolumeFixtures.assertChecked(ns);
        assertTrue(bDev != aDev);
        // a written extent past the end of the file
        setSize(a, BS);
        assertProblem(a, "written past the end");
        setSize(a, 2 * BS);
        // an extent outside the data blocks: the record's decode refuses it
        try (Txn txn = Txn.begin(v.cache(), 2)) {
            Buffer m = ns.records.lockRecord(txn, a);
            ExtentFormat.set(m.data(), rec + InodeFormat.INLINE, 0, 0, 1, 2, false);
            txn.log(m, rec, InodeFormat.INLINE + ExtentFormat.SIZE);
            txn.commit();
        }
        assertProblem(a, "not inside one allocation group");
        try (Txn txn = Txn.begin(v.cache(), 2)) {
            Buffer m = ns.records.lockRecord(txn, a);
            ExtentFormat.set(m.data(), rec + InodeFormat.INLINE, 0, 0, aDev, 2, false);
            txn.log(m, rec, InodeFormat.INLINE + ExtentFormat.SIZE);
            txn.commit();
        }
    }

    /** Rewrites {@code ino}'s extents: {@code change} applied to its list, block count set; returns its first extent's device block. */
    private long editExtent(long ino, Consumer<ExtentList> change, long blocks) {
        int rec = ns.records.rec(ino);
        try (Txn txn = Txn.begin(v.cache(), 2)) {
            Buffer m = ns.records.lockRecord(txn, ino);
            ExtentList x = ExtentFormat.decode(m.data(), rec, v.geometry());
            long first = x.deviceBlock(0);
            if (x.count() > 1) {
                x.trimFrom(8, 1); // undo an earlier insert at 8
            }
            change.accept(x);
            InodeFormat.setBlocks(m.data(), rec, blocks);
            txn.log(m, rec, ExtentFormat.encode(m.data(), rec, x));
            txn.commit();
            return first;
        }
    }

    private void setSize(long ino, long size) {
        editRecord(ino, (m, rec) -> InodeFormat.setSize(m, rec, size));
    }

    private void assertProblem(long ino, String detail) {
        CheckReport report = ns.check();
        assertTrue(report.problems().stream().anyMatch(p -> p.kind() == CheckProblem.Kind.INODE
                && p.inode().equals(OptionalLong.of(ino)) && p.detail().contains(detail)), report.toString());
        assertTrue(report.problems().stream().allMatch(p -> p.path().isEmpty() || p.path().equals(Optional.of(p.path().get()))));
    }

    @Test
    void filesInUseTogetherRarelyShareAnIoLock() {
        // a write-back or a free holds its file's I/O lock exclusively: every file sharing the lock waits for it
        Set<IoLock> locks = Collections.newSetFromMap(new IdentityHashMap<>());
        int files = 256;
        for (int k = 0; k < files; k++) {
            try (Handle f = ns.create(root, "f" + k, 0644, true)) {
                locks.add(ns.files.io(f.ino()));
            }
        }
        assertTrue(locks.size() >= files * 3 / 4, files + " files share " + locks.size() + " I/O locks");
    }
}
