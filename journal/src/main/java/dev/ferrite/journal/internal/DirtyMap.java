package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;

/**
 * Dirty-chunk bitmaps of a block: bit i covers bytes {@code [i * chunk, (i + 1) * chunk)} with
 * {@code chunk = blockSize / 64}. Logged ranges are the maximal runs of set bits.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class DirtyMap {
    private DirtyMap() {
    }

    /** Bits covering {@code [offset, offset + length)}. */
    public static long of(int offset, int length, int chunkShift) {
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

    /** Bytes the chunks of {@code map} take packed back to back: the size of a shadow holding them. */
    static int packedSize(long map, int chunkShift) {
        return Long.bitCount(map) << chunkShift;
    }

    /** Where chunk {@code chunk} of {@code layout} sits when the chunks of {@code layout} are packed. */
    private static long packedOffset(long layout, int chunk, int chunkShift) {
        return (long) Long.bitCount(layout & ((1L << chunk) - 1)) << chunkShift;
    }

    /**
     * Copies the chunks of {@code map} from the block image {@code src} into {@code packed}, which holds
     * the chunks of {@code layout} (a superset of {@code map}) back to back in chunk order.
     */
    static void pack(long map, long layout, int chunkShift, MemorySegment src, MemorySegment packed) {
        while (map != 0) {
            int start = Long.numberOfTrailingZeros(map);
            int len = Long.numberOfTrailingZeros(~(map >>> start));
            MemorySegment.copy(src, (long) start << chunkShift, packed, packedOffset(layout, start, chunkShift),
                    (long) len << chunkShift);
            map &= len + start >= 64 ? 0 : -1L << (start + len);
        }
    }

    /**
     * Moves packed chunks from the layout {@code from} to the layout {@code to} (a superset), from
     * {@code src} to {@code dst}, which may be the same buffer: runs only move up, so they are moved
     * highest first.
     */
    static void repack(long from, long to, int chunkShift, MemorySegment src, MemorySegment dst) {
        while (from != 0) {
            int end = 64 - Long.numberOfLeadingZeros(from);
            long below = end == 64 ? -1L : (1L << end) - 1;
            long gaps = ~from & below;
            int start = gaps == 0 ? 0 : 64 - Long.numberOfLeadingZeros(gaps);
            MemorySegment.copy(src, packedOffset(from, start, chunkShift), dst, packedOffset(to, start, chunkShift),
                    (long) (end - start) << chunkShift);
            from &= start == 0 ? 0 : (1L << start) - 1;
        }
    }

    /**
     * Writes the op for {@code map} (header, range table, then the range bytes, which {@code packed} holds
     * back to back as {@link #pack} left them) at {@code off} of {@code out}; returns its size.
     */
    static int writeOp(MemorySegment out, long off, int type, int flags, long home, long map, int chunkShift,
                       MemorySegment packed) {
        int runs = runs(map);
        int size = LogRecordFormat.opSize(runs, Long.bitCount(map) << chunkShift);
        LogRecordFormat.writeOpHeader(out, off, type, runs, flags, size, home);
        long dataOff = off + LogRecordFormat.opDataStart(runs);
        int dataBytes = packedSize(map, chunkShift);
        MemorySegment.copy(packed, 0, out, dataOff, dataBytes);
        dataOff += dataBytes;
        int i = 0;
        while (map != 0) {
            int start = Long.numberOfTrailingZeros(map);
            int len = Long.numberOfTrailingZeros(~(map >>> start));
            LogRecordFormat.writeRange(out, off, i++, start << chunkShift, len << chunkShift);
            map &= start + len >= 64 ? 0 : -1L << (start + len);
        }
        long end = off + size;
        if (dataOff < end) {
            out.asSlice(dataOff, end - dataOff).fill((byte) 0);
        }
        return size;
    }
}
