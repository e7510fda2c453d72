package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;

/**
 * Opens a log: walks it forward from the anchored tail, replays every complete checkpoint in order,
 * finds the head, and tells a torn tail (normal after a crash: ignored) from damage in the middle
 * (refused).
 *
 * <p>The walk expects, at each position, a record of this log and epoch, with the LSN of that position,
 * the next checkpoint sequence and the next record index. A record that is not there ends the log; a
 * record that is there but torn (a sector with an older cycle stamp) or fails its checksum ends it too,
 * unless a later checkpoint of the same epoch exists further on, which is impossible for a torn write
 * (each checkpoint is flushed before the next is written), so that is reported as corruption.
 */
final class Recovery {
    /** Where the log stands after recovery. */
    record Result(long headLsn, long nextSeq, RecoveryReport report) {
    }

    private final BlockDevice device;
    private final LogGeometry geometry;
    private final int blockSize;
    private final int areaBlocks;
    private final LogAnchorFormat.Anchor anchor;
    private final Arena arena = Arena.ofConfined();
    private MemorySegment recordBuf;

    private long recordsScanned;
    private long itemsReplayed;
    private long itemsSkipped;

    private Recovery(BlockDevice device, LogGeometry geometry, LogAnchorFormat.Anchor anchor) {
        this.device = device;
        this.geometry = geometry;
        this.blockSize = device.blockSize();
        this.areaBlocks = geometry.areaBlocks();
        this.anchor = anchor;
        this.recordBuf = arena.allocate((long) (1 + LogRecordFormat.maxPayloadBlocks(blockSize)) * blockSize,
                BlockDevice.BUFFER_ALIGNMENT);
    }

    static Result run(BlockDevice device, LogGeometry geometry, LogAnchor anchor, Replayer replayer) {
        Recovery r = new Recovery(device, geometry, anchor.current());
        try {
            return r.walk(replayer, anchor.degraded());
        } finally {
            r.arena.close();
        }
    }

    private Result walk(Replayer replayer, boolean anchorDegraded) {
        long start = System.nanoTime();
        long tail = anchor.tailLsn();
        if (anchor.clean() && !anchorDegraded) {
            return new Result(tail, anchor.tailSeq(),
                    new RecoveryReport(true, tail, tail, 0, 0, 0, 0, null, System.nanoTime() - start));
        }
        int cycle = Lsn.cycle(tail);
        int block = Lsn.block(tail);
        long seq = anchor.tailSeq();
        long headLsn = tail;
        long checkpoints = 0;
        long checkpointLsn = tail;
        List<MemorySegment> pending = new ArrayList<>();
        Arena checkpointArena = Arena.ofConfined(); // holds one checkpoint's payloads until it commits
        String stop = null;
        long walked = 0;
        ReplayItem flyweight = new ReplayItem();
        while (walked < areaBlocks) {
            long lsn = Lsn.of(cycle, block);
            String bad = readRecord(block, lsn, seq, pending.size());
            if (bad != null) {
                stop = bad;
                break;
            }
            recordsScanned++;
            MemorySegment header = recordBuf.asSlice(0, blockSize);
            int payloadBlocks = LogRecordFormat.payloadBlocks(header);
            int payloadBytes = LogRecordFormat.payloadBytes(header);
            short flags = LogRecordFormat.flags(header);
            if (pending.isEmpty()) {
                checkpointLsn = lsn;
            }
            MemorySegment payload = checkpointArena.allocate(payloadBytes, 8);
            MemorySegment.copy(recordBuf, LogRecordFormat.payloadOffset(header, blockSize), payload, 0, payloadBytes);
            pending.add(payload);
            block += 1 + payloadBlocks;
            walked += 1 + payloadBlocks;
            while (block >= areaBlocks) {
                block -= areaBlocks;
                cycle++;
            }
            if ((flags & LogRecordFormat.FLAG_COMMIT) != 0) {
                String invalid = replayCheckpoint(pending, checkpointLsn, seq, replayer, flyweight);
                if (invalid != null) {
                    throw new CorruptionException(geometry.areaStart() + Lsn.block(checkpointLsn), "log checkpoint",
                            "sequence " + seq + " at LSN " + Lsn.toString(checkpointLsn) + ": " + invalid);
                }
                checkpoints++;
                seq++;
                pending.clear();
                checkpointArena.close();
                checkpointArena = Arena.ofConfined();
                headLsn = Lsn.of(cycle, block);
            }
        }
        checkpointArena.close();
        if (stop == null && !pending.isEmpty()) {
            stop = "the walk went all around the log without finding the checkpoint's commit record";
        }
        String discarded = null;
        if (stop != null || !pending.isEmpty()) {
            long breakLsn = Lsn.of(cycle, block);
            long later = findLaterCheckpoint(Lsn.block(breakLsn), seq);
            if (later != Lsn.NONE) {
                throw new CorruptionException(geometry.areaStart() + Lsn.block(breakLsn), "log record",
                        "at LSN " + Lsn.toString(breakLsn) + " (checkpoint " + seq + "): " + stop
                                + ", yet a later checkpoint was written at LSN " + Lsn.toString(later)
                                + ": the log is damaged, not torn");
            }
            if (!pending.isEmpty() || !stop.startsWith("end")) {
                discarded = "checkpoint " + seq + " from LSN " + Lsn.toString(pending.isEmpty() ? breakLsn : checkpointLsn)
                        + (pending.isEmpty() ? "" : " (" + pending.size() + " records)") + ": " + stop;
            }
        }
        replayer.finish();
        RecoveryReport report = new RecoveryReport(false, tail, headLsn, recordsScanned, checkpoints, itemsReplayed,
                itemsSkipped, discarded, System.nanoTime() - start);
        RecoveryEvent.emit(report);
        return new Result(headLsn, seq, report);
    }

