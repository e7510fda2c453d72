package dev.ferrite.journal.testkit;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.internal.Crc32c;
import dev.ferrite.journal.internal.LogItem;
import dev.ferrite.journal.internal.Transaction;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * The simplest real log item, for journal tests and the journal benchmarks: one block whose first 8 bytes
 * hold the LSN it was last written home with and the next 4 a CRC32C; 64-bit counters a test changes in
 * transactions sit one per 512-byte sector, so a write torn at any sector boundary mixes counters of
 * different ages. Whoever changes the block holds {@link #lock}.
 */
public final class TestItem extends LogItem {
    public static final int TYPE = 7;
    public static final long LSN_OFF = 0;
    public static final long CRC_OFF = 8;
    /** Bytes of the block a caller must leave alone (LSN and checksum); the counters start here. */
    public static final int DATA_OFF = 16;
    public static final long SPACING = 512;

    public final ReentrantLock lock = new ReentrantLock();
    /** Set when a test "frees" the block: the AIL must drop the item, not write it. */
    public volatile boolean stale;
    private final MemorySegment image;

    public TestItem(long home, int blockSize, Arena arena) {
        super(home, TYPE);
        this.image = arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT);
    }

    public static int counters(int blockSize) {
        return (int) ((blockSize - DATA_OFF - 8) / SPACING) + 1;
    }

    public static long offset(int i) {
        return DATA_OFF + SPACING * i;
    }

    public long counter(int i) {
        return image.get(U64, offset(i));
    }

    /** Adds to counter i and logs it; caller holds the lock and has a transaction. */
    public void add(Transaction tx, int i, long delta) {
        long off = offset(i);
        image.set(U64, off, image.get(U64, off) + delta);
        tx.log(this, (int) off, 8);
    }

    /** The block as the caller changes it (under {@link #lock}); what the journal copies from. */
    @Override
    public MemorySegment image() {
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

    /** Public so a replayer or a test can stamp a block image as write-back does. */
    @Override
    public void stamp(MemorySegment copy, long lsn) {
        copy.set(U64, LSN_OFF, lsn);
        copy.set(U32, CRC_OFF, Crc32c.computeSkipping(copy, CRC_OFF));
    }

    @Override
    protected boolean isStale() {
        return stale;
    }

    public static long blockLsn(MemorySegment block) {
        return block.get(U64, LSN_OFF);
    }

    public static long blockCounter(MemorySegment block, int i) {
        return block.get(U64, offset(i));
    }

    /** True for a block never written (LSN and checksum zero) or one with a valid checksum. */
    public static boolean blockValid(MemorySegment block) {
        return blockLsn(block) == 0 && block.get(U32, CRC_OFF) == 0
                || block.get(U32, CRC_OFF) == Crc32c.computeSkipping(block, CRC_OFF);
    }
}
