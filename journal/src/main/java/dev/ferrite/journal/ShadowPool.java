package dev.ferrite.journal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.jctools.queues.atomic.MpmcAtomicArrayQueue;

/**
 * Block-sized off-heap buffers holding the CIL's copy of each logged item until its checkpoint is
 * formatted. Committing threads take them, the push thread returns them; both lock-free. When the
 * pool runs dry it carves a new slab from its arena, so the pool grows to the peak number of items in
 * flight and then allocates nothing. Freed at journal close.
 */
final class ShadowPool implements AutoCloseable {
    private static final int SLAB_BLOCKS = 64;

    private final Arena arena = Arena.ofShared();
    private final int blockSize;
    private final MpmcAtomicArrayQueue<MemorySegment> free = new MpmcAtomicArrayQueue<>(1 << 16);

    ShadowPool(int blockSize) {
        this.blockSize = blockSize;
    }

    MemorySegment acquire() {
        MemorySegment s = free.poll();
        return s != null ? s : grow();
    }

    void release(MemorySegment s) {
        free.offer(s); // a full queue drops it: memory stays in the arena until close
    }

    private MemorySegment grow() {
        MemorySegment slab;
        synchronized (arena) {
            slab = arena.allocate((long) blockSize * SLAB_BLOCKS, blockSize);
        }
        for (int i = 1; i < SLAB_BLOCKS; i++) {
            free.offer(slab.asSlice((long) i * blockSize, blockSize));
        }
        return slab.asSlice(0, blockSize);
    }

    @Override
    public void close() {
        arena.close();
    }
}
