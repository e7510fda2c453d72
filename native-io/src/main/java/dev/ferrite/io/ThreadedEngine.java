package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs batches with up to {@code depth} threads issuing pread/pwrite at once: the submitting thread plus
 * {@code depth - 1} pooled daemon workers, all claiming request indices from one counter. The fallback
 * where io_uring is unavailable; it allocates a little per batch, which io_uring does not.
 */
final class ThreadedEngine implements IoEngine {
    private static final AtomicInteger POOLS = new AtomicInteger();

    private final int fd;
    private final int blockSize;
    private final int depth;
    private final ExecutorService workers;

    ThreadedEngine(int fd, int blockSize, int depth) {
        this.fd = fd;
        this.blockSize = blockSize;
        this.depth = depth;
        int pool = POOLS.incrementAndGet();
        AtomicInteger ids = new AtomicInteger();
        this.workers = Executors.newFixedThreadPool(Math.max(1, depth - 1), r -> {
            Thread t = new Thread(r, "ferrite-io-" + pool + "-" + ids.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public void run(IoBatch batch) {
        int n = batch.size();
        AtomicInteger next = new AtomicInteger();
        int helpers = Math.min(n, depth) - 1;
        CountDownLatch done = new CountDownLatch(helpers);
        // A request whose claimer threw has no outcome recorded; the throwable must reach the submitter,
        // or the batch would report that request as done.
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Runnable claimer = () -> {
            try {
                claim(batch, next);
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            } finally {
                done.countDown();
            }
        };
        for (int h = 0; h < helpers; h++) {
            workers.execute(claimer);
        }
        try {
            claim(batch, next);
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        }
        boolean interrupted = false;
        while (true) {
            try {
                done.await();
                break;
            } catch (InterruptedException e) {
                interrupted = true; // the buffers are still in use by workers: wait regardless
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        Throwable t = failure.get();
        if (t instanceof RuntimeException e) {
            throw e;
        }
        if (t instanceof Error e) {
            throw e;
        }
    }

    private void claim(IoBatch batch, AtomicInteger next) {
        for (int i; (i = next.getAndIncrement()) < batch.size(); ) {
            batch.started(i);
            batch.completed(i, DirectDevice.finishTransfer(fd, batch.isWrite(i), Posix.anyThread(batch.buffer(i)),
                    batch.block(i) * blockSize, 0));
        }
    }

    @Override
    public void close() {
        workers.shutdownNow();
    }
}
