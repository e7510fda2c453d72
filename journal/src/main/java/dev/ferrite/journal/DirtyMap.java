package dev.ferrite.journal;

import java.lang.foreign.MemorySegment;

/**
 * Dirty-chunk bitmaps of a block: bit i covers bytes {@code [i * chunk, (i + 1) * chunk)} with
 * {@code chunk = blockSize / 64}. Logged ranges are the maximal runs of set bits.
 */
final class DirtyMap {
    private DirtyMap() {
    }

    /** Bits covering {@code [offset, offset + length)}. */
    static long of(int offset, int length, int chunkShift) {
        int first = offset >>> chunkShift;
        int last = (offset + length - 1) >>> chunkShift;
        long upper = last == 63 ? -1L : (1L << (last + 1)) - 1;
        return upper & (-1L << first);
    }

    /** Number of runs of set bits. */
    static int runs(long map) {
        // a run starts at every set bit whose lower neighbour is clear
        return Long.bitCount(map & ~(map << 1));
    }

    /** Bytes a logged op for {@code map} takes. */
    static int opSize(long map, int chunkShift) {
        return LogRecordFormat.opSize(runs(map), Long.bitCount(map) << chunkShift);
    }

    /** Worst-case op size of one block: as many runs as possible, or the whole block. */
    static int maxOpSize(int chunkShift) {
        int alternating = LogRecordFormat.opSize(32, 32 << chunkShift);
        int whole = LogRecordFormat.opSize(1, 64 << chunkShift);
        return Math.max(alternating, whole);
    }

    /** Copies the chunks of {@code map} from {@code src} to the same offsets of {@code dst}. */
    static void copy(long map, int chunkShift, MemorySegment src, MemorySegment dst) {
        while (map != 0) {
            int start = Long.numberOfTrailingZeros(map);
            int len = Long.numberOfTrailingZeros(~(map >>> start));
            long off = (long) start << chunkShift;
            MemorySegment.copy(src, off, dst, off, (long) len << chunkShift);
            map &= len + start >= 64 ? 0 : -1L << (start + len);
        }
    }

    /**
     * Writes the op for {@code map} (header, range table, range bytes from {@code data}) at {@code off}
     * of {@code out}; returns its size.
     */
    static int writeOp(MemorySegment out, long off, int type, int flags, long home, long map, int chunkShift,
                       MemorySegment data) {
        int runs = runs(map);
        int size = LogRecordFormat.opSize(runs, Long.bitCount(map) << chunkShift);
        LogRecordFormat.writeOpHeader(out, off, type, runs, flags, size, home);
        long dataOff = off + LogRecordFormat.opDataStart(runs);
        int i = 0;
        while (map != 0) {
            int start = Long.numberOfTrailingZeros(map);
            int len = Long.numberOfTrailingZeros(~(map >>> start));
            int byteOff = start << chunkShift;
            int byteLen = len << chunkShift;
            LogRecordFormat.writeRange(out, off, i++, byteOff, byteLen);
            MemorySegment.copy(data, byteOff, out, dataOff, byteLen);
            dataOff += byteLen;
            map &= start + len >= 64 ? 0 : -1L << (start + len);
        }
        long end = off + size;
        if (dataOff < end) {
            out.asSlice(dataOff, end - dataOff).fill((byte) 0);
        }
        return size;
    }
}
