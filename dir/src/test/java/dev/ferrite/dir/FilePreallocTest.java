package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Speculative preallocation: appends and extending writes map unwritten blocks past the end that grow
 * with the file, so small appends end in few extents; the last close trims what is left, and so does
 * the first open after a crash; fallocate's KEEP_SIZE space is never trimmed.
 */
class FilePreallocTest extends FileTestBase {
    private ExtentList extents(Volume vol, long ino) {
        return vol.namespace().records.readRecord(ino, (b, rec) -> ExtentFormat.decode(b, rec, vol.geometry()));
    }

    private int flags(long ino) {
        return ns.records.readRecord(ino, (b, rec) -> InodeFormat.flags(b, rec));
    }

    @Test
    void appendsPreallocateAndTheLastCloseGivesBackAllButTheData() {
        long start = free();
        int n = 100;
        long ino;
        Handle again = ns.create(root, "f", 0644, true);
        try (Handle f = ns.open(root, "f")) {
            ino = f.ino();
            for (int i = 0; i < n; i++) {
                assertEquals((long) i * BS, ns.append(i % 2 == 0 ? f : again, stamped((long) i * BS, 1, 1)));
            }
            InodeStat s = ns.stat(f);
            assertEquals((long) n * BS, s.size());
            assertTrue(s.blocks() > n, "blocks past the end are preallocated: " + s.blocks());
            assertEquals(start - s.blocks(), free());
            assertTrue(extents(v, ino).count() <= 2, "written, then the unwritten tail: " + extents(v, ino));
            VolumeFixtures.assertChecked(ns); // unwritten blocks past the end, flagged
            again.close();
            assertEquals(start - s.blocks(), free(), "a close that is not the last trims nothing");
        }
        assertEquals(start - n, free(), "the last close leaves the data's blocks alone");
        assertEquals(n, ns.stat("/f").blocks());
        assertEquals(1, extents(v, ino).count(), extents(v, ino).toString());
        assertEquals(0, flags(ino) & InodeFormat.FLAG_SPECULATIVE);
        try (Handle f = ns.open(root, "f")) {
            MemorySegment r = buffer(n);
            assertEquals((long) n * BS, ns.read(f, 0, r));
            assertStamped(r, 0, 1);
        }
        ns.unlink(root, "f");
        assertEquals(start, free());
    }

    /**
     * A table blob's write ({@link FileData#writeBlocks}: its whole length at once, ending inside its last
     * block) maps no block past it, so the close has no tail to free (whose blocks, busy until the next
     * checkpoint, the next blob's allocation met): an extending direct write of the same blocks
     * preallocates a tail as long again.
     */
    @Test
    void aWriteOfKnownLengthPreallocatesNothing() {
        long start = free();
        int n = 256;
        try (Handle f = ns.create(root, "blob", 0644, true); Handle g = ns.create(root, "file", 0644, true)) {
            MemorySegment data = stamped(0, n, 1);
            data.asSlice((long) n * BS - 5).fill((byte) 0); // past the size: zeros, as writeBlocks wants
            ns.files.writeBlocks(f, 0, data, (long) n * BS - 5);
            assertEquals(n, ns.stat(f).blocks(), "blocks mapped by the write of known length");
            assertEquals((long) n * BS - 5, ns.stat(f).size());
            ns.write(g, 0, stamped(0, n, 2));
            assertTrue(ns.stat(g).blocks() > n, "an extending write preallocates: " + ns.stat(g).blocks());
        }
        assertEquals(start - 2 * n, free());
        try (Handle f = ns.open(root, "blob")) {
            MemorySegment r = buffer(n);
            assertEquals((long) n * BS - 5, ns.read(f, 0, r));
            assertStamped(r.asSlice(0, (long) (n - 1) * BS), 0, 1);
        }
        VolumeFixtures.assertChecked(ns);
    }

