package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A block of a {@link BitmapAllocator}'s bitmap: one bit per block of the range it covers, 1 = in use.
 *
 * <pre>
 *  0  block header ({@link BlockHeaderFormat}): magic 'FBMP', crc, block, owner (allocator id), LSN
 * 32  u64 first block covered
 * 40  u32 blocks covered
 * 44..63 zero
 * 64  bits, as little-endian 64-bit words: bit i of word w covers block first + 64 w + i
 * </pre>
 */
final class BitmapFormat {
    static final int MAGIC = 0x504D4246; // "FBMP"
    static final int FIRST = 32, COVERED = 40, BITS = 64;

    private BitmapFormat() {
    }

    /** Blocks one bitmap block covers. */
    static int capacity(int blockSize) {
        return (blockSize - BITS) * 8;
    }

    static void init(MemorySegment b, long first, int covered) {
        b.set(U64, FIRST, first);
        b.set(U32, COVERED, covered);
    }

    static long first(MemorySegment b) {
        return b.get(U64, FIRST);
    }

    static int covered(MemorySegment b) {
        return b.get(U32, COVERED);
    }

    static long word(MemorySegment b, int w) {
        return b.get(U64, BITS + 8L * w);
    }

    static void setWord(MemorySegment b, int w, long bits) {
        b.set(U64, BITS + 8L * w, bits);
    }

    static int wordOffset(int w) {
        return BITS + 8 * w;
    }
}
