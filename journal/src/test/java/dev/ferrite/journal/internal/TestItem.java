package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.internal.Crc32c;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A log item for tests: one block whose first 8 bytes hold the LSN it was last written home with and the
 * next 4 a CRC32C; 64-bit counters a test changes in transactions sit one per 512-byte sector, so a
 * write torn at any sector boundary mixes counters of different ages.
 */
final class TestItem extends LogItem {
    static final int TYPE = 7;
    static final long LSN_OFF = 0;
    static final long CRC_OFF = 8;
    static final long DATA_OFF = 16;
    static final long SPACING = 512;

    final ReentrantLock lock = new ReentrantLock();
    /** Set when a test "frees" the block: the AIL must drop the item, not write it. */
    volatile boolean stale;
    private final MemorySegment image;

    TestItem(long home, int blockSize, Arena arena) {
        super(home, TYPE);
        this.image = arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT);
    }

    static int counters(int blockSize) {
        return (int) ((blockSize - DATA_OFF - 8) / SPACING) + 1;
    }

    static long offset(int i) {
        return DATA_OFF + SPACING * i;
    }

    long counter(int i) {
        return image.get(U64, offset(i));
    }

    /** Adds to counter i and logs it; caller holds the lock and has a transaction. */
    void add(Transaction tx, int i, long delta) {
        long off = offset(i);
        image.set(U64, off, image.get(U64, off) + delta);
        tx.log(this, (int) off, 8);
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
        copy.set(U64, LSN_OFF, lsn);
        copy.set(U32, CRC_OFF, Crc32c.computeSkipping(copy, CRC_OFF));
    }

    @Override
    protected boolean isStale() {
        return stale;
    }

    static long blockLsn(MemorySegment block) {
        return block.get(U64, LSN_OFF);
    }

    static long blockCounter(MemorySegment block, int i) {
        return block.get(U64, offset(i));
    }

    /** True for a block never written (LSN and checksum zero) or one with a valid checksum. */
    static boolean blockValid(MemorySegment block) {
        return blockLsn(block) == 0 && block.get(U32, CRC_OFF) == 0
                || block.get(U32, CRC_OFF) == Crc32c.computeSkipping(block, CRC_OFF);
    }
}
