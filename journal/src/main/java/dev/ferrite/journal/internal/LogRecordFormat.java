package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongUnaryOperator;

import dev.ferrite.io.internal.Crc32c;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U8;
import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A log record: one header block followed by payload blocks, written contiguously (wrapping from the end
 * of the log's circular area to its start if it must), or, {@link #FLAG_INLINE}, a header block alone whose
 * sectors after the first hold the payload: a small checkpoint (a forced commit of a few items) is one block
 * written, as a database's own 4 KiB log write would be, not two. A checkpoint is one or more records with
 * consecutive indices; the first carries {@link #FLAG_START}, the last {@link #FLAG_COMMIT} and a commit
 * op, and only a checkpoint whose every record is present and valid is ever replayed.
 *
 * <pre>
 * header block (little-endian)
 *   0  u32 cycle stamp         4  u32 magic 'FLOG'     8  u16 version     10 u16 flags (START, COMMIT, INLINE)
 *  12  u32 crc32c over header + payload, stamps restored, this field zero
 *  16  u64 LSN (cycle, block) of this record            24  u64 tail LSN when it was written
 *  32  u64 log id              40  u64 checkpoint sequence
 *  48  u32 epoch               52  u32 record index within the checkpoint
 *  56  u32 payload blocks (0 if INLINE)                 60  u32 payload bytes used by ops     64  u32 op count
 *  68..127 zero
 * 128  stamp table: one u32 per payload sector, the word its cycle stamp replaced; the table skips the
 *      words at 512-byte boundaries, which are the header block's own cycle stamps
 *      INLINE (version 3): the payload starts at byte 512 of the header block, whose sectors after the
 *      first are its payload sectors; the stamp table (at most 7 words here) stays in the first sector
 *
 * every 512-byte sector of the record (header and payload) begins with the record's cycle, so a write
 * torn at any sector boundary shows as a sector carrying an older cycle.
 *
 * payload: ops, each 8-byte aligned
 *   0  u16 item type (COMMIT_TYPE for the commit op)   2  u8 range count   3  u8 op flags (ZEROED)
 *   4  u32 op length including padding                 8  u64 home block (commit op: item count)
 *  16  ranges: count x (u32 offset, u32 length), then the ranges' bytes back to back, padded to 8
 *
 *  ZEROED: the block was allocated since it was last written home and every change since is in the
 *  ranges; replay starts from a zero-filled block (version 1 records carry no flags)
 *  commit op: 16 u64 record count of the checkpoint
 * </pre>
 */
public final class LogRecordFormat {
    static final int MAGIC = 0x474F4C46; // "FLOG" as little-endian bytes
    static final short VERSION = 3;
    /** First record version that may carry {@link #FLAG_INLINE}. */
    static final short INLINE_VERSION = 3;
    /** Oldest record version recovery still reads. */
    static final short MIN_VERSION = 1;
    static final short FLAG_START = 1;
    static final short FLAG_COMMIT = 2;
    static final short FLAG_INLINE = 4;
    static final int SECTOR = 512;
    static final int HEADER_FIXED = 128;
    static final int COMMIT_TYPE = 0xFFFF;
    static final int OP_HEADER = 16;
    static final int RANGE_ENTRY = 8;
    static final int COMMIT_OP_SIZE = 24;
    static final int OP_ZEROED = 1;

    private static final long STAMP_OFF = 0, MAGIC_OFF = 4, VERSION_OFF = 8, FLAGS_OFF = 10, CRC_OFF = 12;
    private static final long LSN_OFF = 16, TAIL_OFF = 24, LOG_ID_OFF = 32, SEQ_OFF = 40, EPOCH_OFF = 48;
    private static final long INDEX_OFF = 52, PAYLOAD_BLOCKS_OFF = 56, PAYLOAD_BYTES_OFF = 60, OP_COUNT_OFF = 64;

    private static final long OP_TYPE = 0, OP_RANGES = 2, OP_FLAGS = 3, OP_LENGTH = 4, OP_HOME = 8;

    private LogRecordFormat() {
    }

    /** Most payload sectors one header's stamp table can describe. */
    static int maxPayloadSectors(int blockSize) {
        int words = (blockSize - HEADER_FIXED) / 4;
        return words - (blockSize / SECTOR - 1); // minus the header's own sector-stamp words
    }

    /** Most payload blocks per record. */
    static int maxPayloadBlocks(int blockSize) {
        return maxPayloadSectors(blockSize) / (blockSize / SECTOR);
    }

    /** Most payload bytes an {@link #FLAG_INLINE} record holds: its header block after the first sector. */
    static int maxInlineBytes(int blockSize) {
        return blockSize - SECTOR;
    }

    /** Offset in a record of its payload: after the header's first sector if inline, else after the header block. */
    static long payloadOffset(MemorySegment h, int blockSize) {
        return (flags(h) & FLAG_INLINE) != 0 ? SECTOR : blockSize;
    }

    /** Offset in the header of stamp-table entry {@code k}, skipping the words at 512-byte boundaries. */
    static long stampTableOffset(int k) {
        int firstSectorWords = (SECTOR - HEADER_FIXED) / 4;
        if (k < firstSectorWords) {
            return HEADER_FIXED + 4L * k;
        }
        int rest = k - firstSectorWords;
        int perSector = SECTOR / 4 - 1;
        return (long) SECTOR * (1 + rest / perSector) + 4 + 4L * (rest % perSector);
    }

    // ---- header fields

    static void writeHeader(MemorySegment h, int cycle, short flags, long lsn, long tailLsn, long logId, long seq,
                            int epoch, int index, int payloadBlocks, int payloadBytes, int opCount) {
        h.fill((byte) 0);
        h.set(U32, MAGIC_OFF, MAGIC);
        h.set(U16, VERSION_OFF, VERSION);
        h.set(U16, FLAGS_OFF, flags);
        h.set(U64, LSN_OFF, lsn);
        h.set(U64, TAIL_OFF, tailLsn);
        h.set(U64, LOG_ID_OFF, logId);
        h.set(U64, SEQ_OFF, seq);
        h.set(U32, EPOCH_OFF, epoch);
        h.set(U32, INDEX_OFF, index);
        h.set(U32, PAYLOAD_BLOCKS_OFF, payloadBlocks);
        h.set(U32, PAYLOAD_BYTES_OFF, payloadBytes);
        h.set(U32, OP_COUNT_OFF, opCount);
    }

    static int magic(MemorySegment h) {
        return h.get(U32, MAGIC_OFF);
    }

    static short version(MemorySegment h) {
        return h.get(U16, VERSION_OFF);
    }

    static short flags(MemorySegment h) {
        return h.get(U16, FLAGS_OFF);
    }

    static int crc(MemorySegment h) {
        return h.get(U32, CRC_OFF);
    }

    static long lsn(MemorySegment h) {
        return h.get(U64, LSN_OFF);
    }

    static long tailLsn(MemorySegment h) {
        return h.get(U64, TAIL_OFF);
    }

    static long logId(MemorySegment h) {
        return h.get(U64, LOG_ID_OFF);
    }

    static long seq(MemorySegment h) {
        return h.get(U64, SEQ_OFF);
    }

    static int epoch(MemorySegment h) {
        return h.get(U32, EPOCH_OFF);
    }

    static int index(MemorySegment h) {
        return h.get(U32, INDEX_OFF);
    }

    static int payloadBlocks(MemorySegment h) {
        return h.get(U32, PAYLOAD_BLOCKS_OFF);
    }

    static int payloadBytes(MemorySegment h) {
        return h.get(U32, PAYLOAD_BYTES_OFF);
    }

    static int opCount(MemorySegment h) {
        return h.get(U32, OP_COUNT_OFF);
    }

    // ---- sealing: checksum, then cycle stamps

    /**
     * Seals a formatted record (header and payload contiguous in {@code rec}): saves the first word of
     * every payload sector into the stamp table, computes the checksum over the record as it is now
     * (stamp words zero in the header, original words in the payload), then stamps every sector,
     * header's included, with {@code cycle}.
     */
    static void seal(MemorySegment rec, int blockSize, int cycle) {
        saveStamps(rec, blockSize);
        Crc32c.stampInPlace(rec, CRC_OFF);
        stamp(rec, cycle);
    }

    /**
     * {@link #seal}, given the CRC32C of the payload (padding included, as it is before sealing) and
     * {@link Crc32c#shiftOperator} of its length: the writer checksums a large record's payload while
     * formatting it, each piece while it is still in the cache, and only the header here. The record is
     * the same.
     */
    static void seal(MemorySegment rec, int blockSize, int cycle, int payloadCrc, int payloadShift) {
        MemorySegment header = rec.asSlice(0, blockSize);
        saveStamps(rec, blockSize);
        header.set(U32, CRC_OFF, Crc32c.combine(Crc32c.stampInPlace(header, CRC_OFF), payloadCrc, payloadShift));
        stamp(rec, cycle);
    }

    /** Saves the first word of every payload sector into the header's stamp table. */
    private static void saveStamps(MemorySegment rec, int blockSize) {
        int sectors = (int) (rec.byteSize() / SECTOR);
        int headerSectors = (int) (payloadOffset(rec, blockSize) / SECTOR);
        for (int s = headerSectors; s < sectors; s++) {
            rec.set(U32, stampTableOffset(s - headerSectors), rec.get(U32, (long) s * SECTOR));
        }
    }

    /** Stamps every sector of the record, the header's included, with {@code cycle}. */
    private static void stamp(MemorySegment rec, int cycle) {
        int sectors = (int) (rec.byteSize() / SECTOR);
        for (int s = 0; s < sectors; s++) {
            rec.set(U32, (long) s * SECTOR, cycle);
        }
    }

    /**
     * Undoes {@link #seal}: checks every sector's stamp, restores the saved words, verifies the checksum.
     *
     * @return -1 if the record is intact; else the index of the first sector whose stamp is not
     *         {@code cycle} (a torn write), or {@code sectors} if all stamps are right but the checksum fails
     */
    static int unseal(MemorySegment rec, int blockSize, int cycle) {
        int sectors = (int) (rec.byteSize() / SECTOR);
        for (int s = 0; s < sectors; s++) {
            if (rec.get(U32, (long) s * SECTOR) != cycle) {
                return s;
            }
        }
        MemorySegment header = rec.asSlice(0, blockSize);
        int headerSectors = (int) (payloadOffset(header, blockSize) / SECTOR);
        for (int s = headerSectors; s < sectors; s++) {
            rec.set(U32, (long) s * SECTOR, header.get(U32, stampTableOffset(s - headerSectors)));
        }
        for (int s = 0; s < headerSectors; s++) {
            rec.set(U32, (long) s * SECTOR, 0);
        }
        return Crc32c.verifyInPlace(rec, CRC_OFF) ? -1 : sectors;
    }

    // ---- forging, for the image fuzzer

    /** True if {@code block} starts with a record header's magic (the record may still be torn or stale). */
    public static boolean isRecordHeader(MemorySegment block) {
        return magic(block) == MAGIC;
    }

    /** Blocks of the record whose header is {@code header}, as the header claims. */
    public static long recordBlocks(MemorySegment header) {
        return 1 + Integer.toUnsignedLong(payloadBlocks(header));
    }

    /**
     * Changes one field of the sealed, intact record in {@code rec} (header and payload contiguous) and
     * seals it again under the same cycle, so that its stamps and checksum are valid: field
     * {@code field} (modulo their number) of the header's fields and every op's (type, range count,
     * flags, length, home block, ranges, the commit op's counts), set to {@code change} of its value.
     *
     * @return false, changing nothing, if the record is not intact
     */
    public static boolean rewriteField(MemorySegment rec, int blockSize, int field, LongUnaryOperator change) {
        int cycle = rec.get(U32, STAMP_OFF);
        int sectors = (int) (rec.byteSize() / SECTOR);
        int damage = unseal(rec, blockSize, cycle);
        if (damage != -1) {
            if (damage == sectors) { // only the checksum failed, after unseal restored the stamped words: stamp them again
                for (int s = 0; s < sectors; s++) {
                    rec.set(U32, (long) s * SECTOR, cycle);
                }
            }
            return false;
        }
        List<long[]> fields = new ArrayList<>(List.of(new long[] {VERSION_OFF, 2}, new long[] {FLAGS_OFF, 2},
                new long[] {LSN_OFF, 8}, new long[] {TAIL_OFF, 8}, new long[] {LOG_ID_OFF, 8}, new long[] {SEQ_OFF, 8},
                new long[] {EPOCH_OFF, 4}, new long[] {INDEX_OFF, 4}, new long[] {PAYLOAD_BLOCKS_OFF, 4},
                new long[] {PAYLOAD_BYTES_OFF, 4}, new long[] {OP_COUNT_OFF, 4}));
        long payload = payloadOffset(rec, blockSize);
        long end = Math.min(rec.byteSize(), payload + Integer.toUnsignedLong(payloadBytes(rec)));
        for (long op = payload; op + OP_HEADER <= end; ) {
            fields.addAll(List.of(new long[] {op + OP_TYPE, 2}, new long[] {op + OP_RANGES, 1}, new long[] {op + OP_FLAGS, 1},
                    new long[] {op + OP_LENGTH, 4}, new long[] {op + OP_HOME, 8}));
            int ranges = opType(rec, op) == COMMIT_TYPE ? 0 : opRangeCount(rec, op);
            if (opType(rec, op) == COMMIT_TYPE && op + COMMIT_OP_SIZE <= end) {
                fields.add(new long[] {op + OP_HEADER, 8});
            }
            for (int i = 0; i < ranges && op + OP_HEADER + (long) RANGE_ENTRY * (i + 1) <= end; i++) {
                fields.add(new long[] {op + OP_HEADER + (long) RANGE_ENTRY * i, 4});
                fields.add(new long[] {op + OP_HEADER + (long) RANGE_ENTRY * i + 4, 4});
            }
            int length = opLength(rec, op);
            if (length < OP_HEADER) {
                break;
            }
            op += length;
        }
        long[] f = fields.get(Math.floorMod(field, fields.size()));
        long old = 0;
        for (int i = (int) f[1] - 1; i >= 0; i--) {
            old = old << 8 | Byte.toUnsignedLong(rec.get(U8, f[0] + i));
        }
        long value = change.applyAsLong(old);
        for (int i = 0; i < f[1]; i++) {
            rec.set(U8, f[0] + i, (byte) (value >>> (8 * i)));
        }
        seal(rec, blockSize, cycle);
        return true;
    }

    // ---- ops

    /** Bytes an item op with these ranges takes, padding included. */
    static int opSize(int rangeCount, int dataBytes) {
        return align8(OP_HEADER + RANGE_ENTRY * rangeCount + dataBytes);
    }

    static int align8(int n) {
        return (n + 7) & ~7;
    }

    static void writeOpHeader(MemorySegment p, long off, int type, int rangeCount, int flags, int length, long home) {
        p.set(U16, off + OP_TYPE, (short) type);
        p.set(U8, off + OP_RANGES, (byte) rangeCount);
        p.set(U8, off + OP_FLAGS, (byte) flags);
        p.set(U32, off + OP_LENGTH, length);
        p.set(U64, off + OP_HOME, home);
    }

    static void writeRange(MemorySegment p, long opOff, int i, int offset, int length) {
        long e = opOff + OP_HEADER + (long) RANGE_ENTRY * i;
        p.set(U32, e, offset);
        p.set(U32, e + 4, length);
    }

    static void writeCommitOp(MemorySegment p, long off, long itemCount, long recordCount) {
        writeOpHeader(p, off, COMMIT_TYPE, 0, 0, COMMIT_OP_SIZE, itemCount);
        p.set(U64, off + OP_HEADER, recordCount);
    }

    static int opType(MemorySegment p, long off) {
        return Short.toUnsignedInt(p.get(U16, off + OP_TYPE));
    }

    static int opRangeCount(MemorySegment p, long off) {
        return Byte.toUnsignedInt(p.get(U8, off + OP_RANGES));
    }

    static int opFlags(MemorySegment p, long off) {
        return Byte.toUnsignedInt(p.get(U8, off + OP_FLAGS));
    }

    static int opLength(MemorySegment p, long off) {
        return p.get(U32, off + OP_LENGTH);
    }

    static long opHome(MemorySegment p, long off) {
        return p.get(U64, off + OP_HOME);
    }

    static int rangeOffset(MemorySegment p, long opOff, int i) {
        return p.get(U32, opOff + OP_HEADER + (long) RANGE_ENTRY * i);
    }

    static int rangeLength(MemorySegment p, long opOff, int i) {
        return p.get(U32, opOff + OP_HEADER + (long) RANGE_ENTRY * i + 4);
    }

    /** Offset within the op of the first range's data. */
    static long opDataStart(int rangeCount) {
        return OP_HEADER + (long) RANGE_ENTRY * rangeCount;
    }

    static long commitRecordCount(MemorySegment p, long off) {
        return p.get(U64, off + OP_HEADER);
    }
}
