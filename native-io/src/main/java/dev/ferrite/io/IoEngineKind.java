package dev.ferrite.io;

/** How a {@link DirectDevice} runs an {@link IoBatch}. */
public enum IoEngineKind {
    /**
     * SYNC for a regular file on tmpfs; otherwise io_uring if the kernel allows it (it can be disabled by
     * sysctl or seccomp), else THREADS.
     */
    AUTO,
    /** One io_uring per submitting thread at a time, requests kept {@code ioDepth} deep. */
    IO_URING,
    /** {@code ioDepth} worker threads issuing pread/pwrite; the fallback where io_uring is unavailable. */
    THREADS,
    /**
     * The submitting thread issues each request itself with pread/pwrite, one after another, whatever
     * the {@code ioDepth}: for a file whose transfers are memory copies (tmpfs), which io_uring would
     * hand, one by one, to kernel worker threads that cost more than the copy.
     */
    SYNC
}
