package dev.ferrite.io;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A reusable list of block reads and writes handed to {@link BlockDevice#submit(IoBatch)} in one call.
 * Filling and submitting a batch allocates nothing, so hot paths keep one per thread and
 * {@link #clear()} it between uses. Not thread-safe: one thread fills and submits it.
 *
 * <p>With {@link #timed(boolean) timing} on, the device stamps each request's submit-to-completion
 * latency, which is how the benchmark measures per-request latency at queue depth.
 */
public final class IoBatch {
    private final long[] blocks;
    private final MemorySegment[] buffers;
    private final boolean[] writes;
    private final int[] errors;
    private final long[] startNanos;
    private final long[] latencyNanos;
    private int size;
    private boolean timed;

    public IoBatch(int capacity) {
        if (capacity < 1) {
            throw new InvalidArgumentException("batch capacity " + capacity + " must be at least 1");
        }
        blocks = new long[capacity];
        buffers = new MemorySegment[capacity];
        writes = new boolean[capacity];
        errors = new int[capacity];
        startNanos = new long[capacity];
        latencyNanos = new long[capacity];
    }

    /** Adds a read of {@code dst.byteSize()} bytes starting at {@code block}. */
    public IoBatch read(long block, MemorySegment dst) {
        return add(block, dst, false);
    }

    /** Adds a write of {@code src.byteSize()} bytes starting at {@code block}. */
    public IoBatch write(long block, MemorySegment src) {
        return add(block, src, true);
    }

    private IoBatch add(long block, MemorySegment buffer, boolean write) {
        if (size == blocks.length) {
            throw new InvalidArgumentException("batch is full at " + blocks.length + " requests");
        }
        blocks[size] = block;
        buffers[size] = buffer;
        writes[size] = write;
        errors[size] = 0;
        latencyNanos[size] = 0;
        size++;
        return this;
    }

    /** Forgets every request (and the references to their buffers). */
    public void clear() {
        Arrays.fill(buffers, 0, size, null);
        size = 0;
    }

    /** Turns per-request latency stamping on or off (off by default: it costs two clock reads per request). */
    public IoBatch timed(boolean on) {
        this.timed = on;
        return this;
    }

    public boolean isTimed() {
        return timed;
    }

    public int size() {
        return size;
    }

    public int capacity() {
        return blocks.length;
    }

    public long block(int i) {
        return blocks[i];
    }

    public MemorySegment buffer(int i) {
        return buffers[i];
    }

    public boolean isWrite(int i) {
        return writes[i];
    }

    /** 0 if request {@code i} succeeded, else the errno it failed with (after {@link BlockDevice#submit}). */
    public int error(int i) {
        return errors[i];
    }

    /** Submit-to-completion time of request {@code i}, if the batch was {@link #timed(boolean) timed}. */
    public long latencyNanos(int i) {
        return latencyNanos[i];
    }

    // Called by devices while the batch runs; public for a device outside this package that runs a batch
    // request by request (the test kit's recording device).

    /** Clears every request's result before the batch runs. */
    public void resetResults() {
        Arrays.fill(errors, 0, size, 0);
    }

    /** Request {@code i} is about to reach the device (its latency starts now). */
    public void started(int i) {
        if (timed) {
            startNanos[i] = System.nanoTime();
        }
    }

    /** Request {@code i} finished: 0 or the errno it failed with. */
    public void completed(int i, int errno) {
        errors[i] = errno;
        if (timed) {
            latencyNanos[i] = System.nanoTime() - startNanos[i];
        }
    }

    /** Index of the first failed request, or -1. */
    public int firstError() {
        for (int i = 0; i < size; i++) {
            if (errors[i] != 0) {
                return i;
            }
        }
        return -1;
    }

    /** Number of failed requests. */
    public int errorCount() {
        int n = 0;
        for (int i = 0; i < size; i++) {
            if (errors[i] != 0) {
                n++;
            }
        }
        return n;
    }
}
