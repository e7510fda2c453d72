package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;

import org.junit.jupiter.api.Test;

class KvKeysTest {
    private static final int N = 50_000;

    @Test
    void keysAreDistinctAndSixteenToFortyBytesLong() {
        Set<String> seen = new HashSet<>();
        int[] lengths = new int[KvKeys.KEY_MAX + 1];
        byte[] key = new byte[KvKeys.KEY_MAX];
        for (long i = 0; i < N; i++) {
            int length = KvKeys.key(i, key);
            assertTrue(length >= KvKeys.KEY_MIN && length <= KvKeys.KEY_MAX, "length " + length);
            lengths[length]++;
            assertTrue(seen.add(Arrays.toString(Arrays.copyOf(key, length))), "key #" + i + " repeats");
        }
        for (int l = KvKeys.KEY_MIN; l <= KvKeys.KEY_MAX; l++) {
            assertTrue(lengths[l] > N / 50, "length " + l + " is rare: " + lengths[l]);
        }
    }

    @Test
    void valuesCarryTheirIndex() {
        byte[] value = new byte[KvKeys.VALUE];
        KvKeys.value(123_456_789L, value);
        assertEquals(123_456_789L, KvKeys.word(value));
    }

    @Test
    void boundariesSplitTheKeysEvenlyAndEachKeyIntoOneShare() {
        int threads = 3;
        assertNull(KvKeys.boundary(0, threads));
        assertNull(KvKeys.boundary(threads, threads));
        int[] share = new int[threads];
        byte[] key = new byte[KvKeys.KEY_MAX];
        for (long i = 0; i < N; i++) {
            byte[] k = Arrays.copyOf(key, KvKeys.key(i, key));
            int in = 0;
            for (int t = 0; t < threads; t++) {
                byte[] from = KvKeys.boundary(t, threads), to = KvKeys.boundary(t + 1, threads);
                if ((from == null || Arrays.compareUnsigned(k, from) >= 0) && (to == null || Arrays.compareUnsigned(k, to) < 0)) {
                    share[t]++;
                    in++;
                }
            }
            assertEquals(1, in, "key #" + i);
        }
        for (int s : share) {
            assertTrue(Math.abs(s - N / threads) < N / 50, Arrays.toString(share));
        }
        assertEquals(N, KvKeys.sliceStart(N, threads, threads));
    }

    @Test
    void bufferComparisonIsUnsignedAndShorterFirst() {
        assertTrue(KvKeys.compare(buffer(1, 2), buffer(1, (byte) 0x80)) < 0);
        assertTrue(KvKeys.compare(buffer(1, 2), buffer(1, 2, 0)) < 0);
        assertTrue(KvKeys.compare(buffer(1, 3), buffer(1, 2, 0)) > 0);
        assertEquals(0, KvKeys.compare(buffer(7, 7), buffer(7, 7)));
    }

    private static ByteBuffer buffer(int... bytes) {
        ByteBuffer b = ByteBuffer.allocateDirect(bytes.length);
        for (int x : bytes) {
            b.put((byte) x);
        }
        return b.flip();
    }

    @Test
    void foldXorsTheBigEndianWordsTheTailPadded() {
        byte[] v = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, (byte) 0x80, 0x01};
        assertEquals(1L ^ 3L ^ 0x8001_0000_0000_0000L, KvKeys.fold(v, v.length));
        assertEquals(1L ^ 3L, KvKeys.fold(v, 16), "the first length bytes only");
        assertEquals(0L, KvKeys.fold(v, 0));
    }

    @Test
    void piecesStartingAtWordsFoldToTheWhole() {
        long seed = 0x5EED_F01DL;
        Random random = new Random(seed);
        try (Arena arena = Arena.ofConfined()) {
            for (int round = 0; round < 200; round++) {
                byte[] bytes = new byte[1 + random.nextInt(20_000)];
                random.nextBytes(bytes);
                MemorySegment offHeap = arena.allocate(bytes.length + 64);
                int at = 8 * random.nextInt(8); // the value anywhere in its segment, a piece's offset not 0
                MemorySegment.copy(MemorySegment.ofArray(bytes), 0, offHeap, at, bytes.length);
                long expected = 0;
                for (int i = 0, shift = 56; i < bytes.length; i++, shift = (shift + 56) % 64) {
                    expected ^= (bytes[i] & 0xFFL) << shift;
                }
                assertEquals(expected, KvKeys.fold(bytes, bytes.length), "seed " + seed + ", round " + round);
                MemorySegment onHeap = MemorySegment.ofArray(new byte[bytes.length + 64]);
                MemorySegment.copy(offHeap, at, onHeap, at, bytes.length);
                long pieces = 0, heapPieces = 0;
                for (int off = 0; off < bytes.length; ) {
                    int len = Math.min(bytes.length - off, 8 * (1 + random.nextInt(600)));
                    pieces ^= KvKeys.fold(offHeap, at + off, len);
                    heapPieces ^= KvKeys.fold(onHeap.asSlice(at), off, len); // a slice: the array's offset is the segment's address
                    off += len;
                }
                assertEquals(expected, pieces, "seed " + seed + ", round " + round + ": pieces off the heap");
                assertEquals(expected, heapPieces, "seed " + seed + ", round " + round + ": pieces of a slice of an array");
            }
        }
    }
}
