package dev.ferrite.dir;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Extent values in the data page cache's frames, on a cache of {@link PageCache#MIN_FRAMES} frames: a
 * value is cached in frames side by side when the cache has such a run, and copied and lent in one piece
 * from there; in frames that are not side by side it is cached, copied and lent a block at a time. Either
 * way every byte reads back exact.
 */
class TableExtentCacheTest {
    private static final int BS = 4096;
    private static final long SEED = 0x7AB1E_CAC4EL;

    private final PageCache pages = new PageCache(BS, (long) PageCache.MIN_FRAMES * BS, 1000, new Counters());
    private final TableExtentCache cache = new TableExtentCache(pages, BS);
    private final Random rnd = new Random(SEED);

    @AfterEach
    void close() {
        pages.close();
    }

    private byte[] random(int n) {
        byte[] b = new byte[n];
        rnd.nextBytes(b);
        return b;
    }

    /** What {@link TableExtentCache#lend} hands: the bytes, and each piece's length into {@code sizes}. */
    private static byte[] lent(TableExtentCache cache, TableValueFormat.Extent x, List<Long> sizes) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        assertTrue(cache.lend(x, (bytes, offset, length) -> {
            sizes.add(length);
            out.writeBytes(bytes.asSlice(offset, length).toArray(JAVA_BYTE));
        }), "lent: every block cached");
        return out.toByteArray();
    }

    /** Bytes {@code [from, to)} of {@code x} (cached in blocks {@code [0, blocks)}) through {@link TableExtentCache#copy}. */
    private static byte[] copied(TableExtentCache cache, TableValueFormat.Extent x, int blocks, int from, int to) {
        byte[] out = new byte[to - from];
        assertTrue(cache.copy(x, 0, blocks, from, to - from, MemorySegment.ofArray(out)), "copied: every block cached");
        return out;
    }

    private static byte[] slice(byte[] b, int from, int to) {
        return Arrays.copyOfRange(b, from, to);
    }

    @Test
    void aValueCachedInFramesSideBySideIsCopiedAndLentInOnePiece() {
        byte[] v = random(3 * BS + 10);
        TableValueFormat.Extent x = new TableValueFormat.Extent(100, v.length, 7);
        int first = cache.fillPinned(x, MemorySegment.ofArray(v));
        assertTrue(first >= 0, "its four frames side by side");
        assertEquals(first, cache.framesInOrder(x));
        List<Long> sizes = new ArrayList<>();
        assertArrayEquals(v, lent(cache, x, sizes));
        assertEquals(List.of((long) v.length), sizes, "one piece");
        assertArrayEquals(slice(v, BS - 5, 2 * BS + 3), copied(cache, x, 4, BS - 5, 2 * BS + 3));
        for (int i = 0; i < 4; i++) {
            assertTrue(pages.isPinned(first + i), "pinned until written");
        }
        cache.written(x, false, first);
        for (int i = 0; i < 4; i++) {
            assertFalse(pages.isPinned(first + i), "unpinned once written");
        }
        assertEquals(4, cache.cachedBlocks(), "still cached once written");
        cache.drop(x);
        assertEquals(0, cache.cachedBlocks());

        byte[] blocks = Arrays.copyOf(random(2 * BS - 1), 2 * BS); // as read from the device
        TableValueFormat.Extent y = new TableValueFormat.Extent(200, 2 * BS - 1, 9);
        cache.fill(y, MemorySegment.ofArray(blocks));
        assertTrue(cache.framesInOrder(y) >= 0, "a value read: a run too");
        sizes.clear();
        assertArrayEquals(slice(blocks, 0, 2 * BS - 1), lent(cache, y, sizes));
        assertEquals(List.of(2L * BS - 1), sizes);
    }

    /**
     * A value read whole from the device goes straight into a run of frames reserved for it, which is
     * then mapped as its pages (no copy through a buffer); a run whose pages another reader's fill mapped
     * meanwhile is not, and goes back to the free frames.
     */
    @Test
    void aValueReadIntoAReservedRunIsAdoptedUnlessItsPagesWereFilledMeanwhile() {
        byte[] v = random(2 * BS + 7);
        TableValueFormat.Extent x = new TableValueFormat.Extent(400, v.length, 13);
        int run = cache.reserveRun(x);
        assertTrue(run >= 0, "a run of three in fresh frames");
        MemorySegment.copy(MemorySegment.ofArray(v), 0, cache.runBytes(run, 3), 0, v.length); // as the device read leaves it
        assertEquals(0, cache.cachedBlocks(), "reserved, not mapped");
        assertTrue(cache.adopt(x, run));
        assertEquals(run, cache.framesInOrder(x));
        assertArrayEquals(v, copied(cache, x, 3, 0, v.length));

        byte[] w = random(BS);
        TableValueFormat.Extent y = new TableValueFormat.Extent(500, BS, 17);
        int lost = cache.reserveRun(y);
        assertTrue(lost >= 0);
        cache.fill(y, MemorySegment.ofArray(w)); // another reader got there first
        assertFalse(cache.adopt(y, lost), "its page is mapped already");
        cache.releaseRun(y, lost);
        assertEquals(4, cache.cachedBlocks(), "x's three and y's one");
        assertArrayEquals(w, copied(cache, y, 1, 0, BS));
        assertEquals(lost, cache.reserveRun(y), "the run given back is free again");
    }

    @Test
    void aValueInFramesNotSideBySideIsCachedCopiedAndLentABlockAtATime() {
        FilePages other = new FilePages(null);
        other.lock.lock();
        try {
            int[] taken = new int[PageCache.MIN_FRAMES];
            for (int i = 0; i < taken.length; i++) { // every frame made: no run from frames never used
                other.put(i, taken[i] = pages.allocate(other, i));
            }
            for (int i = 0; i < 8; i += 2) {
                pages.drop(other, taken[i]); // four free frames, none next to another
            }
        } finally {
            other.lock.unlock();
        }
        byte[] v = random(3 * BS + 100);
        TableValueFormat.Extent x = new TableValueFormat.Extent(300, v.length, 11);
        assertEquals(TableExtentCache.SCATTERED, cache.fillPinned(x, MemorySegment.ofArray(v)), "scattered frames");
        assertEquals(-1, cache.framesInOrder(x));
        for (int f = 0; f < 8; f += 2) {
            assertTrue(pages.isPinned(f), "frame " + f + " pinned until written");
        }
        List<Long> sizes = new ArrayList<>();
        assertArrayEquals(v, lent(cache, x, sizes));
        assertEquals(List.of((long) BS, (long) BS, (long) BS, 100L), sizes, "a piece a block");
        assertArrayEquals(slice(v, 10, 3 * BS + 50), copied(cache, x, 4, 10, 3 * BS + 50));
        byte[] staged = new byte[4 * BS];
        cache.copyBlocks(x, MemorySegment.ofArray(staged), 0);
        assertArrayEquals(v, slice(staged, 0, v.length));
        assertEquals(-1, MemorySegment.ofArray(staged).asSlice(v.length).mismatch(MemorySegment.ofArray(new byte[4 * BS - v.length])),
                "zeros after the value to its last block's end");
        cache.written(x, false, TableExtentCache.SCATTERED);
        for (int f = 0; f < 8; f += 2) {
            assertFalse(pages.isPinned(f), "frame " + f + " unpinned once written");
        }
    }

    /** Pinned frames are not to be taken: a value that finds no frame left is not cached at all, none of its blocks. */
    @Test
    void aValueThatFindsEveryFramePinnedIsNotCached() {
        int pinned = 0;
        for (long block = 1000; ; block += 4) {
            TableValueFormat.Extent x = new TableValueFormat.Extent(block, 4 * BS, (int) block);
            int first = cache.fillPinned(x, MemorySegment.ofArray(random(4 * BS)));
            if (first == TableExtentCache.NO_FRAMES) {
                break;
            }
            assertEquals(first, cache.framesInOrder(x), "what the fill answered is where its frames lie");
            pinned += 4;
            assertTrue(pinned <= PageCache.MIN_FRAMES, "more frames pinned than the cache has");
        }
        assertEquals(pinned, cache.cachedBlocks(), "the value that found no frame left none of its blocks");
        TableValueFormat.Extent last = new TableValueFormat.Extent(1, BS, 3);
        assertEquals(TableExtentCache.NO_FRAMES, cache.fillPinned(last, MemorySegment.ofArray(random(BS))), "no frame for one block either");
    }

    /**
     * A value's write that outlived its frames (cancelled: dropped, and the run taken by another value
     * since, with the same length and checksum) unpins none of the other value's frames: they hold its
     * pending write.
     */
    @Test
    void aWriteWhoseFramesWereTakenSinceLeavesTheirNewValuePinned() {
        byte[] v = random(2 * BS);
        TableValueFormat.Extent x = new TableValueFormat.Extent(600, v.length, 21);
        int first = cache.fillPinned(x, MemorySegment.ofArray(v));
        assertTrue(first >= 0);
        cache.drop(x);
        TableValueFormat.Extent y = new TableValueFormat.Extent(700, v.length, 21);
        assertEquals(first, cache.fillPinned(y, MemorySegment.ofArray(v)), "the run given back is taken again");
        cache.written(x, false, first);
        assertTrue(pages.isPinned(first) && pages.isPinned(first + 1), "y's frames stay pinned");
        cache.written(y, false, first);
        assertFalse(pages.isPinned(first) || pages.isPinned(first + 1));
    }
}
