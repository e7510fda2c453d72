package dev.ferrite.io;

/** How a {@link DirectDevice} runs an {@link IoBatch}. */
public enum IoEngineKind {
    /** io_uring if the kernel allows it (it can be disabled by sysctl or seccomp), else THREADS. */
    AUTO,
    /** One io_uring per submitting thread at a time, requests kept {@code ioDepth} deep. */
    IO_URING,
    /** {@code ioDepth} worker threads issuing pread/pwrite; the fallback where io_uring is unavailable. */
    THREADS
}
