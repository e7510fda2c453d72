package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.internal.Crc32c;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * The header every metadata block managed by the buffer cache starts with, whatever its type (B-tree
 * node, tree header, allocation bitmap, and the namespace's blocks above). Verified in one place when a
 * block is read ({@link #verify}) and stamped in one place when it is written home ({@link #stamp}).
 *
 * <pre>
 *  0  u32 magic: the block's type
 *  4  u32 crc32c of the whole block with this field zero
 *  8  u64 block number: where the block belongs (catches misdirected writes and reads)
 * 16  u64 owner: which structure the block belongs to (a tree id, an allocation group, ...)
 * 24  u64 LSN of the checkpoint whose changes the block last carried home
 * 32  type-specific contents
 * </pre>
 */
public final class BlockHeaderFormat {
    public static final int SIZE = 32;
    static final long MAGIC_OFF = 0, CRC_OFF = 4, BLOCK_OFF = 8, OWNER_OFF = 16, LSN_OFF = 24;

    private BlockHeaderFormat() {
    }

    /** Writes a fresh header (LSN 0, checksum left for {@link #stamp}). */
    public static void init(MemorySegment block, int magic, long blockNo, long owner) {
        block.set(U32, MAGIC_OFF, magic);
        block.set(U32, CRC_OFF, 0);
        block.set(U64, BLOCK_OFF, blockNo);
        block.set(U64, OWNER_OFF, owner);
        block.set(U64, LSN_OFF, 0);
    }

    public static int magic(MemorySegment block) {
        return block.get(U32, MAGIC_OFF);
    }

    public static long blockNo(MemorySegment block) {
        return block.get(U64, BLOCK_OFF);
    }

    public static long owner(MemorySegment block) {
        return block.get(U64, OWNER_OFF);
    }

    public static long lsn(MemorySegment block) {
        return block.get(U64, LSN_OFF);
    }

    /** Puts the LSN in and computes the checksum: the last thing done to a block before it goes home. */
    public static void stamp(MemorySegment block, long lsn) {
        block.set(U64, LSN_OFF, lsn);
        block.set(U32, CRC_OFF, Crc32c.computeSkipping(block, CRC_OFF));
    }

    /** True if the stored checksum matches the contents. */
    public static boolean checksumValid(MemorySegment block) {
        return block.get(U32, CRC_OFF) == Crc32c.computeSkipping(block, CRC_OFF);
    }

    /**
     * True if the header names {@code blockNo}, {@code magic} and {@code owner} (-1: any), the checksum
     * unchecked: the cheap test that a block read ahead with another is of the kind asked for, without an
     * exception for each that is not.
     */
    public static boolean claims(MemorySegment block, long blockNo, int magic, long owner) {
        return magic(block) == magic && blockNo(block) == blockNo && (owner < 0 || owner(block) == owner);
    }

    /**
     * Checks a block just read from {@code blockNo}: checksum, magic, block number and owner.
     *
     * @param owner the expected owner, or -1 to accept any
     * @throws CorruptionException naming the block, the structure, and what was expected and found
     */
    public static void verify(MemorySegment block, long blockNo, int magic, long owner, String structure) {
        int stored = block.get(U32, CRC_OFF);
        int computed = Crc32c.computeSkipping(block, CRC_OFF);
        if (stored != computed) {
            throw new CorruptionException(blockNo, structure, "crc32c 0x" + Integer.toHexString(stored)
                    + " stored, 0x" + Integer.toHexString(computed) + " computed");
        }
        if (magic(block) != magic) {
            throw new CorruptionException(blockNo, structure, "magic 0x" + Integer.toHexString(magic(block))
                    + ", expected 0x" + Integer.toHexString(magic));
        }
        if (blockNo(block) != blockNo) {
            throw new CorruptionException(blockNo, structure, "the block says it is block " + blockNo(block));
        }
        if (owner >= 0 && owner(block) != owner) {
            throw new CorruptionException(blockNo, structure, "owner " + owner(block) + ", expected " + owner);
        }
    }
}