    /**
     * Reads the record expected at {@code block} into {@code recordBuf} and verifies it.
     *
     * @return null if it is the expected record, intact; else why not (starting with "end" when there is
     *         simply no record of this log, epoch and sequence there)
     */
    private String readRecord(int block, long lsn, long seq, int index) {
        MemorySegment header = recordBuf.asSlice(0, blockSize);
        readArea(block, header);
        if (LogRecordFormat.magic(header) != LogRecordFormat.MAGIC || LogRecordFormat.logId(header) != anchor.logId()) {
            return "end: no record of this log";
        }
        if (LogRecordFormat.epoch(header) != anchor.epoch() || LogRecordFormat.seq(header) != seq
                || LogRecordFormat.lsn(header) != lsn) {
            return "end: found a record of checkpoint " + LogRecordFormat.seq(header) + ", epoch "
                    + LogRecordFormat.epoch(header) + ", LSN " + Lsn.toString(LogRecordFormat.lsn(header)) + " instead";
        }
        short version = LogRecordFormat.version(header);
        if (version < LogRecordFormat.MIN_VERSION || version > LogRecordFormat.VERSION) {
            return "record version " + version + ", expected " + LogRecordFormat.MIN_VERSION + ".." + LogRecordFormat.VERSION;
        }
        if (LogRecordFormat.index(header) != index) {
            return "record index " + LogRecordFormat.index(header) + ", expected " + index;
        }
        return readBody(block, lsn);
    }

