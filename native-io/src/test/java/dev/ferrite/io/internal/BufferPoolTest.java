package dev.ferrite.io.internal;


import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@ExtendWith(TestSeed.class)
class BufferPoolTest {
    private static List<MemorySegment> drain(BufferPool pool) {
        List<MemorySegment> all = new ArrayList<>();
        for (MemorySegment b; (b = pool.tryAcquire()) != null; ) {
            all.add(b);
        }
        return all;
    }

    @Test
    void buffersAreAlignedSizedAndDisjoint() {
        for (int size : new int[] {512, 4096, 12288, 65536}) {
            try (BufferPool pool = new BufferPool(size, 7)) {
                assertEquals(size, pool.bufferSize());
                assertEquals(7, pool.capacity());
                assertEquals(7, pool.available());
                List<MemorySegment> all = drain(pool);
                assertEquals(7, all.size());
                all.sort((a, b) -> Long.compare(a.address(), b.address()));
                for (int i = 0; i < all.size(); i++) {
                    MemorySegment b = all.get(i);
                    assertEquals(size, b.byteSize());
                    assertTrue(b.isNative());
                    assertEquals(0, b.address() % BlockDevice.BUFFER_ALIGNMENT, "buffer at 0x" + Long.toHexString(b.address()));
                    if (i > 0) {
                        MemorySegment prev = all.get(i - 1);
                        assertTrue(prev.address() + prev.byteSize() <= b.address(), "buffers overlap");
                    }
                }
                // Usable for device I/O as they are.
                try (MemoryDevice device = MemoryDevice.create(4, 512)) {
                    device.write(0, all.getFirst().asSlice(0, 512));
                }
            }
        }
    }

    @Test
    void badShapesAreRejected() {
        for (int size : new int[] {0, -512, 100, 4095}) {
            var e = assertThrows(InvalidArgumentException.class, () -> new BufferPool(size, 4));
            assertTrue(e.getMessage().contains("buffer size " + size), e.getMessage());
        }
        var e = assertThrows(InvalidArgumentException.class, () -> new BufferPool(4096, 0));
        assertTrue(e.getMessage().contains("buffer count 0"), e.getMessage());
    }

    @Test
    void exhaustedPoolLendsNothingUntilABufferComesBack() {
        try (BufferPool pool = new BufferPool(4096, 3)) {
            List<MemorySegment> all = drain(pool);
            assertEquals(3, all.size());
            assertEquals(0, pool.available());
            assertNull(pool.tryAcquire());
            pool.release(all.get(1));
            assertEquals(1, pool.available());
            MemorySegment again = pool.tryAcquire();
            assertNotNull(again);
            assertEquals(all.get(1).address(), again.address());
            assertNull(pool.tryAcquire());
        }
    }

    @Test
    void waitingAcquireGetsTheBufferAnotherThreadReleases() throws Exception {
        try (BufferPool pool = new BufferPool(4096, 2)) {
            List<MemorySegment> all = drain(pool);
            CountDownLatch waiting = new CountDownLatch(1);
            CompletableFuture<MemorySegment> acquired = CompletableFuture.supplyAsync(() -> {
                waiting.countDown();
                return pool.acquire();
            }, r -> Thread.ofPlatform().name("acquirer").start(r));
            assertTrue(waiting.await(10, TimeUnit.SECONDS));
            assertNull(pool.tryAcquire(), "nothing was released yet");
            Thread.ofPlatform().name("releaser").start(() -> pool.release(all.get(0))).join();
            MemorySegment got = acquired.get(10, TimeUnit.SECONDS);
            assertEquals(all.get(0).address(), got.address());
            assertEquals(0, pool.available());
        }
    }

