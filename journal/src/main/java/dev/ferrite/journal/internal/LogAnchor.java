package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;

/**
 * Reads and writes the log anchor ({@link LogAnchorFormat}). Each write is a new generation into the
 * other copy, followed by a flush: when {@link #write} returns, the new tail is durable.
 */
final class LogAnchor implements AutoCloseable {
    private final BlockDevice device;
    private final LogGeometry geometry;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment block;
    private LogAnchorFormat.Anchor current;
    private boolean degraded;

    private LogAnchor(BlockDevice device, LogGeometry geometry) {
        this.device = device;
        this.geometry = geometry;
        this.block = arena.allocate(device.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
    }

    /** Writes the anchor of a fresh, empty log: tail at (1, 0), first sequence 1, epoch 1, clean. */
    static void format(BlockDevice device, LogGeometry geometry, long logId) {
        try (LogAnchor a = new LogAnchor(device, geometry)) {
            a.block.fill((byte) 0);
            LogAnchorFormat.Anchor first = new LogAnchorFormat.Anchor(logId, 1, Lsn.of(1, 0), 1, 1, true,
                    device.blockSize(), geometry.areaBlocks(), geometry.start());
            LogAnchorFormat.encode(a.block, first);
            LogAnchorFormat.encode(a.block, new LogAnchorFormat.Anchor(logId, 2, first.tailLsn(), 1, 1, true,
                    device.blockSize(), geometry.areaBlocks(), geometry.start()));
            device.write(geometry.anchorBlock(), a.block);
            device.flush();
        }
    }

    /**
     * Reads the anchor and checks it describes this log.
     *
     * @throws CorruptionException if neither copy is valid, or the valid one describes another geometry
     */
    static LogAnchor read(BlockDevice device, LogGeometry geometry) {
        LogAnchor a = new LogAnchor(device, geometry);
        try {
            device.read(geometry.anchorBlock(), a.block);
            LogAnchorFormat.Anchor c0 = LogAnchorFormat.decode(a.block, 0);
            LogAnchorFormat.Anchor c1 = LogAnchorFormat.decode(a.block, 1);
            LogAnchorFormat.Anchor best = c0 == null ? c1 : c1 == null ? c0 : c0.generation() > c1.generation() ? c0 : c1;
            if (best == null) {
                throw new CorruptionException(geometry.anchorBlock(), "log anchor", "no valid copy ("
                        + LogAnchorFormat.diagnose(a.block, 0) + "; " + LogAnchorFormat.diagnose(a.block, 1) + ")");
            }
            if (best.blockSize() != device.blockSize() || best.areaBlocks() != geometry.areaBlocks()
                    || best.regionStart() != geometry.start()) {
                throw new CorruptionException(geometry.anchorBlock(), "log anchor", "describes a log of "
                        + (best.areaBlocks() + 1) + " blocks of " + best.blockSize() + " bytes at block "
                        + best.regionStart() + ", expected " + geometry.blocks() + " blocks of " + device.blockSize()
                        + " bytes at block " + geometry.start());
            }
            a.current = best;
            a.degraded = c0 == null || c1 == null;
            return a;
        } catch (RuntimeException e) {
            a.close();
            throw e;
        }
    }

    LogAnchorFormat.Anchor current() {
        return current;
    }

    /**
     * True if only one copy was valid when read. Under sector atomicity that means the other copy's write
     * never completed and the valid one is right; but if the damage is not a torn write, the valid copy may
     * be stale, so recovery then verifies the whole log instead of trusting a clean mark.
     */
    boolean degraded() {
        return degraded;
    }

    /** Durably records a new tail (and epoch, and clean flag) as the next generation. */
    synchronized void write(long tailLsn, long tailSeq, int epoch, boolean clean) {
        LogAnchorFormat.Anchor next = new LogAnchorFormat.Anchor(current.logId(), current.generation() + 1, tailLsn,
                tailSeq, epoch, clean, current.blockSize(), current.areaBlocks(), current.regionStart());
        LogAnchorFormat.encode(block, next);
        device.write(geometry.anchorBlock(), block);
        device.flush();
        current = next;
    }

    @Override
    public void close() {
        arena.close();
    }
}
