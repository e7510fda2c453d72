package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

/**
 * Runs a batch on the submitting thread, one pread/pwrite after another ({@link IoEngineKind#SYNC}).
 * For a file on tmpfs, where a transfer is a copy to or from the page cache: io_uring cannot complete
 * such a request inline and punts each to an {@code iou-wrk} kernel thread, and {@link ThreadedEngine}
 * hands requests to its pool the same way; either way the hand-off and the wake-ups cost more CPU than
 * the copies (a 1 KiB put's write-back, docs/benchmarks.md). Nothing to queue or wait for. A buffer
 * may belong to any thread, as with the other engines.
 */
final class SyncEngine implements IoEngine {
    private final int fd;
    private final int blockSize;

    SyncEngine(int fd, int blockSize) {
        this.fd = fd;
        this.blockSize = blockSize;
    }

    @Override
    public void run(IoBatch batch) {
        for (int i = 0; i < batch.size(); i++) {
            batch.started(i);
            batch.completed(i, DirectDevice.finishTransfer(fd, batch.isWrite(i), Posix.anyThread(batch.buffer(i)), batch.block(i) * blockSize, 0));
        }
    }

    @Override
    public void close() {
    }
}
