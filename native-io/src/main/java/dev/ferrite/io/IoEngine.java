package dev.ferrite.io;

/** Runs a validated {@link IoBatch} against one open file descriptor, recording each request's outcome. */
interface IoEngine extends AutoCloseable {
    /** Runs every request; failures are recorded in the batch, never thrown. */
    void run(IoBatch batch);

    @Override
    void close();
}
