package dev.ferrite.dir;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice.Op;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.journal.JournalOptions;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A namespace writer held back by the journal (its CIL past the hard limit while the log device is
 * behind) must wait with no lock of the namespace held: with the device's flushes stalled, a writer
 * creates files in {@code /d} until it parks in the journal's throttle; opening {@code /d}, which takes
 * the directory's inode lock, must then finish while the writer still waits.
 */
class NamespaceThrottleTest {
    private static final long READER_BOUND_MS = 3_000;

    @Test
    void aReaderIsNotBlockedByAThrottledWriter() throws Exception {
        VolumeOptions options = VolumeFixtures.OPTIONS.withJournal(JournalOptions.defaults().withPushThreshold(64 * 1024));
        try (RecordingDevice dev = RecordingDevice.wrap(MemoryDevice.create(16384, 4096))) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                AtomicBoolean stop = new AtomicBoolean();
                AtomicInteger created = new AtomicInteger();
                CompletableFuture<Void> written = new CompletableFuture<>();
                dev.stall(Op.FLUSH);
                Thread w = Thread.ofPlatform().daemon().name("throttled-writer").start(() -> {
                    try {
                        for (int i = 0; !stop.get(); i++) {
                            ns.create("/d/n" + i, 0644, true);
                            created.incrementAndGet();
                        }
                        written.complete(null);
                    } catch (Throwable t) {
                        written.completeExceptionally(t);
                    }
                });
                try {
                    // The first throttles can end while the log writer formats one more checkpoint behind the
                    // stalled one; a read counts once the writer stayed in one throttle throughout it.
                    for (int attempt = 1; ; attempt++) {
                        awaitThrottled(w, v, written);
                        long throttles = v.journalStats().commitThrottles();
                        CompletableFuture<Void> read = CompletableFuture.runAsync(() -> {
                            try (Handle h = ns.open("/d")) {
                                assertTrue(ns.stat(h).isDirectory());
                            }
                        }, r -> Thread.ofPlatform().daemon().name("throttle-reader").start(r));
                        try {
                            read.get(READER_BOUND_MS, TimeUnit.MILLISECONDS);
                        } catch (TimeoutException e) {
                            fail("opening /d waited over " + READER_BOUND_MS + " ms behind a throttled writer (" + v.diagnostics() + ")");
                        } catch (ExecutionException e) {
                            throw new AssertionError("the reader failed", e.getCause());
                        }
                        if (isThrottled(w) && v.journalStats().commitThrottles() == throttles) {
                            break;
                        }
                        assertTrue(attempt < 50, "the writer never stayed throttled through a read: " + v.diagnostics());
                    }
                } finally {
                    stop.set(true);
                    dev.resume(Op.FLUSH);
                }
                written.get(30, TimeUnit.SECONDS);
                w.join();
                assertTrue(v.journalStats().commitThrottles() > 0, v.journalStats().toString());
                VolumeFixtures.assertChecked(ns);
                assertEquals(created.get(), ns.readdir("/d", DirCookie.START, 1 << 20).entries().size());
            }
        }
    }

    private static boolean isThrottled(Thread w) {
        Object blocker = LockSupport.getBlocker(w);
        return blocker != null && blocker.getClass().getSimpleName().equals("LogWriter");
    }

    /** Waits (bounded) until {@code w} is parked in the journal's throttle. */
    private static void awaitThrottled(Thread w, Volume v, CompletableFuture<Void> written) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!isThrottled(w)) {
            if (written.isDone()) {
                written.get();
                fail("the writer stopped without being throttled");
            }
            if (System.nanoTime() - deadline > 0) {
                fail("the writer was never throttled: " + v.diagnostics());
            }
            Thread.onSpinWait();
        }
    }
}
