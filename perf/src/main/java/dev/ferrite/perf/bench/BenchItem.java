package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.internal.Crc32c;
import dev.ferrite.io.internal.OnDisk;
import dev.ferrite.journal.internal.LogItem;

/**
 * The simplest real log item, for journal benchmarks: one block whose first 8 bytes carry the LSN it was
 * written home with and the next 4 its CRC32C; a benchmark changes the rest under {@link #lock}.
 */
public final class BenchItem extends LogItem {
    static final int TYPE = 1;
    /** Bytes of the block a benchmark must leave alone (LSN and checksum). */
    public static final int HEADER = 16;
    private static final long LSN_OFF = 0, CRC_OFF = 8;

    public final ReentrantLock lock = new ReentrantLock();
    public final MemorySegment image;

    public BenchItem(long home, int blockSize, Arena arena) {
        super(home, TYPE);
        this.image = arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT);
    }

    @Override
    protected MemorySegment image() {
        return image;
    }

    @Override
    protected boolean tryLock() {
        return lock.tryLock();
    }

    @Override
    protected void unlock() {
        lock.unlock();
    }

    @Override
    protected void stamp(MemorySegment copy, long lsn) {
        copy.set(OnDisk.U64, LSN_OFF, lsn);
        copy.set(OnDisk.U32, CRC_OFF, Crc32c.computeSkipping(copy, CRC_OFF));
    }
}