    @Test
    void aWriteThatFindsNoFreeBlockTakesBackWhatOtherFilesPreallocated() {
        long start = free();
        try (Handle a = ns.create(root, "a", 0644, true); Handle b = ns.create(root, "b", 0644, true)) {
            int data = 512; // 2 MiB of appends: a tail as long again is preallocated past them
            for (int i = 0; i < data; i++) {
                ns.append(a, stamped((long) i * BS, 1, 1));
            }
            long tail = ns.stat(a).blocks() - data;
            assertTrue(tail > 64, "a's preallocated tail: " + tail + " blocks");
            long written = 0;
            MemorySegment chunk = stamped(0, 16, 2);
            try {
                for (;;) { // b grows until not one block is left, a's tail included
                    ns.write(b, written * BS, chunk);
                    written += 16;
                }
            } catch (NoSpaceException expected) {
                // the volume is full
            }
            assertEquals(data, ns.stat(a).blocks(), "a's tail went to b");
            assertTrue(written > 0 && written <= ns.stat(b).blocks(), "b wrote " + written + " blocks, holds " + ns.stat(b).blocks());
            assertEquals(start, data + ns.stat(b).blocks() + free(), "every block is a's, b's or free");
            MemorySegment r = buffer(data);
            assertEquals((long) data * BS, ns.read(a, 0, r));
            assertStamped(r, 0, 1);
            VolumeFixtures.assertChecked(ns);
        }
        ns.unlink(root, "a");
        ns.unlink(root, "b");
        assertEquals(start, free());
    }

    @Test
    void twoFilesAppendedAlternatelyEndInFewExtents() {
        appendAlternately(32768, 2, 2048, 3); // 8 MiB each, in 2 groups of 64 MiB
    }

    /** The measure: 1 GiB each, in a 3 GiB volume of the default 4 groups. */
    @Test
    @Tag("stress")
    void twoFilesOfAGibibyteAppendedAlternatelyEndInAHandfulOfExtents() {
        appendAlternately(3 << 18, 4, 1 << 18, 8);
    }

    /** Appends {@code blocks} 4 KiB blocks to each of two files, alternately, and expects at most {@code most} extents each. */
    private void appendAlternately(int deviceBlocks, int groups, int blocks, int most) {
        try (MemoryDevice big = MemoryDevice.create(deviceBlocks, BS)) {
            Volume.format(big, VolumeFixtures.OPTIONS.withAgCount(groups));
            try (Volume vol = Volume.open(big, VolumeFixtures.OPTIONS); Arena a = Arena.ofConfined()) {
                Namespace n = vol.namespace();
                long start = vol.statfs().freeBlocks();
                MemorySegment block = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                long[] ino = new long[2];
                try (Handle r = n.openRoot(); Handle f = n.create(r, "a", 0644, true); Handle g = n.create(r, "b", 0644, true)) {
                    Handle[] h = {f, g};
                    for (int i = 0; i < blocks; i++) {
                        for (int k = 0; k < 2; k++) {
                            block.fill((byte) (k + 1));
                            block.set(U64, 0, i);
                            n.append(h[k], block);
                        }
                    }
                    ino[0] = f.ino();
                    ino[1] = g.ino();
                }
                assertEquals(start - 2L * blocks, vol.statfs().freeBlocks(), "only the data's blocks are left allocated");
                for (int k = 0; k < 2; k++) {
                    ExtentList x = extents(vol, ino[k]);
                    System.out.println("file " + (k + 1) + " of 2, " + blocks + " 4 KiB appends alternating: " + x.count()
                            + " extents " + x);
                    assertTrue(x.count() <= most, "file " + k + ": " + x);
                    assertEquals(blocks, x.blocks());
                }
                try (Handle f = n.open("/b")) {
                    n.read(f, (blocks - 1L) * BS, block);
                    assertEquals(blocks - 1, block.get(U64, 0));
                    assertEquals(2, block.get(ValueLayout.JAVA_BYTE, 8));
                }
                VolumeFixtures.assertChecked(n);
            }
        }
    }

