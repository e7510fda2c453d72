package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;

/**
 * Dirty-chunk bitmaps of a block, in two words: bit i of the low word covers bytes
 * {@code [i * chunk, (i + 1) * chunk)}, bit i of the high word chunk {@code 64 + i}, with
 * {@code chunk = blockSize / }{@value #CHUNKS}. Logged ranges are the maximal runs of set bits.
 *
 * <p>32-byte chunks for 4 KiB blocks: a B-tree insert changes a few bytes of its node's header, a run of
 * slots and one cell, and an inode's allocation the first 60 bytes of its record, each rounded out to
 * whole chunks in the log; halving the chunk from 64 bytes halves what that rounding costs.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class DirtyMap {
    /** Chunks per block. */
    public static final int CHUNKS = 128;
    /** Both words of the layout of a block's every chunk: each packs at its own offset in the block. */
    static final long ALL = -1L;

    private DirtyMap() {
    }

    /** log2 of the chunk size of blocks of {@code blockSize} bytes. */
    static int chunkShift(int blockSize) {
        return Integer.numberOfTrailingZeros(blockSize / CHUNKS);
    }

    /** The low word of the bits covering {@code [offset, offset + length)}. */
    public static long low(int offset, int length, int chunkShift) {
        int first = offset >>> chunkShift;
        int last = (offset + length - 1) >>> chunkShift;
        return first > 63 ? 0 : bits(first, Math.min(last, 63));
    }

    /** The high word of the bits covering {@code [offset, offset + length)}. */
    public static long high(int offset, int length, int chunkShift) {
        int first = offset >>> chunkShift;
        int last = (offset + length - 1) >>> chunkShift;
        return last < 64 ? 0 : bits(Math.max(first, 64) - 64, last - 64);
    }

    /** Bits {@code first..last} of a word, both in 0..63. */
    private static long bits(int first, int last) {
        long upper = last == 63 ? -1L : (1L << (last + 1)) - 1;
        return upper & (-1L << first);
    }

    /** Number of chunks set. */
    static int chunks(long low, long high) {
        return Long.bitCount(low) + Long.bitCount(high);
    }

    /** Number of runs of set bits (a run may cross from the low word into the high one). */
    static int runs(long low, long high) {
        // a run starts at every set bit whose lower neighbour is clear
        return Long.bitCount(low & ~(low << 1)) + Long.bitCount(high & ~(high << 1 | low >>> 63));
    }

    /** Bytes a logged op for the map takes. */
    static int opSize(long low, long high, int chunkShift) {
        return LogRecordFormat.opSize(runs(low, high), chunks(low, high) << chunkShift);
    }

    /** Worst-case op size of one block: as many runs as possible, or the whole block. */
    static int maxOpSize(int chunkShift) {
        int alternating = LogRecordFormat.opSize(CHUNKS / 2, CHUNKS / 2 << chunkShift);
        int whole = LogRecordFormat.opSize(1, CHUNKS << chunkShift);
        return Math.max(alternating, whole);
    }

    /** Bytes the chunks of the map take packed back to back: the size of a shadow holding them. */
    static int packedSize(long low, long high, int chunkShift) {
        return chunks(low, high) << chunkShift;
    }

    /**
     * Packed size above which a shadow is laid out as the whole block ({@link #ALL}): a commit that dirties
     * chunks between packed ones must move every chunk above them, which in a leaf taking inserts (new
     * cells below the old, new slots above) is most of the shadow again and again; a block-sized shadow
     * costs at most four times the packed one.
     */
    static int spreadBytes(int chunkShift) {
        return CHUNKS / 4 << chunkShift;
    }

    /** Where chunk {@code chunk} of the layout sits when its chunks are packed. */
    private static long packedOffset(long layoutLow, long layoutHigh, int chunk, int chunkShift) {
        int before = chunk < 64 ? Long.bitCount(layoutLow & ((1L << chunk) - 1))
                : Long.bitCount(layoutLow) + Long.bitCount(layoutHigh & ((1L << (chunk - 64)) - 1));
        return (long) before << chunkShift;
    }

    /** The first set chunk at or after {@code from}, or {@value #CHUNKS}. */
    private static int nextSet(long low, long high, int from) {
        if (from < 64) {
            long m = low & -1L << from;
            if (m != 0) {
                return Long.numberOfTrailingZeros(m);
            }
            from = 64;
        }
        long m = from < CHUNKS ? high & -1L << (from - 64) : 0;
        return m != 0 ? 64 + Long.numberOfTrailingZeros(m) : CHUNKS;
    }

    /** The first clear chunk at or after {@code from}, or {@value #CHUNKS}. */
    private static int nextClear(long low, long high, int from) {
        return nextSet(~low, ~high, from);
    }

    /**
     * Copies the chunks of the map from the block image {@code src} into the shadow at {@code at} of
     * {@code packed}, which holds the chunks of the layout (a superset of the map) back to back in chunk
     * order.
     */
    static void pack(long low, long high, long layoutLow, long layoutHigh, int chunkShift, MemorySegment src, MemorySegment packed,
                     long at) {
        for (int start = nextSet(low, high, 0), end; start < CHUNKS; start = nextSet(low, high, end)) {
            end = nextClear(low, high, start);
            MemorySegment.copy(src, (long) start << chunkShift, packed, at + packedOffset(layoutLow, layoutHigh, start, chunkShift),
                    (long) (end - start) << chunkShift);
        }
    }

    /**
     * Moves packed chunks from the layout {@code from} to the layout {@code to} (a superset), from the
     * shadow at {@code srcAt} of {@code src} to the one at {@code dstAt} of {@code dst}, which may be the
     * same: chunks only move up, so they are moved highest first, the high word's runs before the low
     * word's. In place, the chunks below the lowest one {@code to} adds stay where they are, so the move
     * stops at the first run that does not move.
     */
    static void repack(long fromLow, long fromHigh, long toLow, long toHigh, int chunkShift, MemorySegment src, long srcAt,
                       MemorySegment dst, long dstAt) {
        boolean inPlace = src == dst && srcAt == dstAt;
        for (int word = 1; word >= 0; word--) {
            int base = word << 6;
            for (long from = word == 1 ? fromHigh : fromLow; from != 0; ) {
                int end = 64 - Long.numberOfLeadingZeros(from);
                long below = end == 64 ? -1L : (1L << end) - 1;
                long gaps = ~from & below;
                int start = gaps == 0 ? 0 : 64 - Long.numberOfLeadingZeros(gaps);
                long fromOff = packedOffset(fromLow, fromHigh, base + start, chunkShift);
                long toOff = packedOffset(toLow, toHigh, base + start, chunkShift);
                if (fromOff == toOff && inPlace) {
                    return;
                }
                MemorySegment.copy(src, srcAt + fromOff, dst, dstAt + toOff, (long) (end - start) << chunkShift);
                from &= start == 0 ? 0 : (1L << start) - 1;
            }
        }
    }

    /**
     * Writes the op for the map (header, range table, then the range bytes, which the shadow at {@code at}
     * of {@code packed} holds at their places in the layout, as {@link #pack} left them) at {@code off} of
     * {@code out}; returns its size.
     */
    static int writeOp(MemorySegment out, long off, int type, int flags, long home, long low, long high, long layoutLow,
                       long layoutHigh, int chunkShift, MemorySegment packed, long at) {
        int runs = runs(low, high);
        int size = LogRecordFormat.opSize(runs, chunks(low, high) << chunkShift);
        LogRecordFormat.writeOpHeader(out, off, type, runs, flags, size, home);
        long dataOff = off + LogRecordFormat.opDataStart(runs);
        boolean contiguous = layoutLow == low && layoutHigh == high;
        if (contiguous) {
            int dataBytes = packedSize(low, high, chunkShift);
            MemorySegment.copy(packed, at, out, dataOff, dataBytes);
            dataOff += dataBytes;
        }
        int i = 0;
        for (int start = nextSet(low, high, 0), end; start < CHUNKS; start = nextSet(low, high, end)) {
            end = nextClear(low, high, start);
            int bytes = (end - start) << chunkShift;
            LogRecordFormat.writeRange(out, off, i++, start << chunkShift, bytes);
            if (!contiguous) {
                MemorySegment.copy(packed, at + packedOffset(layoutLow, layoutHigh, start, chunkShift), out, dataOff, bytes);
                dataOff += bytes;
            }
        }
        long end = off + size;
        if (dataOff < end) {
            out.asSlice(dataOff, end - dataOff).fill((byte) 0);
        }
        return size;
    }
}
