package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.ferrite.btree.internal.BlockHeaderFormat;

import static dev.ferrite.io.internal.OnDisk.U32;

/**
 * The block holding a symlink target too long for its inode's inline area (the inode's fork is
 * {@link InodeFormat#FORK_REMOTE}). Written once, when the link is made; freed with the inode.
 *
 * <pre>
 *   0  block header ({@link BlockHeaderFormat}): magic 'FSYM', owner = the symlink's inode number
 *  32  u32 target length in bytes (the inode's size)
 *  36  the target's bytes (UTF-8, no NUL); the rest of the block is zero
 * </pre>
 */
final class SymlinkFormat {
    static final int MAGIC = 0x4D595346; // "FSYM"
    /** Header magic a symlink's block gets when the link is freed: "FSYX". */
    static final int FREED_MAGIC = 0x58595346;
    static final int LENGTH = BlockHeaderFormat.SIZE;
    static final int TARGET = LENGTH + 4;

    private SymlinkFormat() {
    }

    /** Longest target a block holds. */
    static int capacity(int blockSize) {
        return blockSize - TARGET;
    }

    static int length(MemorySegment b) {
        return b.get(U32, LENGTH);
    }

    /** Writes the target into a zeroed block; returns the bytes written past {@link #LENGTH}. */
    static int write(MemorySegment b, byte[] target) {
        b.set(U32, LENGTH, target.length);
        MemorySegment.copy(target, 0, b, ValueLayout.JAVA_BYTE, TARGET, target.length);
        return TARGET - LENGTH + target.length;
    }

    static byte[] target(MemorySegment b, int length) {
        byte[] t = new byte[length];
        MemorySegment.copy(b, ValueLayout.JAVA_BYTE, TARGET, t, 0, length);
        return t;
    }
}
