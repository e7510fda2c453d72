package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@link DirtyMap}'s two words against a chunk-by-chunk model: the bits a range sets, the runs (one may
 * cross from the low word into the high one, and is one range in the op), packing, repacking into a
 * larger layout in place, and the op's ranges and bytes.
 */
@ExtendWith(TestSeed.class)
class DirtyMapTest {
    private static final int BS = 4096;
    private static final int SHIFT = DirtyMap.chunkShift(BS);
    private static final int CHUNK = BS / DirtyMap.CHUNKS;

    @Test
    void aRangeSetsTheChunksItTouches() {
        assertEquals(32, CHUNK);
        assertEquals(0b11L, DirtyMap.low(31, 2, SHIFT), "two chunks for two bytes astride a boundary");
        assertEquals(0, DirtyMap.high(31, 2, SHIFT));
        assertEquals(1L << 63, DirtyMap.low(63 * CHUNK, 2 * CHUNK, SHIFT), "the low word's last chunk");
        assertEquals(1L, DirtyMap.high(63 * CHUNK, 2 * CHUNK, SHIFT), "and the high word's first");
        assertEquals(-1L, DirtyMap.low(0, BS, SHIFT));
        assertEquals(-1L, DirtyMap.high(0, BS, SHIFT));
        assertEquals(0, DirtyMap.low(BS - 1, 1, SHIFT));
        assertEquals(1L << 63, DirtyMap.high(BS - 1, 1, SHIFT));
        assertEquals(1, DirtyMap.runs(1L << 63, 1L), "a run across the words is one run");
        assertEquals(2, DirtyMap.runs(1L << 63, 2L));
    }

    @Test
    void mapsPackRepackAndWriteOpsAsTheModelSays() {
        long seed = TestSeed.get(5);
        Random rnd = new Random(seed);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment image = arena.allocate(BS);
            MemorySegment shadow = arena.allocate(2L * BS); // a slab: the shadow at an offset in it
            MemorySegment op = arena.allocate(2L * BS);
            for (int round = 0; round < 2000; round++) {
                String where = "seed " + seed + ", round " + round;
                for (int b = 0; b < BS; b += 8) {
                    image.set(ValueLayout.JAVA_LONG, b, rnd.nextLong());
                }
                boolean[] first = new boolean[DirtyMap.CHUNKS], both = new boolean[DirtyMap.CHUNKS];
                long lo = 0, hi = 0;
                for (int r = rnd.nextInt(4); r >= 0; r--) {
                    int off = rnd.nextInt(BS), len = 1 + rnd.nextInt(Math.min(BS - off, rnd.nextBoolean() ? 80 : 2200));
                    lo |= DirtyMap.low(off, len, SHIFT);
                    hi |= DirtyMap.high(off, len, SHIFT);
                    mark(first, off, len);
                }
                assertEquals(model(first), bits(lo, hi), where);
                System.arraycopy(first, 0, both, 0, both.length);
                long lo2 = lo, hi2 = hi;
                for (int r = rnd.nextInt(3); r >= 0; r--) {
                    int off = rnd.nextInt(BS), len = 1 + rnd.nextInt(Math.min(BS - off, 300));
                    lo2 |= DirtyMap.low(off, len, SHIFT);
                    hi2 |= DirtyMap.high(off, len, SHIFT);
                    mark(both, off, len);
                }
                // pack the first map, grow it in place to the union (packed, or spread over the whole block),
                // fill in the new chunks: the image's chunks, in order
                boolean spread = rnd.nextBoolean();
                long layout = spread ? DirtyMap.ALL : lo2, layoutHigh = spread ? DirtyMap.ALL : hi2;
                where += spread ? ", spread" : ", packed";
                shadow.fill((byte) 0);
                long at = (long) rnd.nextInt(DirtyMap.CHUNKS) * CHUNK;
                DirtyMap.pack(lo, hi, lo, hi, SHIFT, image, shadow, at);
                DirtyMap.repack(lo, hi, layout, layoutHigh, SHIFT, shadow, at, shadow, at);
                DirtyMap.pack(lo2 & ~lo, hi2 & ~hi, layout, layoutHigh, SHIFT, image, shadow, at);
                List<int[]> runs = runs(both);
                assertEquals(runs.size(), DirtyMap.runs(lo2, hi2), where);
                int size = DirtyMap.writeOp(op, 0, 1, 0, 9, lo2, hi2, layout, layoutHigh, SHIFT, shadow, at);
                assertEquals(LogRecordFormat.opSize(runs.size(), count(both) * CHUNK), size, where);
                assertEquals(size, DirtyMap.opSize(lo2, hi2, SHIFT), where);
                long data = LogRecordFormat.opDataStart(runs.size());
                for (int r = 0; r < runs.size(); r++) {
                    int ro = LogRecordFormat.rangeOffset(op, 0, r), rl = LogRecordFormat.rangeLength(op, 0, r);
                    assertEquals(runs.get(r)[0] * CHUNK + "+" + runs.get(r)[1] * CHUNK, ro + "+" + rl, where + ", range " + r);
                    assertEquals(-1, image.asSlice(ro, rl).mismatch(op.asSlice(data, rl)), where + ", range " + r + "'s bytes");
                    data += rl;
                }
            }
        }
    }

    private static void mark(boolean[] chunks, int off, int len) {
        for (int c = off / CHUNK; c <= (off + len - 1) / CHUNK; c++) {
            chunks[c] = true;
        }
    }

    private static String model(boolean[] chunks) {
        StringBuilder s = new StringBuilder();
        for (boolean c : chunks) {
            s.append(c ? '1' : '0');
        }
        return s.toString();
    }

    private static String bits(long lo, long hi) {
        StringBuilder s = new StringBuilder();
        for (int c = 0; c < DirtyMap.CHUNKS; c++) {
            s.append(((c < 64 ? lo >>> c : hi >>> (c - 64)) & 1) != 0 ? '1' : '0');
        }
        return s.toString();
    }

    private static int count(boolean[] chunks) {
        int n = 0;
        for (boolean c : chunks) {
            n += c ? 1 : 0;
        }
        return n;
    }

    /** The runs of set chunks, as {start, length}. */
    private static List<int[]> runs(boolean[] chunks) {
        List<int[]> runs = new ArrayList<>();
        for (int c = 0; c < chunks.length; c++) {
            if (chunks[c] && (c == 0 || !chunks[c - 1])) {
                int e = c;
                while (e < chunks.length && chunks[e]) {
                    e++;
                }
                runs.add(new int[] {c, e - c});
            }
        }
        return runs;
    }
}