    @Test
    void theFirstOpenAfterACrashTrimsWhatTheAppendsPreallocated() {
        int n = 40;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena a = Arena.ofConfined()) {
            MemoryDevice crashed;
            long start, ino;
            try (Volume vol = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace cns = vol.namespace();
                start = vol.statfs().freeBlocks();
                MemorySegment block = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                try (Handle r = cns.openRoot(); Handle f = cns.create(r, "f", 0644, true)) {
                    ino = f.ino();
                    for (int i = 0; i < n; i++) {
                        block.set(U64, 0, i + 1);
                        cns.append(f, block);
                    }
                    assertTrue(cns.stat(f).blocks() > n);
                    crashed = rec.materialize(rec.crashAfterFlush(SyncPoint.of(rec, vol, () -> cns.fsync(f))));
                }
            }
            try (crashed; Volume vol = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                Namespace cns = vol.namespace();
                VolumeFixtures.assertChecked(cns); // the tail is still there, flagged
                assertTrue(vol.statfs().freeBlocks() < start - n, "the crash left the preallocated tail");
                MemorySegment block = a.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                try (Handle f = cns.open("/f")) {
                    assertEquals(start - n, vol.statfs().freeBlocks(), "the first open trims it");
                    assertEquals(n, cns.stat(f).blocks());
                    assertEquals(1, extents(vol, ino).count());
                    for (int i = 0; i < n; i++) {
                        assertEquals(BS, cns.read(f, (long) i * BS, block));
                        assertEquals(i + 1, block.get(U64, 0));
                    }
                }
                VolumeFixtures.assertChecked(cns);
            }
        }
    }

    @Test
    void fallocateKeepSizeSpaceOutlivesTheLastClose() {
        long start = free();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 4, 1));
            assertTrue(ns.stat(f).blocks() > 20, "the write preallocated past the end");
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 20 * BS);
            assertEquals(20, ns.stat(f).blocks(), "exactly what fallocate asked for stays past the end");
            ns.append(f, stamped(4 * BS, 2, 2)); // into the fallocated blocks: no speculation on top
            assertEquals(20, ns.stat(f).blocks());
        }
        assertEquals(20, ns.stat("/f").blocks());
        assertEquals(start - 20, free());
        try (Handle f = ns.open(root, "f")) {
            MemorySegment r = buffer(6);
            assertEquals(6 * BS, ns.read(f, 0, r));
            assertStamped(r.asSlice(0, 4 * BS), 0, 1);
            assertStamped(r.asSlice(4 * BS), 4 * BS, 2);
        }
        ns.unlink(root, "f");
        assertEquals(start, free());
    }

    @Test
    void aSparseWriteTrimsTheTailInsteadOfSplittingIt() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, stamped(0, 1, 1));
            assertTrue(ns.stat(f).blocks() > 1);
            ns.write(f, 10L * BS, stamped(10L * BS, 1, 2)); // past the end, over the preallocated blocks
            assertEquals(2, ns.stat(f).blocks());
            assertEquals(2, extents(v, f.ino()).count(), extents(v, f.ino()).toString());
            MemorySegment r = buffer(11);
            ns.read(f, 0, r);
            assertStamped(r.asSlice(0, BS), 0, 1);
            assertStamped(r.asSlice(BS, 9 * BS), BS, 0);
            assertStamped(r.asSlice(10 * BS), 10L * BS, 2);
        }
    }

    @Test
    void theCheckerRefusesUnwrittenBlocksPastTheEndOfAnUnflaggedFile() {
        long ino;
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ino = f.ino();
            ns.write(f, 0, stamped(0, 1, 1));
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, BS, 3 * BS);
        }
        VolumeFixtures.assertChecked(ns);
        setFlags(ino, 0);
        CheckReport report = ns.check();
        assertTrue(report.problems().stream().anyMatch(p -> p.detail().contains("flagged neither")), report.toString());
        setFlags(ino, InodeFormat.FLAG_SPECULATIVE); // as a crash between a write's two transactions leaves it
        VolumeFixtures.assertChecked(ns);
        setFlags(ino, InodeFormat.FLAG_PREALLOC);
    }

    private void setFlags(long ino, int flags) {
        editRecord(ino, (m, rec) -> InodeFormat.setFlags(m, rec, flags));
    }
}