    /** With a record's header in {@code recordBuf}: reads its payload and verifies stamps and checksum. */
    private String readBody(int block, long lsn) {
        MemorySegment header = recordBuf.asSlice(0, blockSize);
        int payloadBlocks = LogRecordFormat.payloadBlocks(header);
        int payloadBytes = LogRecordFormat.payloadBytes(header);
        if ((LogRecordFormat.flags(header) & LogRecordFormat.FLAG_INLINE) != 0) {
            if (LogRecordFormat.version(header) < LogRecordFormat.INLINE_VERSION || payloadBlocks != 0
                    || payloadBytes < 1 || payloadBytes > LogRecordFormat.maxInlineBytes(blockSize)) {
                return "inline record (version " + LogRecordFormat.version(header) + ") claims " + payloadBlocks
                        + " payload blocks holding " + payloadBytes + " bytes";
            }
        } else if (payloadBlocks < 1 || payloadBlocks > LogRecordFormat.maxPayloadBlocks(blockSize)
                || payloadBytes < 1 || payloadBytes > (long) payloadBlocks * blockSize) {
            return "header claims " + payloadBlocks + " payload blocks holding " + payloadBytes + " bytes";
        }
        MemorySegment record = recordBuf.asSlice(0, (long) (1 + payloadBlocks) * blockSize);
        if (payloadBlocks > 0) {
            readArea((block + 1) % areaBlocks, record.asSlice(blockSize));
        }
        int damage = LogRecordFormat.unseal(record, blockSize, Lsn.cycle(lsn));
        if (damage >= 0) {
            return damage < record.byteSize() / LogRecordFormat.SECTOR
                    ? "torn write: sector " + damage + " of the record carries another cycle"
                    : "checksum mismatch";
        }
        return null;
    }

    /** True if a whole, intact record of this log with this LSN starts at {@code block}. */
    private boolean recordIntact(int block, long lsn) {
        MemorySegment header = recordBuf.asSlice(0, blockSize);
        readArea(block, header);
        return LogRecordFormat.magic(header) == LogRecordFormat.MAGIC && LogRecordFormat.logId(header) == anchor.logId()
                && LogRecordFormat.lsn(header) == lsn && readBody(block, lsn) == null;
    }

    /** Reads {@code dst.byteSize()} bytes of the circular area starting at area block {@code block}, wrapping. */
    private void readArea(int block, MemorySegment dst) {
        int blocks = (int) (dst.byteSize() / blockSize);
        int first = Math.min(blocks, areaBlocks - block);
        device.read(geometry.areaStart() + block, dst.asSlice(0, (long) first * blockSize));
        if (blocks > first) {
            device.read(geometry.areaStart(), dst.asSlice((long) first * blockSize));
        }
    }

    /**
     * Verifies and replays one complete checkpoint in two passes over its ops: first the items that
     * initialise blocks ({@link Replayer#replaysFirst}), then the others, each pass in log order.
     *
     * @return null, or why the checkpoint is damaged (the first pass finds it before any other item is
     *         replayed)
     */
    private String replayCheckpoint(List<MemorySegment> records, long lsn, long seq, Replayer replayer, ReplayItem item) {
        String bad = replayPass(records, lsn, seq, replayer, item, true);
        return bad != null ? bad : replayPass(records, lsn, seq, replayer, item, false);
    }

    private String replayPass(List<MemorySegment> records, long lsn, long seq, Replayer replayer, ReplayItem item,
                              boolean initialising) {
        long items = 0;
        for (int r = 0; r < records.size(); r++) {
            MemorySegment p = records.get(r);
            long off = 0;
            while (off < p.byteSize()) {
                if (p.byteSize() - off < LogRecordFormat.OP_HEADER) {
                    return "record " + r + " ends inside an op header at byte " + off;
                }
                int len = LogRecordFormat.opLength(p, off);
                if (len < LogRecordFormat.OP_HEADER || (len & 7) != 0 || len > p.byteSize() - off) {
                    return "record " + r + " has an op of length " + len + " at byte " + off;
                }
                int type = LogRecordFormat.opType(p, off);
                if (type == LogRecordFormat.COMMIT_TYPE) {
                    boolean last = r == records.size() - 1 && off + len == p.byteSize();
                    if (!last || LogRecordFormat.opHome(p, off) != items
                            || LogRecordFormat.commitRecordCount(p, off) != records.size()) {
                        return "commit op (items " + LogRecordFormat.opHome(p, off) + ", records "
                                + LogRecordFormat.commitRecordCount(p, off) + ") does not match the checkpoint ("
                                + items + " items, " + records.size() + " records)";
                    }
                    return null;
                }
                item.set(p, off, lsn, seq);
                String bad = verifyRanges(p, off, len);
                if (bad == null) {
                    bad = verifyItem(item, replayer);
                }
                if (bad != null) {
                    return "record " + r + ", op at byte " + off + ": " + bad;
                }
                if (replayer.replaysFirst(type) == initialising) {
                    if (replayer.replay(item)) {
                        itemsReplayed++;
                    } else {
                        itemsSkipped++;
                    }
                }
                items++;
                off += len;
            }
        }
        return "no commit op";
    }

