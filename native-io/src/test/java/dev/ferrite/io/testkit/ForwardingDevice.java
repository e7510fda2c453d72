package dev.ferrite.io.testkit;

import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;

/**
 * A device that passes every call to another: tests extend it and override the calls they watch,
 * delay or hold (a slow flush, a gated write), so that each such device states only what it changes.
 */
public abstract class ForwardingDevice implements BlockDevice {
    protected final BlockDevice inner;

    protected ForwardingDevice(BlockDevice inner) {
        this.inner = inner;
    }

    @Override
    public String name() {
        return inner.name();
    }

    @Override
    public int blockSize() {
        return inner.blockSize();
    }

    @Override
    public long blockCount() {
        return inner.blockCount();
    }

    @Override
    public boolean isReadOnly() {
        return inner.isReadOnly();
    }

    @Override
    public void read(long block, MemorySegment dst) {
        inner.read(block, dst);
    }

    @Override
    public void write(long block, MemorySegment src) {
        inner.write(block, src);
    }

    @Override
    public void submit(IoBatch batch) {
        inner.submit(batch);
    }

    @Override
    public void flush() {
        inner.flush();
    }

    @Override
    public void discard(long block, long count) {
        inner.discard(block, count);
    }

    @Override
    public void close() {
        inner.close();
    }
}
