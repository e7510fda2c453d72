package dev.ferrite.btree.internal;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.journal.JournalOptions;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** A writer held back by the journal (its log device stalled) holds no node lock: readers go on. */
class TxnThrottleTest {
    static final int BS = 4096;

    private static byte[] key(long i) {
        return ByteBuffer.allocate(8).putLong(i).array();
    }

    @Test
    void aReaderOfTheNodesOfAThrottledWriterIsNotBlocked() throws Exception {
        try (ProbeDevice dev = new ProbeDevice(16384, BS)) {
            Store.format(dev, 1024, 64L << 20).close();
            try (Store s = Store.open(dev, 1024, 64L << 20, JournalOptions.defaults().withPushThreshold(64 * 1024))) {
                dev.holdFlushes();
                AtomicBoolean stop = new AtomicBoolean();
                AtomicLong written = new AtomicLong(-1);
                AtomicReference<Throwable> err = new AtomicReference<>();
                byte[] value = new byte[400];
                // ascending keys: every put changes the rightmost leaf, which the writer holds until commit
                Thread writer = new Thread(() -> {
                    try {
                        for (long i = 0; !stop.get(); i++) {
                            s.tree.put(key(i), value);
                            written.set(i);
                        }
                    } catch (Throwable e) {
                        err.set(e);
                    }
                }, "writer");
                writer.setDaemon(true);
                writer.start();
                try {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (!(writer.getState() == Thread.State.TIMED_WAITING && LockSupport.getBlocker(writer) != null
                            && LockSupport.getBlocker(writer).getClass().getSimpleName().equals("LogWriter"))) {
                        if (System.nanoTime() - deadline > 0 || !writer.isAlive()) {
                            fail("the writer never waited for the log: " + err.get() + "; " + s.journal.diagnostics());
                        }
                        Thread.onSpinWait();
                    }
                    long last = written.get() + 1; // committed, its put() waiting in the throttle
                    CompletableFuture<byte[]> read = CompletableFuture.supplyAsync(() -> s.tree.get(key(last)));
                    try {
                        assertArrayEquals(value, read.get(5, TimeUnit.SECONDS), "key " + last);
                    } catch (TimeoutException e) {
                        fail("a get of key " + last + " waited over 5 s for the throttled writer's nodes; " + s.journal.diagnostics());
                    }
                } finally {
                    stop.set(true);
                    dev.releaseFlushes();
                    writer.join(TimeUnit.SECONDS.toMillis(30));
                }
                assertEquals(null, err.get());
                assertTrue(s.journal.stats().commitThrottles() > 0, s.journal.stats().toString());
                TreeCheck c = s.tree.check();
                assertTrue(c.ok(), c.toString());
            }
        }
    }
}
