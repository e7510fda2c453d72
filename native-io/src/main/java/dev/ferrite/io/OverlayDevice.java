package dev.ferrite.io;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A writable view of a device that never writes to it: every block written lands in memory and reads
 * see those copies over the device's own contents. What a checker uses to open a volume whose journal
 * needs recovery, replaying the log in memory, and still leave the device exactly as it found it.
 * {@link #flush()} flushes nothing; {@link #discard} zeroes the copies; closing drops them and leaves
 * the underlying device open (its owner closes it). The lock calls go to the underlying device, so a
 * view of a device in use elsewhere can be refused.
 */
public final class OverlayDevice extends AbstractBlockDevice {
    private final BlockDevice base;
    private final Arena arena = Arena.ofShared();
    private final ConcurrentHashMap<Long, MemorySegment> written = new ConcurrentHashMap<>();

    private OverlayDevice(BlockDevice base) {
        super("overlay of " + base.name(), base.blockSize(), base.blockCount(), false);
        this.base = base;
    }

    public static OverlayDevice over(BlockDevice base) {
        return new OverlayDevice(base);
    }

    /** Blocks written to the overlay so far. */
    public int blocksWritten() {
        return written.size();
    }

    @Override
    public boolean tryLockExclusive() {
        return base.tryLockExclusive();
    }

    @Override
    public void unlockExclusive() {
        base.unlockExclusive();
    }

    @Override
    void doRead(long offset, MemorySegment dst) {
        int bs = blockSize();
        long first = offset / bs;
        long n = dst.byteSize() / bs;
        long runStart = -1; // a run of blocks the overlay does not hold, read from the base in one call
        for (long i = 0; i <= n; i++) {
            MemorySegment copy = i < n ? written.get(first + i) : null;
            if (i < n && copy == null) {
                if (runStart < 0) {
                    runStart = i;
                }
                continue;
            }
            if (runStart >= 0) {
                base.read(first + runStart, dst.asSlice(runStart * bs, (i - runStart) * bs));
                runStart = -1;
            }
            if (copy != null) {
                MemorySegment.copy(copy, 0, dst, i * bs, bs);
            }
        }
    }

    @Override
    void doWrite(long offset, MemorySegment src) {
        int bs = blockSize();
        long first = offset / bs;
        for (long i = 0, n = src.byteSize() / bs; i < n; i++) {
            MemorySegment copy = written.computeIfAbsent(first + i, b -> arena.allocate(bs, BUFFER_ALIGNMENT));
            MemorySegment.copy(src, i * bs, copy, 0, bs);
        }
    }

    @Override
    void doSubmit(IoBatch batch) {
        for (int i = 0, n = batch.size(); i < n; i++) {
            batch.started(i);
            int bs = blockSize();
            try {
                if (batch.isWrite(i)) {
                    doWrite(batch.block(i) * bs, batch.buffer(i));
                } else {
                    doRead(batch.block(i) * bs, batch.buffer(i));
                }
                batch.completed(i, 0);
            } catch (DeviceException e) {
                batch.completed(i, e.errno());
            }
        }
    }

    @Override
    void doFlush() {
    }

    @Override
    void doDiscard(long offset, long length) {
        int bs = blockSize();
        MemorySegment zero = arena.allocate(bs, BUFFER_ALIGNMENT);
        for (long b = offset / bs, end = (offset + length) / bs; b < end; b++) {
            doWrite(b * bs, zero);
        }
    }

    @Override
    void doClose() {
        written.clear();
        arena.close();
    }

    @Override
    public String toString() {
        return "OverlayDevice[" + base + ", " + written.size() + " blocks written]";
    }
}