    /** Why {@code item} cannot be one this log wrote, or null if it can. */
    private String verifyItem(ReplayItem item, Replayer replayer) {
        long home = item.home();
        if (!replayer.knows(item.type())) {
            return "item type " + item.type() + " is not one the volume logs";
        }
        int blocks = replayer.blocks(item);
        if (blocks < 1) {
            return "item of type " + item.type() + " for block " + home + " is malformed (" + item.rangeCount()
                    + " ranges" + (item.zeroed() ? ", zeroed" : "") + ")";
        }
        long start = geometry.start(), end = start + geometry.blocks();
        if (home < 0 || home > device.blockCount() - blocks || home < end && home + blocks > start) {
            return "home block" + (blocks == 1 ? " " + home : "s [" + home + ", +" + blocks + ")")
                    + " lie" + (blocks == 1 ? "s" : "") + " outside the device or inside the log";
        }
        return null;
    }

    private String verifyRanges(MemorySegment p, long off, int len) {
        int n = LogRecordFormat.opRangeCount(p, off);
        if ((LogRecordFormat.opFlags(p, off) & ~LogRecordFormat.OP_ZEROED) != 0) {
            return "unknown op flags " + Integer.toHexString(LogRecordFormat.opFlags(p, off));
        }
        long data = 0;
        for (int i = 0; i < n; i++) {
            int o = LogRecordFormat.rangeOffset(p, off, i);
            int l = LogRecordFormat.rangeLength(p, off, i);
            if (o < 0 || l <= 0 || o > blockSize - l) {
                return "range " + i + " [" + o + ", +" + l + ") lies outside a " + blockSize + "-byte block";
            }
            data += l;
        }
        if (LogRecordFormat.opSize(n, (int) data) != len) {
            return n + " ranges of " + data + " bytes do not fill an op of " + len + " bytes";
        }
        return null;
    }

    /**
     * Looks through the rest of the circular area for a valid record written after the expected one: of
     * this epoch with a sequence past {@code seq}, or of a later epoch (whose anchor must then have been
     * lost).
     *
     * @return its LSN, or {@link Lsn#NONE}
     */
    private long findLaterCheckpoint(int fromBlock, long seq) {
        int chunk = 256;
        MemorySegment buf = arena.allocate((long) chunk * blockSize, BlockDevice.BUFFER_ALIGNMENT);
        for (int done = 0; done < areaBlocks; ) {
            int at = (fromBlock + done) % areaBlocks;
            int n = Math.min(chunk, Math.min(areaBlocks - done, areaBlocks - at));
            device.read(geometry.areaStart() + at, buf.asSlice(0, (long) n * blockSize));
            for (int i = 0; i < n; i++) {
                MemorySegment h = buf.asSlice((long) i * blockSize, blockSize);
                if (LogRecordFormat.magic(h) == LogRecordFormat.MAGIC && LogRecordFormat.logId(h) == anchor.logId()
                        && (LogRecordFormat.epoch(h) > anchor.epoch()
                            || LogRecordFormat.epoch(h) == anchor.epoch() && LogRecordFormat.seq(h) > seq)
                        && Lsn.block(LogRecordFormat.lsn(h)) == at + i
                        && recordIntact(at + i, LogRecordFormat.lsn(h))) {
                    return LogRecordFormat.lsn(h);
                }
            }
            done += n;
        }
        return Lsn.NONE;
    }
}
