package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.VolumeFixtures.assertChecked;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Each group holds back its refcount tree's worst case from data ({@link Refcounts#reserve}): in a group
 * that data filled, copies on write fail with ENOSPC before changing anything, and the frees of shared
 * files, which cut records in two and grow the tree, always go through; statfs offers none of it.
 */
class RefcountReserveTest {
    private static final int BS = 4096;
    /**
     * Two groups of about 24 Ki blocks; three files share 20 Ki blocks of one, whose refcount tree takes
     * 20 Ki records (about 250 blocks, where the group's free lists hold back fewer than 200) once one of
     * them has copied every other block into the other group.
     */
    private static final int BLOCKS = 50 * 1024, SHARED = 20 * 1024, CHUNK = 256;
    private static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(2).withCacheBytes(16L << 20);

    private final Arena arena = Arena.ofShared();
    private Geometry geometry;
    private MemorySegment buffer;

    @AfterEach
    void close() {
        arena.close();
    }

    /** {@code blocks} blocks (at most {@link #CHUNK}), each word stamped with its file offset and {@code gen}, in a buffer reused by the next call. */
    private MemorySegment stamped(long offset, int blocks, int gen) {
        if (buffer == null) {
            buffer = arena.allocate((long) CHUNK * BS, BlockDevice.BUFFER_ALIGNMENT);
        }
        MemorySegment m = buffer.asSlice(0, (long) blocks * BS);
        for (long at = 0; at < m.byteSize(); at += 8) {
            m.set(U64, at, (offset + at) << 16 | gen);
        }
        return m;
    }

    /** The reservation is offered to nobody: statfs's free and reserved blocks are what the groups' free-space trees hold. */
    private static void assertAccounted(Volume v) {
        VolumeStats s = v.statfs();
        long free = 0, reserved = 0;
        for (int g = 0; g < v.geometry().agCount(); g++) {
            AllocationGroup ag = v.group(g);
            free += ag.freeBlockCount();
            reserved += ag.refcounts.reserve();
        }
        assertEquals(free, s.freeBlocks() + s.reservedBlocks(), s.toString());
        assertEquals(reserved, s.reservedBlocks(), s.toString());
    }

    /**
     * Blocks that hold neither data nor metadata: the free-space trees' and the free lists' (each refcount
     * tree's blocks counted as unused too: its reservation held them back before it was made). Free space
     * alone (statfs) leaves out the lists' stock, which refills and spills move in batches.
     */
    private static long unused(Volume v) {
        long n = 0;
        for (int g = 0; g < v.geometry().agCount(); g++) {
            AllocationGroup ag = v.group(g);
            n += ag.freeBlockCount() + ag.agfl.count() + ag.agil.count() + (ag.refcounts.tree == null ? 0 : ag.refcounts.blocksCounted());
        }
        return n;
    }

    /**
     * Takes blocks of group {@code g} straight from its free space, as a file's data would take them, until
     * data has at most {@code room} blocks left there; returns the extents, {start, length} each.
     */
    private static List<long[]> hog(Volume v, AllocationGroup g, long room) {
        List<long[]> taken = new ArrayList<>();
        for (int n = v.geometry().agBlocks(); (n = (int) Math.min(n, g.freeBlockCount() - g.heldBack() - room)) > 0; ) {
            try {
                long at = VolumeAllocations.allocBlocks(v, g.agno, n);
                taken.add(new long[] {at, n});
                assertEquals(g.agno, v.geometry().agOfBlock(at), "the hog went to another group");
            } catch (NoSpaceException e) {
                n /= 2; // no free extent that long
            }
        }
        return taken;
    }

    private int ag(FileExtent e) {
        return geometry.agOfBlock(e.deviceOffset() / BS);
    }

