package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;

import dev.ferrite.io.internal.Crc32c;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * The log anchor: the first block of the log region, holding where recovery starts. Two copies live in
 * the block's first two 512-byte sectors; each update writes the next generation into the other copy,
 * so a torn update leaves the previous copy intact (sector writes are atomic, DESIGN section 3).
 * Recovery uses the valid copy with the higher generation.
 *
 * <pre>
 * copy (512 bytes, at sector 0 or 1 of the anchor block; little-endian)
 *   0  u32 magic 'FANC'        4  u16 version     6  u16 flags (CLEAN)
 *   8  u32 crc32c of the 512 bytes with this field zero
 *  12  u32 block size         16  u64 log id (random at format)
 *  24  u64 generation (+1 per anchor write)
 *  32  u64 tail LSN: where the oldest checkpoint recovery may need starts
 *  40  u64 sequence of the checkpoint that starts at the tail (or of the next one)
 *  48  u32 epoch: mount generation; only records of this epoch may follow the tail
 *  52  u32 circular area size in blocks
 *  56  u64 first device block of the log region
 *  64..511 zero
 * </pre>
 *
 * The anchor is written only after the metadata behind the old tail is durable at home, and log space
 * behind the new tail is reused only after the anchor itself is durable: records from the anchor's tail
 * to the head are therefore always intact, and recovery walks them forward with no search.
 */
final class LogAnchorFormat {
    static final int MAGIC = 0x434E4146; // "FANC" as little-endian bytes
    static final short VERSION = 1;
    static final short FLAG_CLEAN = 1;
    static final int COPY_SIZE = 512;

    private static final long MAGIC_OFF = 0, VERSION_OFF = 4, FLAGS_OFF = 6, CRC_OFF = 8, BLOCK_SIZE_OFF = 12;
    private static final long LOG_ID_OFF = 16, GENERATION_OFF = 24, TAIL_OFF = 32, TAIL_SEQ_OFF = 40;
    private static final long EPOCH_OFF = 48, AREA_BLOCKS_OFF = 52, REGION_START_OFF = 56;

    private LogAnchorFormat() {
    }

    /** The decoded contents of one anchor copy. */
    record Anchor(long logId, long generation, long tailLsn, long tailSeq, int epoch, boolean clean,
                  int blockSize, int areaBlocks, long regionStart) {
    }

    /** Writes {@code a} into copy slot {@code generation & 1} of the anchor block, leaving the other slot alone. */
    static void encode(MemorySegment block, Anchor a) {
        MemorySegment c = block.asSlice((a.generation() & 1) * COPY_SIZE, COPY_SIZE);
        c.fill((byte) 0);
        c.set(U32, MAGIC_OFF, MAGIC);
        c.set(U16, VERSION_OFF, VERSION);
        c.set(U16, FLAGS_OFF, a.clean() ? FLAG_CLEAN : 0);
        c.set(U32, BLOCK_SIZE_OFF, a.blockSize());
        c.set(U64, LOG_ID_OFF, a.logId());
        c.set(U64, GENERATION_OFF, a.generation());
        c.set(U64, TAIL_OFF, a.tailLsn());
        c.set(U64, TAIL_SEQ_OFF, a.tailSeq());
        c.set(U32, EPOCH_OFF, a.epoch());
        c.set(U32, AREA_BLOCKS_OFF, a.areaBlocks());
        c.set(U64, REGION_START_OFF, a.regionStart());
        c.set(U32, CRC_OFF, Crc32c.computeSkipping(c, CRC_OFF));
    }

    /** Copy {@code slot} (0 or 1) if its magic, version and checksum are right, else null. */
    static Anchor decode(MemorySegment block, int slot) {
        MemorySegment c = block.asSlice((long) slot * COPY_SIZE, COPY_SIZE);
        if (c.get(U32, MAGIC_OFF) != MAGIC || c.get(U16, VERSION_OFF) != VERSION
                || c.get(U32, CRC_OFF) != Crc32c.computeSkipping(c, CRC_OFF)) {
            return null;
        }
        return new Anchor(c.get(U64, LOG_ID_OFF), c.get(U64, GENERATION_OFF), c.get(U64, TAIL_OFF),
                c.get(U64, TAIL_SEQ_OFF), c.get(U32, EPOCH_OFF), (c.get(U16, FLAGS_OFF) & FLAG_CLEAN) != 0,
                c.get(U32, BLOCK_SIZE_OFF), c.get(U32, AREA_BLOCKS_OFF), c.get(U64, REGION_START_OFF));
    }

    /** What is wrong with copy {@code slot}, for error messages. */
    static String diagnose(MemorySegment block, int slot) {
        MemorySegment c = block.asSlice((long) slot * COPY_SIZE, COPY_SIZE);
        int magic = c.get(U32, MAGIC_OFF);
        if (magic != MAGIC) {
            return "copy " + slot + ": magic 0x" + Integer.toHexString(magic) + ", expected 0x" + Integer.toHexString(MAGIC);
        }
        short version = c.get(U16, VERSION_OFF);
        if (version != VERSION) {
            return "copy " + slot + ": version " + version + ", this build reads version " + VERSION;
        }
        return "copy " + slot + ": crc32c 0x" + Integer.toHexString(c.get(U32, CRC_OFF)) + ", computed 0x"
                + Integer.toHexString(Crc32c.computeSkipping(c, CRC_OFF));
    }
}
