package dev.ferrite.io;

import dev.ferrite.io.internal.OffHeap;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A device in RAM: one off-heap segment owned by a shared {@link Arena} freed on close. Flush is a no-op
 * (nothing survives the process anyway); discard zeroes. The embedded default device, and what crash
 * tests materialize their images into.
 */
public final class MemoryDevice extends AbstractBlockDevice {
    private final Arena arena;
    private final MemorySegment memory;

    private MemoryDevice(String name, int blockSize, long blockCount, boolean readOnly, Arena arena, MemorySegment memory) {
        super(name, blockSize, blockCount, readOnly);
        this.arena = arena;
        this.memory = memory;
    }

    /**
     * A zero-filled read-write device of {@code blockCount} blocks of {@code blockSize} bytes.
     *
     * @throws InvalidArgumentException if the block size is not a power of two from 512 to 65536 or the
     *                                  count is below 1
     */
    public static MemoryDevice create(long blockCount, int blockSize) {
        return create("memory", blockCount, blockSize);
    }

    /**
     * As {@link #create(long, int)}, with a name for messages.
     *
     * @throws InvalidArgumentException as {@link #create(long, int)}
     */
    public static MemoryDevice create(String name, long blockCount, int blockSize) {
        DeviceOptions.requireBlockSize(blockSize);
        if (blockCount < 1) {
            throw new InvalidArgumentException(name + ": device must hold at least one block, not " + blockCount);
        }
        Arena arena = Arena.ofShared();
        try {
            MemorySegment memory = OffHeap.resident(Math.multiplyExact(blockCount, blockSize), arena);
            return new MemoryDevice(name, blockSize, blockCount, false, arena, memory);
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    /**
     * A new independent device holding a copy of this one's current contents: an image of one point in
     * time, as a crash there would leave it (every write that returned before it, none begun after; calls
     * made meanwhile wait for the copy), so a live device may be copied.
     *
     * @throws DeviceException EBADF once this device is closed
     */
    public MemoryDevice copy(String name) {
        MemoryDevice copy = create(name, blockCount(), blockSize());
        try {
            return alone("copy", () -> {
                MemorySegment.copy(memory, 0, copy.memory, 0, memory.byteSize());
                return copy;
            });
        } catch (RuntimeException e) {
            copy.close();
            throw e;
        }
    }

    /** The device's memory, for code in this package that builds images directly. */
    MemorySegment memory() {
        return memory;
    }

    @Override
    void doRead(long offset, MemorySegment dst) {
        MemorySegment.copy(memory, offset, dst, 0, dst.byteSize());
    }

    @Override
    void doWrite(long offset, MemorySegment src) {
        MemorySegment.copy(src, 0, memory, offset, src.byteSize());
    }

    @Override
    void doSubmit(IoBatch batch) {
        for (int i = 0, n = batch.size(); i < n; i++) {
            batch.started(i);
            long offset = batch.block(i) * blockSize();
            MemorySegment buf = batch.buffer(i);
            if (batch.isWrite(i)) {
                MemorySegment.copy(buf, 0, memory, offset, buf.byteSize());
            } else {
                MemorySegment.copy(memory, offset, buf, 0, buf.byteSize());
            }
            batch.completed(i, 0);
        }
    }

    @Override
    void doFlush() {
    }

    @Override
    void doDiscard(long offset, long length) {
        memory.asSlice(offset, length).fill((byte) 0);
    }

    @Override
    void doClose() {
        arena.close();
    }

    @Override
    public String toString() {
        return "MemoryDevice[" + name() + ", " + blockCount() + " x " + blockSize() + "]";
    }
}
