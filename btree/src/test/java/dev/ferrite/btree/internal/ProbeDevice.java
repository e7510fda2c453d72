package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferrite.io.IoBatch;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;

/**
 * A device over a {@link MemoryDevice} that tests can watch and stop: it counts reads per block, can
 * hold the reads of one block at a gate, can hold every flush at another (a stalled log device), and can cut the power (from then on writes are dropped, so the
 * memory keeps exactly what was written before the cut: a crash image, with every write whole).
 */
final class ProbeDevice extends ForwardingDevice {
    private final AtomicLongArray reads;
    /** Read side: every write in flight; write side: the cut, which waits for them. */
    private final ReentrantReadWriteLock power = new ReentrantReadWriteLock();
    private volatile boolean cut;
    private volatile long gatedBlock = -1;
    private volatile CountDownLatch gateEntered;
    private volatile CountDownLatch gateOpen;
    private volatile CountDownLatch flushGate;

    ProbeDevice(long blockCount, int blockSize) {
        super(MemoryDevice.create("probe", blockCount, blockSize));
        this.reads = new AtomicLongArray(Math.toIntExact(blockCount));
    }

    /** Reads of {@code block} so far. */
    long reads(long block) {
        return reads.get((int) block);
    }

    /** Makes the next reads of {@code block} wait until {@link #openGate()}; {@link #awaitGate()} sees one arrive. */
    void closeGate(long block) {
        gateEntered = new CountDownLatch(1);
        gateOpen = new CountDownLatch(1);
        gatedBlock = block;
    }

    /** Waits until a read of the gated block is waiting at the gate. */
    void awaitGate() throws InterruptedException {
        if (!gateEntered.await(30, TimeUnit.SECONDS)) {
            throw new AssertionError("no read of block " + gatedBlock + " reached the gate");
        }
    }

    void openGate() {
        gatedBlock = -1;
        gateOpen.countDown();
    }

    /** Makes every flush from now on wait until {@link #releaseFlushes()}. */
    void holdFlushes() {
        flushGate = new CountDownLatch(1);
    }

    void releaseFlushes() {
        CountDownLatch g = flushGate;
        flushGate = null;
        if (g != null) {
            g.countDown();
        }
    }

    /** Drops every write from now on; returns once no write is in flight. */
    void cutPower() {
        power.writeLock().lock();
        cut = true;
        power.writeLock().unlock();
    }

    void restorePower() {
        cut = false;
    }

    @Override
    public void read(long block, MemorySegment dst) {
        long n = dst.byteSize() / blockSize();
        for (long b = block; b < Math.min(block + n, blockCount()); b++) {
            reads.incrementAndGet((int) b);
            if (b == gatedBlock) {
                CountDownLatch open = gateOpen;
                gateEntered.countDown();
                try {
                    if (!open.await(30, TimeUnit.SECONDS)) {
                        throw new AssertionError("the gate of block " + b + " stayed closed");
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(e);
                }
            }
        }
        inner.read(block, dst);
    }

    @Override
    public void write(long block, MemorySegment src) {
        unlessCut(() -> inner.write(block, src));
    }

    @Override
    public void submit(IoBatch batch) {
        for (int i = 0; i < batch.size(); i++) {
            if (batch.isWrite(i)) {
                write(batch.block(i), batch.buffer(i));
            } else {
                read(batch.block(i), batch.buffer(i));
            }
        }
    }

    @Override
    public void discard(long block, long count) {
        unlessCut(() -> inner.discard(block, count));
    }

    /** Runs a change of the memory unless the power is cut; a cut waits for the changes under way. */
    private void unlessCut(Runnable change) {
        power.readLock().lock();
        try {
            if (!cut) {
                change.run();
            }
        } finally {
            power.readLock().unlock();
        }
    }

    /** Writes straight to the memory, power or not: for tests that damage blocks. */
    void poke(long block, MemorySegment src) {
        inner.write(block, src);
    }

    @Override
    public void flush() {
        CountDownLatch g = flushGate;
        try {
            if (g != null && !g.await(30, TimeUnit.SECONDS)) {
                throw new AssertionError("flushes stayed held for 30 s");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        inner.flush();
    }
}
