package dev.ferrite.io;

import org.jctools.queues.atomic.MpmcAtomicArrayQueue;

/**
 * Runs batches through io_uring. A ring is not thread-safe, so the engine keeps a small pool: a
 * submitting thread borrows a ring (lock-free queue, no allocation once warm), runs its whole batch
 * {@code depth} deep, and returns it. Concurrent submitters beyond the pool's size get a fresh ring,
 * closed afterwards if the pool is full.
 */
final class UringEngine implements IoEngine {
    private static final int POOL_SIZE = 16;

    private final int fd;
    private final int blockSize;
    private final int depth;
    private final MpmcAtomicArrayQueue<IoUring> pool = new MpmcAtomicArrayQueue<>(POOL_SIZE);

    /** Creates the first ring now, so a kernel without io_uring fails here rather than on first use. */
    UringEngine(int fd, int blockSize, int depth) {
        this.fd = fd;
        this.blockSize = blockSize;
        this.depth = depth;
        pool.offer(IoUring.create(depth));
    }

    @Override
    public void run(IoBatch batch) {
        IoUring ring = pool.poll();
        if (ring == null) {
            ring = IoUring.create(depth);
        }
        try {
            ring.run(fd, blockSize, batch, depth);
        } catch (RuntimeException e) {
            ring.close(); // state unknown after a failed io_uring_enter: never reuse it
            throw e;
        }
        if (!pool.offer(ring)) {
            ring.close();
        }
    }

    @Override
    public void close() {
        for (IoUring ring; (ring = pool.poll()) != null; ) {
            ring.close();
        }
    }
}
