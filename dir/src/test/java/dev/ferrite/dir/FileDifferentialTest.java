package dev.ferrite.dir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random block-aligned writes, reads, truncates and fallocates (every mode) on two Ferrite files and on
 * two files of the host's file system (java.nio, fallocate modelled by writing zeros): every read returns
 * the same bytes and count, sizes agree after every step, and at the end the whole contents agree, the
 * volume checks clean and deleting the files gives back every block. Over the default span the files
 * seldom outgrow their inline extent lists (preallocation and merging keep them few); over a wide one
 * they do, and that run requires operations on files with extent trees and a tree taken down again.
 */
@ExtendWith(TestSeed.class)
class FileDifferentialTest {
    private static final int BS = 4096;
    private static final int SPAN = 96; // blocks the offsets fall in
    /** A span wide enough that scattered writes outgrow an inline extent list (25 extents) many times over. */
    private static final int WIDE_SPAN = 1500;
    private static final int OPS = Integer.getInteger("ferrite.differential.ops", 2000);

    /** Every valid mode: allocate, keep size, punch hole, zero range with and without keep size. */
    private static final int[] FALLOC_MODES = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
        FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};

    @TempDir
    Path tempDir;

    @ParameterizedTest
    @ValueSource(longs = {1, 2})
    void ferriteFilesAgreeWithTheHost(long defaultSeed) throws IOException {
        run(TestSeed.get(defaultSeed), OPS, SPAN);
    }

    @Test
    void fragmentedFilesWithExtentTreesAgreeWithTheHost() throws IOException {
        int[] tree = run(TestSeed.get(3), OPS, WIDE_SPAN);
        assertTrue(tree[0] > OPS / 4 && tree[1] > 0, tree[0] + " operations of " + OPS + " on a file with an extent tree, "
                + tree[1] + " after one went back inline");
    }

    @Test
    @Tag("stress")
    void manySeeds() throws IOException {
        long base = TestSeed.get(100);
        for (long seed = base; seed < base + 20; seed++) {
            run(seed, 10_000, SPAN);
            run(seed, 10_000, WIDE_SPAN);
        }
    }

    /** Returns the operations that ran on a file with an extent tree, and those after one went back inline. */
    private int[] run(long seed, int ops, int span) throws IOException {
        Random rnd = new Random(seed);
        int onTrees = 0, reverted = 0;
        boolean[] wasTree = new boolean[2];
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
             Arena arena = Arena.ofConfined()) {
            Namespace ns = v.namespace();
            long free = v.statfs().freeBlocks();
            Handle[] files = new Handle[2];
            try (Handle root = ns.openRoot()) {
                files[0] = ns.create(root, "f0", 0644, true);
                files[1] = ns.create(root, "f1", 0644, true);
            }
            FileChannel[] hosts = new FileChannel[2];
            for (int i = 0; i < 2; i++) {
                hosts[i] = FileChannel.open(tempDir.resolve("f" + i + "-" + seed + "-" + span), StandardOpenOption.CREATE_NEW,
                        StandardOpenOption.READ, StandardOpenOption.WRITE);
            }
            MemorySegment buf = arena.allocate(16L * BS, BlockDevice.BUFFER_ALIGNMENT);
            MemorySegment got = arena.allocate(16L * BS, BlockDevice.BUFFER_ALIGNMENT);
            for (int op = 0; op < ops; op++) {
                int which = rnd.nextInt(2);
                Handle f = files[which];
                FileChannel h = hosts[which];
                long offset = (long) rnd.nextInt(span) * BS;
                int blocks = 1 + rnd.nextInt(rnd.nextInt(4) == 0 ? 16 : 3);
                String where = "op " + op + " on f" + which + ", seed " + seed;
                switch (rnd.nextInt(13)) {
                    case 0, 1, 2, 3, 4 -> {
                        MemorySegment src = buf.asSlice(0, (long) blocks * BS);
                        for (long at = 0; at < src.byteSize(); at += 8) {
                            src.set(U64, at, (offset + at) << 16 | op);
                        }
                        ns.write(f, offset, src);
                        h.write(src.asByteBuffer(), offset);
                    }
                    case 5, 6, 7 -> {
                        MemorySegment dst = got.asSlice(0, (long) blocks * BS);
                        int n = ns.read(f, offset, dst);
                        ByteBuffer want = ByteBuffer.allocate(blocks * BS);
                        int m = Math.max(0, h.read(want, offset));
                        assertEquals(m, n, where + ": bytes read at " + offset);
                        assertTrue(MemorySegment.ofArray(want.array()).asSlice(0, m).mismatch(dst.asSlice(0, n)) < 0,
                                where + ": the bytes read at " + offset + " differ");
                    }
                    case 10, 11 -> {
                        int mode = FALLOC_MODES[rnd.nextInt(FALLOC_MODES.length)];
                        long length = (long) blocks * BS;
                        ns.fallocate(f, mode, offset, length);
                        fallocate(h, mode, offset, length);
                    }
                    default -> {
                        long size = newSize(rnd, span, h.size());
                        ns.truncate(f, size);
                        if (size < h.size()) {
                            h.truncate(size);
                        } else if (size > h.size()) {
                            h.write(ByteBuffer.allocate(1), size - 1); // up: a hole to the new size
                        }
                    }
                }
                assertEquals(h.size(), ns.stat(f).size(), where + ": size");
                int fork = ns.records.readRecord(f.ino(), InodeFormat::fork);
                if (fork == InodeFormat.FORK_TREE) {
                    onTrees++;
                    wasTree[which] = true;
                } else if (wasTree[which]) {
                    reverted++;
                }
            }
            for (int i = 0; i < 2; i++) {
                long size = hosts[i].size();
                for (long at = 0; at < size; at += 16L * BS) {
                    int n = ns.read(files[i], at, got);
                    ByteBuffer want = ByteBuffer.allocate(16 * BS);
                    int m = hosts[i].read(want, at);
                    assertEquals(m, n, "seed " + seed + ": f" + i + " at " + at);
                    assertTrue(MemorySegment.ofArray(want.array()).asSlice(0, m).mismatch(got.asSlice(0, n)) < 0,
                            "seed " + seed + ": f" + i + " differs at " + at);
                }
                hosts[i].close();
            }
            VolumeFixtures.assertChecked(ns);
            for (int i = 0; i < 2; i++) {
                files[i].close();
                ns.unlink("/f" + i);
            }
            assertEquals(free, v.statfs().freeBlocks(), "seed " + seed + ": every block back");
            VolumeFixtures.assertChecked(ns);
        }
        return new int[] {onTrees, reverted};
    }

    /**
     * A truncate's size: anywhere in the span, or over the wide span mostly a little below or above the
     * current size (cutting at random would keep the extent count low), and now and then 0.
     */
    private static long newSize(Random rnd, int span, long size) {
        if (span == SPAN) {
            return rnd.nextInt(8) == 0 ? 0 : (long) rnd.nextInt(span) * BS;
        }
        return rnd.nextInt(40) == 0 ? 0 : Math.max(0, size / BS + rnd.nextInt(64) - 48) * BS;
    }

    /**
     * fallocate's effect on the contents and size, on a host file (FileChannel has none): the range reads
     * zeros after a punch or zero range (written as zeros, within the size with KEEP_SIZE); an allocation
     * leaves the contents and, without KEEP_SIZE, moves the size to the range's end.
     */
    private static void fallocate(FileChannel h, int mode, long offset, long length) throws IOException {
        boolean keep = (mode & FALLOC_FL_KEEP_SIZE) != 0;
        long size = h.size(), end = offset + length;
        if ((mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) != 0) {
            long stop = keep ? Math.min(end, size) : end;
            if (stop > offset) {
                h.write(ByteBuffer.allocate((int) (stop - offset)), offset);
            }
        } else if (!keep && end > size) {
            h.write(ByteBuffer.allocate(1), end - 1); // a hole up to the new size
        }
    }
}
