package dev.ferrite.io.testkit;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Test data that betrays offset mistakes: every 8-byte word holds a hash of its absolute byte offset on
 * the device and a "generation", so a block read from the wrong place, shifted within a block, or left
 * over from an older write never matches.
 */
public final class Blocks {
    private Blocks() {
    }

    /** A zeroed native buffer aligned for every device. */
    public static MemorySegment buffer(Arena arena, long bytes) {
        return arena.allocate(bytes, BlockDevice.BUFFER_ALIGNMENT);
    }

    /** The word stored at device byte {@code offset} by a write of generation {@code generation}. */
    public static long word(long offset, long generation) {
        long z = offset * 0x9E3779B97F4A7C15L + generation * 0xD6E8FEB86659FD93L + 0x632BE59BD9B4E019L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** Fills {@code buf} with the contents generation {@code generation} gives the blocks from {@code firstBlock}. */
    public static MemorySegment fill(MemorySegment buf, long firstBlock, int blockSize, long generation) {
        long base = firstBlock * blockSize;
        for (long o = 0; o < buf.byteSize(); o += 8) {
            buf.set(JAVA_LONG_UNALIGNED, o, word(base + o, generation));
        }
        return buf;
    }

    /** True if block {@code i} of {@code buf} (which holds blocks from {@code firstBlock}) is of generation {@code generation}. */
    public static boolean holds(MemorySegment buf, int i, long firstBlock, int blockSize, long generation) {
        long base = (firstBlock + i) * blockSize;
        long start = (long) i * blockSize;
        for (long o = 0; o < blockSize; o += 8) {
            if (buf.get(JAVA_LONG_UNALIGNED, start + o) != word(base + o, generation)) {
                return false;
            }
        }
        return true;
    }

    /** Asserts every block of {@code buf}, which holds blocks from {@code firstBlock}, is of generation {@code generation}. */
    public static void assertHolds(MemorySegment buf, long firstBlock, int blockSize, long generation) {
        int blocks = (int) (buf.byteSize() / blockSize);
        for (int i = 0; i < blocks; i++) {
            if (!holds(buf, i, firstBlock, blockSize, generation)) {
                fail("block " + (firstBlock + i) + " does not hold generation " + generation + ": " + describe(buf, i, firstBlock, blockSize));
            }
        }
    }

    /** Names the generation (1..64) or zero-fill a block holds, for failure messages. */
    public static String describe(MemorySegment buf, int i, long firstBlock, int blockSize) {
        MemorySegment block = buf.asSlice((long) i * blockSize, blockSize);
        if (block.mismatch(MemorySegment.ofArray(new byte[blockSize])) < 0) {
            return "it is all zeros";
        }
        for (long g = 0; g <= 64; g++) {
            if (holds(buf, i, firstBlock, blockSize, g)) {
                return "it holds generation " + g;
            }
        }
        for (long b = 0; b < 4096; b++) {
            for (long g = 0; g <= 8; g++) {
                if (holds(block, 0, b, blockSize, g)) {
                    return "it holds block " + b + "'s generation " + g + " (misplaced)";
                }
            }
        }
        return "its first word is 0x" + Long.toHexString(block.get(JAVA_LONG_UNALIGNED, 0));
    }

    public static void assertAllZero(MemorySegment buf, String what) {
        long bad = buf.mismatch(MemorySegment.ofArray(new byte[(int) buf.byteSize()]));
        assertEquals(-1, bad, what + " should read back as zeros, but byte " + bad + " is not");
    }

    /** The whole device's contents, read block by block. */
    public static byte[] contents(BlockDevice device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = buffer(arena, device.blockSize());
            byte[] all = new byte[Math.toIntExact(device.size())];
            for (long b = 0; b < device.blockCount(); b++) {
                device.read(b, buf);
                MemorySegment.copy(buf, 0, MemorySegment.ofArray(all), b * device.blockSize(), device.blockSize());
            }
            return all;
        }
    }

    /** Writes generation {@code generation} over the whole device in one transfer. */
    public static void writeAll(BlockDevice device, long generation) {
        try (Arena arena = Arena.ofConfined()) {
            device.write(0, fill(buffer(arena, device.size()), 0, device.blockSize(), generation));
        }
    }
}