    @Test
    void freeingSharedFilesAlwaysWorksInAGroupDataFilled() {
        try (MemoryDevice dev = MemoryDevice.create(BLOCKS, BS)) {
            Volume.format(dev, OPTIONS);
            long unused;
            VolumeStats filled;
            List<long[]> hogs = new ArrayList<>();
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                geometry = v.geometry();
                try (Handle root = ns.openRoot(); Handle first = ns.create(root, "first", 0644, true)) {
                    ns.unlink(root, "first"); // unlinked while open: the group's orphan tree made, and it stays
                }
                unused = unused(v);
                assertEquals(v.group(0).refcounts.most + v.group(1).refcounts.most, v.statfs().reservedBlocks(),
                        "no tree yet: each group holds back its tree's worst case");
                assertAccounted(v);
                try (Handle root = ns.openRoot(); Handle src = ns.create(root, "src", 0644, true);
                     Handle a = ns.create(root, "a", 0644, true); Handle b = ns.create(root, "b", 0644, true)) {
                    for (int at = 0; at < SHARED; at += CHUNK) {
                        ns.write(src, (long) at * BS, stamped((long) at * BS, CHUNK, 1));
                    }
                    ns.truncate(src, (long) SHARED * BS);
                    int full = ag(ns.extents(src, 0, BS).getFirst());
                    for (FileExtent e : ns.extents(src, 0, (long) SHARED * BS)) {
                        assertEquals(full, ag(e), "src lies in one group: " + e);
                    }
                    ns.cloneFile(src, a);
                    ns.cloneFile(src, b); // three extents map every block: count 3
                    AllocationGroup ag = v.group(full), other = v.group(1 - full);
                    hogs.addAll(hog(v, ag, 0)); // its group full of data
                    hogs.addAll(hog(v, other, SHARED / 2 - 256)); // the other with room for most of b's copies

                    // b copies every other block on write, from the end, into the other group: each cuts a
                    // record of the full group in three; a copy either goes through or changes nothing
                    int copied = 0, refused = 0;
                    MemorySegment in = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT); // apart from the stamped buffer
                    for (int blk = SHARED - 2; blk >= 0 && refused < 32; blk -= 2) {
                        long before = v.statfs().freeBlocks();
                        try {
                            ns.write(b, (long) blk * BS, stamped((long) blk * BS, 1, 2));
                            copied++;
                        } catch (NoSpaceException e) {
                            refused++;
                            assertEquals(before, v.statfs().freeBlocks(), "a refused copy on write took blocks");
                            ns.read(b, (long) blk * BS, in);
                            assertEquals((long) blk * BS << 16 | 1, in.get(U64, 0), "a refused copy on write changed block " + blk);
                        }
                    }
                    assertTrue(copied > SHARED / 2 - 1024 && refused > 0, copied + " copied, " + refused + " refused");
                    assertTrue(ag.refcounts.all().stream().noneMatch(e -> e.count() == RefcountFormat.STAGING), "staging blocks left");
                    int records = ag.refcounts.all().size();
                    assertTrue(records > 2 * copied - 16, records + " records");
                    assertTrue(ag.refcounts.reserve() < ag.refcounts.most, "the tree's blocks came out of the reservation");
                    assertAccounted(v);
                }
                filled = v.statfs();
            }

            try (Volume v = Volume.open(dev, OPTIONS)) { // the mount counts the trees' blocks again: the same reservation
                Namespace ns = v.namespace();
                assertEquals(filled, v.statfs());
                assertAccounted(v);
                // frees of the shared files: each may cut records, and each goes through
                try (Handle root = ns.openRoot(); Handle src = ns.open(root, "src"); Handle a = ns.open(root, "a");
                     Handle b = ns.open(root, "b")) {
                    for (int blk = SHARED - 3; blk > SHARED - 3 - 20 * 64; blk -= 64) {
                        ns.fallocate(a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) blk * BS, 3L * BS);
                    }
                    ns.fallocate(b, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (SHARED - 1001L) * BS, 1000L * BS);
                    ns.truncate(src, SHARED / 3L * BS + BS);
                    ns.truncate(b, SHARED / 2L * BS - BS);
                    assertAccounted(v);
                }
                for (String name : new String[] {"a", "src", "b"}) {
                    ns.unlink("/" + name);
                }
                for (long[] h : hogs) {
                    VolumeAllocations.freeBlocks(v, h[0], (int) h[1]);
                }
                assertAccounted(v);
                assertChecked(ns);
                assertEquals(unused, unused(v), "every block back");
            }
        }
    }
}
