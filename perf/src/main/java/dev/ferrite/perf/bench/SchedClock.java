package dev.ferrite.perf.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * One thread's scheduler clocks, from Linux's {@code /proc/thread-self/schedstat}: the nanoseconds it has
 * run on a CPU and the nanoseconds it has been runnable in a run queue without a CPU. The second is what
 * tells a thread the scheduler kept off the CPUs from one blocked in a system call; a thread CPU clock alone
 * cannot. The file is opened once, by the thread it describes (the link resolves to the opener), and read
 * again at offset 0 each time: one {@code pread}, as cheap as reading the thread's CPU clock.
 */
final class SchedClock implements AutoCloseable {
    private static final Path SELF = Path.of("/proc/thread-self/schedstat");

    private final FileChannel channel;
    private final ByteBuffer text = ByteBuffer.allocate(96);
    private int cursor;
    /** After {@link #read}: nanoseconds on a CPU. */
    long onCpu;
    /** After {@link #read}: nanoseconds runnable, waiting in a run queue. */
    long queued;

    private SchedClock(FileChannel channel) {
        this.channel = channel;
    }

    /** The calling thread's clocks, read once; null where the kernel keeps none (not Linux, no schedstats). */
    static SchedClock ofCurrentThread() {
        FileChannel c;
        try {
            c = FileChannel.open(SELF, StandardOpenOption.READ);
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
        SchedClock clock = new SchedClock(c);
        try {
            clock.read();
            return clock;
        } catch (IOException | IllegalStateException e) {
            clock.close();
            return null;
        }
    }

    /** Reads both clocks now. */
    void read() throws IOException {
        text.clear();
        while (text.hasRemaining() && channel.read(text, text.position()) > 0) {
            // procfs hands the whole line to the first read; the loop only guards a short one
        }
        cursor = 0;
        onCpu = number();
        queued = number();
    }

    /** The decimal number at {@link #cursor}, which moves past it and the space after it. */
    private long number() {
        int start = cursor, end = text.position();
        long v = 0;
        for (; cursor < end && text.get(cursor) >= '0' && text.get(cursor) <= '9'; cursor++) {
            v = v * 10 + (text.get(cursor) - '0');
        }
        if (cursor == start) {
            throw new IllegalStateException("unexpected contents of " + SELF);
        }
        cursor++;
        return v;
    }

    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException e) {
            // read-only procfs file: nothing was buffered
        }
    }
}
