package dev.ferrite.io;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import static dev.ferrite.io.testkit.Blocks.buffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The guard every device shares, driven through a device whose reads block until the test lets them go:
 * close() must wait for calls in progress before releasing anything, and refuse new calls meanwhile.
 */
class AbstractBlockDeviceTest {
    /** A device whose reads park on a latch, and which records whether it was released under a running read. */
    static final class GatedDevice extends AbstractBlockDevice {
        final CountDownLatch inRead = new CountDownLatch(1);
        final CountDownLatch letGo = new CountDownLatch(1);
        final AtomicInteger reading = new AtomicInteger();
        final AtomicInteger closes = new AtomicInteger();
        volatile boolean closedUnderARead;

        GatedDevice() {
            super("gated", 4096, 16, false);
        }

        @Override
        void doRead(long offset, MemorySegment dst) {
            reading.incrementAndGet();
            inRead.countDown();
            try {
                assertTrue(letGo.await(30, TimeUnit.SECONDS), "the test never let the read go");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                reading.decrementAndGet();
            }
        }

        @Override
        void doWrite(long offset, MemorySegment src) {
        }

        @Override
        void doSubmit(IoBatch batch) {
        }

        @Override
        void doFlush() {
        }

        @Override
        void doDiscard(long offset, long length) {
        }

        @Override
        void doClose() {
            closes.incrementAndGet();
            if (reading.get() != 0) {
                closedUnderARead = true;
            }
        }
    }

    /** Waits, spinning, until {@code thread} is parked or finished; fails after 10 seconds. */
    private static void awaitBlockedOrDone(Thread thread) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            Thread.State s = thread.getState();
            if (s == Thread.State.TIMED_WAITING || s == Thread.State.WAITING || s == Thread.State.TERMINATED) {
                return;
            }
            assertTrue(System.nanoTime() < deadline, thread.getName() + " neither waits nor finishes: " + s);
            Thread.onSpinWait();
        }
    }

    @Test
    void closeWaitsForTheCallInProgressAndRefusesNewOnes() throws Exception {
        GatedDevice device = new GatedDevice();
        AtomicReference<Throwable> readFailure = new AtomicReference<>();
        try (Arena arena = Arena.ofShared()) {
            MemorySegment buf = buffer(arena, 4096);
            Thread reader = Thread.ofPlatform().name("reader").start(() -> {
                try {
                    device.read(3, buf);
                } catch (Throwable t) {
                    readFailure.set(t);
                }
            });
            assertTrue(device.inRead.await(10, TimeUnit.SECONDS));
            Thread closer = Thread.ofPlatform().name("closer").start(device::close);
            while (!device.isClosed()) {
                Thread.onSpinWait();
            }
            // Closing has begun: new calls fail at once, even though the device is not released yet.
            var e = assertThrows(DeviceException.class, () -> device.write(1, buf));
            assertEquals(Errno.EBADF, e.errno());
            awaitBlockedOrDone(closer);
            assertEquals(0, device.closes.get(), "the device was released while a read was still running");
            device.letGo.countDown();
            reader.join(TimeUnit.SECONDS.toMillis(10));
            closer.join(TimeUnit.SECONDS.toMillis(10));
            assertFalse(closer.isAlive(), "close() did not return after the read finished");
            assertNull(readFailure.get(), "the read that was in progress should complete normally");
            assertFalse(device.closedUnderARead);
            assertEquals(1, device.closes.get());
            device.close();
            assertEquals(1, device.closes.get(), "a second close must not release again");
        }
    }
}
