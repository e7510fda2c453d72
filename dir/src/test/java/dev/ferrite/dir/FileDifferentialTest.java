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
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random block-aligned writes, reads, truncates and fallocates (every mode) on two Ferrite files and on
 * two files of the host's file system (java.nio, fallocate modelled by writing zeros): every read returns
 * the same bytes and count, sizes agree after every step, and at the end the whole contents agree, the
 * volume checks clean and deleting the files gives back every block. Over the default span the files
 * seldom outgrow their inline extent lists (preallocation and merging keep them few); over a wide one
 * they do, and that run requires operations on files with extent trees and a tree taken down again.
 *
 * <p>The buffered variant mixes in offsets, lengths and sizes that are not whole blocks, heap buffers,
 * appends, fsyncs and reopenings (a last close writes back), so that buffered and direct calls meet on
 * the same blocks; one run has a data cache of a few frames, so pages are evicted and written back
 * under pressure all along. A third variant clones ranges between the two files (a copy on the host).
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
        run(TestSeed.get(defaultSeed), OPS, false, VolumeFixtures.OPTIONS, SPAN);
    }

    /**
     * Clones between the two files among the other operations (the host copies the range: a clone reads as
     * a copy), direct and buffered, over the default span and a wide one; every write after them copies on
     * write.
     */
    @ParameterizedTest
    @ValueSource(longs = {6, 7})
    void clonesAgreeWithCopiesOnTheHost(long defaultSeed) throws IOException {
        long seed = TestSeed.get(defaultSeed);
        run(seed, OPS, seed % 2 == 0, VolumeFixtures.OPTIONS, SPAN, true);
        run(seed, OPS / 2, false, VolumeFixtures.OPTIONS, WIDE_SPAN, true);
    }

    @Test
    void fragmentedFilesWithExtentTreesAgreeWithTheHost() throws IOException {
        int[] tree = run(TestSeed.get(3), OPS, false, VolumeFixtures.OPTIONS, WIDE_SPAN);
        assertTrue(tree[0] > OPS / 4 && tree[1] > 0, tree[0] + " operations of " + OPS + " on a file with an extent tree, "
                + tree[1] + " after one went back inline");
    }

    @ParameterizedTest
    @ValueSource(longs = {3, 4})
    void bufferedAndDirectCallsAgreeWithTheHost(long defaultSeed) throws IOException {
        run(TestSeed.get(defaultSeed), OPS, true, VolumeFixtures.OPTIONS, SPAN);
    }

    @Test
    void bufferedCallsAgreeWithTheHostThroughATinyCache() throws IOException {
        run(TestSeed.get(5), OPS, true, TINY_CACHE, SPAN);
    }

    @Test
    @Tag("stress")
    void manySeeds() throws IOException {
        long base = TestSeed.get(100);
        for (long seed = base; seed < base + 20; seed++) {
            run(seed, 10_000, seed % 2 == 0, seed % 4 == 1 ? TINY_CACHE : VolumeFixtures.OPTIONS, SPAN);
            run(seed, 10_000, seed % 2 == 0, VolumeFixtures.OPTIONS, WIDE_SPAN);
        }
    }

    private static final VolumeOptions TINY_CACHE = VolumeFixtures.OPTIONS.withDataCacheBytes(PageCache.MIN_FRAMES * BS);

    /** Returns the operations that ran on a file with an extent tree, and those after one went back inline. */
    private int[] run(long seed, int ops, boolean buffered, VolumeOptions options, int span) throws IOException {
        return run(seed, ops, buffered, options, span, false);
    }

    /** {@link #run(long, int, boolean, VolumeOptions, int)}, with {@code clones} one operation in ten a clone from the other file. */
    private int[] run(long seed, int ops, boolean buffered, VolumeOptions options, int span, boolean clones) throws IOException {
        Random rnd = new Random(seed);
        int onTrees = 0, reverted = 0;
        boolean[] wasTree = new boolean[2];
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, options);
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
            MemorySegment heapBuf = MemorySegment.ofArray(new byte[16 * BS + 1]);
            MemorySegment heapGot = MemorySegment.ofArray(new byte[16 * BS + 1]);
            for (int op = 0; op < ops; op++) {
                int which = rnd.nextInt(2);
                Handle f = files[which];
                FileChannel h = hosts[which];
                long offset = (long) rnd.nextInt(span) * BS;
                int blocks = 1 + rnd.nextInt(rnd.nextInt(4) == 0 ? (buffered ? 12 : 16) : 3);
                long length = (long) blocks * BS;
                boolean heap = false;
                if (buffered && rnd.nextInt(3) > 0) { // not whole blocks, or in a heap buffer: buffered
                    offset += rnd.nextBoolean() ? rnd.nextInt(BS) : 0;
                    length = rnd.nextBoolean() ? 1 + rnd.nextInt((int) length) : length;
                    heap = rnd.nextBoolean();
                }
                String where = "op " + op + " on f" + which + ", seed " + seed;
                if (clones && rnd.nextInt(10) == 0) {
                    clone(ns, files[1 - which], hosts[1 - which], f, h, offset - offset % BS, blocks, rnd.nextInt((span + 1) / 2) * 2L * BS, where);
                    assertEquals(h.size(), ns.stat(f).size(), where + ": size after a clone");
                    continue;
                }
                int kind = rnd.nextInt(buffered ? 16 : 13);
                switch (kind == 13 && h.size() > (long) span * BS ? 0 : kind) {
                    case 0, 1, 2, 3, 4 -> {
                        MemorySegment src = (heap ? heapBuf.asSlice(1) : buf).asSlice(0, length);
                        for (long at = 0; at < src.byteSize(); at++) {
                            src.set(JAVA_BYTE, at, (byte) ((offset + at) * 7 + op));
                        }
                        ns.write(f, offset, src);
                        h.write(src.asByteBuffer(), offset);
                    }
                    case 13 -> { // append
                        MemorySegment src = (heap ? heapBuf.asSlice(1) : buf).asSlice(0, length);
                        src.fill((byte) (op | 1));
                        long at = ns.append(f, src);
                        assertEquals(h.size(), at, where + ": append offset");
                        h.write(src.asByteBuffer(), at);
                    }
                    case 14 -> { // write-back: fsync, or the last close
                        if (rnd.nextBoolean()) {
                            ns.fsync(f);
                        } else {
                            f.close();
                            files[which] = ns.open("/f" + which);
                        }
                    }
                    case 15 -> { // through a ByteBuffer
                        ByteBuffer dst = heap ? ByteBuffer.allocate((int) length + 3) : ByteBuffer.allocateDirect((int) length + 3);
                        dst.position(3);
                        int n = ns.read(f, offset, dst);
                        ByteBuffer want = ByteBuffer.allocate((int) length);
                        int m = Math.max(0, h.read(want, offset));
                        assertEquals(m, n, where + ": bytes read into a ByteBuffer at " + offset);
                        assertEquals(3 + n, dst.position(), where + ": position after the read");
                        assertSame(MemorySegment.ofBuffer(want.flip()), MemorySegment.ofBuffer(dst.flip().position(3)),
                                where + ": the bytes read into a ByteBuffer at " + offset);
                    }
                    case 5, 6, 7 -> {
                        MemorySegment dst = (heap ? heapGot.asSlice(1) : got).asSlice(0, length);
                        int n = ns.read(f, offset, dst);
                        ByteBuffer want = ByteBuffer.allocate((int) length);
                        int m = Math.max(0, h.read(want, offset));
                        assertEquals(m, n, where + ": bytes read at " + offset);
                        assertSame(MemorySegment.ofArray(want.array()).asSlice(0, m), dst.asSlice(0, n), where + ": the bytes read at " + offset);
                    }
                    case 10, 11 -> {
                        int mode = FALLOC_MODES[rnd.nextInt(FALLOC_MODES.length)];
                        ns.fallocate(f, mode, offset, length);
                        fallocate(h, mode, offset, length);
                    }
                    default -> {
                        long size = newSize(rnd, span, h.size()) + (buffered && rnd.nextBoolean() ? rnd.nextInt(BS) : 0);
                        ns.truncate(f, size);
                        if (size < h.size()) {
                            h.truncate(size);
                        } else if (size > h.size()) {
                            h.write(ByteBuffer.allocate(1), size - 1); // up: a hole to the new size
                        }
                    }
                }
                assertEquals(h.size(), ns.stat(files[which]).size(), where + ": size");
                int fork = ns.records.readRecord(files[which].ino(), InodeFormat::fork);
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
                    assertSame(MemorySegment.ofArray(want.array()).asSlice(0, m), got.asSlice(0, n), "seed " + seed + ": f" + i + " at " + at);
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
     * Clones up to {@code blocks} blocks of {@code from} at {@code srcOffset} (clipped to its end) into
     * {@code to} at {@code dstOffset}, and copies them on the host; a range ending inside the destination
     * past a partial last block of the source is refused (EINVAL) by Ferrite, and nothing is copied.
     */
    private static void clone(Namespace ns, Handle from, FileChannel hostFrom, Handle to, FileChannel hostTo, long dstOffset, int blocks,
                              long srcOffset, String where) throws IOException {
        long srcSize = hostFrom.size();
        if (srcOffset >= srcSize) {
            return;
        }
        long len = Math.min((long) blocks * BS, srcSize - srcOffset);
        if (len % BS != 0 && dstOffset + len < hostTo.size()) {
            NamespaceException e = org.junit.jupiter.api.Assertions.assertThrows(NamespaceException.class,
                    () -> ns.cloneRange(from, srcOffset, to, dstOffset, len), where);
            assertEquals(dev.ferrite.io.Errno.EINVAL, e.errno(), where + ": " + e.getMessage());
            return;
        }
        ns.cloneRange(from, srcOffset, to, dstOffset, len);
        ByteBuffer copy = ByteBuffer.allocate((int) len);
        hostFrom.read(copy, srcOffset);
        hostTo.write(copy.flip(), dstOffset);
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

    /** {@code got} holds the bytes of {@code want}; else the first byte that differs, its offset within the read and both values. */
    private static void assertSame(MemorySegment want, MemorySegment got, String what) {
        long at = want.mismatch(got);
        if (at >= 0) {
            throw new AssertionError(what + ": byte " + at + " is " + (at < got.byteSize() ? got.get(JAVA_BYTE, at) : "missing")
                    + ", expected " + (at < want.byteSize() ? want.get(JAVA_BYTE, at) : "none"));
        }
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