    @Test
    void aWaitingAcquireSleepsUntilTheReleaseWakesIt() throws Exception {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        try (BufferPool pool = new BufferPool(4096, 1)) {
            MemorySegment only = pool.acquire();
            Thread[] acquirer = new Thread[1];
            CompletableFuture<MemorySegment> acquired = CompletableFuture.supplyAsync(() -> pool.acquire(),
                    r -> acquirer[0] = Thread.ofPlatform().name("acquirer").start(r));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (threads.getThreadInfo(acquirer[0].threadId()).getWaitedCount() == 0) {
                assertTrue(System.nanoTime() < deadline, "the acquirer never waited");
                Thread.onSpinWait();
            }
            long before = threads.getThreadInfo(acquirer[0].threadId()).getWaitedCount();
            // Give a polling waiter time to wake up many times; a waiter on a signal stays asleep.
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
            long wakeUps = threads.getThreadInfo(acquirer[0].threadId()).getWaitedCount() - before;
            assertFalse(acquired.isDone(), "nothing was released yet");
            assertTrue(wakeUps <= 1, "the waiter woke " + wakeUps + " times in 200 ms with no release");
            long released = System.nanoTime();
            pool.release(only);
            assertEquals(only.address(), acquired.get(10, TimeUnit.SECONDS).address());
            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released);
            assertTrue(tookMs < 1000, "the release woke the waiter after " + tookMs + " ms");
        }
    }

    @Test
    void aBoundedAcquireEndsWithAnExceptionNamingThePool() {
        try (BufferPool pool = new BufferPool(4096, 2)) {
            drain(pool);
            long start = System.nanoTime();
            NoSpaceException e = assertThrows(NoSpaceException.class, () -> pool.acquire(Duration.ofMillis(100)));
            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(tookMs >= 100 && tookMs < 5000, "gave up after " + tookMs + " ms");
            assertTrue(e.getMessage().contains("buffer pool of 2 x 4096 bytes"), e.getMessage());
            assertTrue(e.getMessage().contains("all 2 buffers stayed lent for"), e.getMessage());
        }
    }

    @Test
    void doubleReleaseIsRejectedAndDoesNotDuplicateTheBuffer() {
        try (BufferPool pool = new BufferPool(4096, 4)) {
            MemorySegment b = pool.acquire();
            pool.release(b);
            var e = assertThrows(InvalidArgumentException.class, () -> pool.release(b));
            assertTrue(e.getMessage().contains("released twice"), e.getMessage());
            assertEquals(4, pool.available());
            assertEquals(4, new HashSet<>(drain(pool).stream().map(MemorySegment::address).toList()).size(),
                    "every buffer must be lendable exactly once");
        }
    }

    @Test
    void aBufferReleasedByAnotherThreadIsLentAgain() throws Exception {
        try (BufferPool pool = new BufferPool(4096, 1)) {
            MemorySegment b = pool.acquire();
            Thread.ofPlatform().name("releaser").start(() -> pool.release(b)).join();
            assertEquals(1, pool.available());
            MemorySegment again = pool.tryAcquire();
            assertNotNull(again, "a buffer cached by the releasing thread must reach the acquiring one");
            assertEquals(b.address(), again.address());
        }
    }

    @Test
    void buffersCachedByThreadsThatDiedAreNotLost() throws Exception {
        int count = 64;
        try (BufferPool pool = new BufferPool(512, count)) {
            // Each thread ends holding nothing but leaves what it released in its cache.
            for (int t = 0; t < 8; t++) {
                Thread.ofPlatform().name("short-lived-" + t).start(() -> {
                    List<MemorySegment> mine = new ArrayList<>();
                    for (int i = 0; i < 6; i++) {
                        mine.add(pool.acquire());
                    }
                    mine.forEach(pool::release);
                }).join();
            }
            assertEquals(count, pool.available());
            List<MemorySegment> all = drain(pool);
            assertEquals(count, all.size(), "every buffer is lendable after its last user died");
            assertEquals(count, new HashSet<>(all.stream().map(MemorySegment::address).toList()).size());
            assertEquals(0, pool.available());
        }
    }

    @Test
    void aWaitingAcquireGetsABufferCachedByAnotherThread() throws Exception {
        try (BufferPool pool = new BufferPool(4096, 2)) {
            List<MemorySegment> all = drain(pool);
            CompletableFuture<MemorySegment> acquired = CompletableFuture.supplyAsync(pool::acquire,
                    r -> Thread.ofPlatform().name("acquirer").start(r));
            // Released here, so cached in this thread's stripe, not the acquirer's.
            pool.release(all.get(1));
            assertEquals(all.get(1).address(), acquired.get(10, TimeUnit.SECONDS).address());
            pool.release(all.get(0));
            assertEquals(1, pool.available());
        }
    }

    @Test
    void doubleReleaseFromAnotherThreadIsRejected() throws Exception {
        try (BufferPool pool = new BufferPool(4096, 2)) {
            MemorySegment b = pool.acquire();
            pool.release(b);
            CompletableFuture<Throwable> second = new CompletableFuture<>();
            Thread.ofPlatform().name("second-releaser").start(() -> {
                try {
                    pool.release(b);
                    second.complete(null);
                } catch (Throwable t) {
                    second.complete(t);
                }
            }).join();
            Throwable t = second.get(10, TimeUnit.SECONDS);
            assertTrue(t instanceof InvalidArgumentException && t.getMessage().contains("released twice"), String.valueOf(t));
            assertEquals(2, new HashSet<>(drain(pool).stream().map(MemorySegment::address).toList()).size(),
                    "every buffer must be lendable exactly once");
        }
    }

    @Test
    void releasesBeyondTheThreadCacheSpillToTheSharedQueue() {
        int count = 40; // more than one thread's cache holds
        try (BufferPool pool = new BufferPool(512, count)) {
            List<MemorySegment> all = drain(pool);
            assertEquals(count, all.size());
            all.forEach(pool::release);
            assertEquals(count, pool.available());
            assertEquals(count, new HashSet<>(drain(pool).stream().map(MemorySegment::address).toList()).size());
        }
    }

    @Test
    void segmentsTheyDidNotLendAreRejected() {
        try (BufferPool pool = new BufferPool(4096, 4); BufferPool other = new BufferPool(4096, 4); Arena arena = Arena.ofConfined()) {
            MemorySegment mine = pool.acquire();
            List<MemorySegment> foreign = List.of(
                    other.acquire(),
                    arena.allocate(4096, 4096),
                    mine.asSlice(512),                  // inside a lent buffer, not its start
                    mine.asSlice(0, 2048),              // its start, but not the whole buffer
                    MemorySegment.ofArray(new byte[4096]));
            for (MemorySegment f : foreign) {
                var e = assertThrows(InvalidArgumentException.class, () -> pool.release(f), f.toString());
                assertTrue(e.getMessage().contains("was not lent by this pool"), e.getMessage());
            }
            assertEquals(3, pool.available(), "a rejected release must not add a buffer");
            pool.release(mine);
            assertEquals(4, pool.available());
        }
    }

    @Test
    void closedPoolsBuffersFailOnAccess() {
        BufferPool pool = new BufferPool(4096, 2);
        MemorySegment b = pool.acquire();
        pool.close();
        assertThrows(IllegalStateException.class, () -> b.get(JAVA_LONG, 0));
    }

    @Test
    void concurrentAcquireAndReleaseNeverLendABufferTwice() throws Exception {
        int threads = 4;
        int buffers = 6; // fewer than threads x 2, so acquire() often has to wait
        int rounds = 20_000;
        try (BufferPool pool = new BufferPool(512, buffers)) {
            // Which thread holds each buffer (by slot in the slab), 0 when free: a second taker sees it taken.
            long slab = drainAndReturnLowest(pool);
            AtomicLongArray holder = new AtomicLongArray(buffers);
            ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 1; t <= threads; t++) {
                long me = t;
                Random random = TestSeed.random(t);
                workers.add(Thread.ofPlatform().name("pool-" + t).start(() -> {
                    try {
                        start.await();
                        List<MemorySegment> held = new ArrayList<>();
                        for (int i = 0; i < rounds && failures.isEmpty(); i++) {
                            if (held.size() < 2 && (held.isEmpty() || random.nextBoolean())) {
                                MemorySegment b = random.nextBoolean() ? pool.acquire() : pool.tryAcquire();
                                if (b == null) {
                                    continue;
                                }
                                int slot = (int) ((b.address() - slab) / 4096);
                                if (!holder.compareAndSet(slot, 0, me)) {
                                    failures.add("buffer " + slot + " lent to thread " + me + " while thread "
                                            + holder.get(slot) + " holds it");
                                }
                                b.set(JAVA_LONG, 0, me * 1_000_000 + i);
                                held.add(b);
                            } else {
                                MemorySegment b = held.remove(random.nextInt(held.size()));
                                int slot = (int) ((b.address() - slab) / 4096);
                                if (b.get(JAVA_LONG, 0) / 1_000_000 != me) {
                                    failures.add("buffer " + slot + " was written by another thread while thread " + me + " held it");
                                }
                                holder.set(slot, 0);
                                pool.release(b);
                            }
                        }
                        for (MemorySegment b : held) {
                            holder.set((int) ((b.address() - slab) / 4096), 0);
                            pool.release(b);
                        }
                    } catch (Throwable e) {
                        failures.add(e.toString());
                    }
                }));
            }
            start.countDown();
            for (Thread w : workers) {
                w.join(TimeUnit.SECONDS.toMillis(30));
                assertFalse(w.isAlive(), w.getName() + " is stuck");
            }
            assertTrue(failures.isEmpty(), () -> failures.toString());
            assertEquals(buffers, pool.available());
            Set<Long> distinct = new HashSet<>();
            drain(pool).forEach(b -> distinct.add(b.address()));
            assertEquals(buffers, distinct.size(), "after the storm every buffer is back exactly once");
        }
    }

    /** Returns the lowest buffer address after taking every buffer and giving it back. */
    private static long drainAndReturnLowest(BufferPool pool) {
        List<MemorySegment> all = drain(pool);
        long lowest = all.stream().mapToLong(MemorySegment::address).min().orElseThrow();
        all.forEach(pool::release);
        return lowest;
    }
}
