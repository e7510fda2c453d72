package dev.ferrite.btree.internal;

import dev.ferrite.btree.CacheStats;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.internal.LogGeometry;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The buffer cache on its own, over blocks this test writes to the device: hit and miss counts, one read
 * for concurrent misses on a block, reclaim priority, verification of what is read, and the life of a
 * freed block (dropped, never written home, reusable, and recovered as its new contents).
 */
@ExtendWith(TestSeed.class)
class BufferCacheTest {
    private static final int BLOCK_SIZE = 4096;
    private static final LogGeometry LOG = new LogGeometry(1, 256);
    /** First block this test writes; blocks up to it are the log's. */
    private static final long FIRST = 300;
    private static final int MAGIC = 0x54534554; // "TEST"
    private static final int FREED = 0x44455246;
    private static final long OWNER = 42;
    private static final String WHAT = "test block";
    /** Where each test block keeps a number saying what it holds. */
    private static final long PAYLOAD = BlockHeaderFormat.SIZE;
    /** The seed of the randomised test: {@code -Dferrite.seed}, else fixed. */
    private static final long SEED = TestSeed.get(0x7C4A_11DL);

    private final Arena arena = Arena.ofConfined();
    private ProbeDevice device;
    private Journal journal;
    private BufferCache cache;

    @BeforeEach
    void open() {
        device = new ProbeDevice(FIRST + 512, BLOCK_SIZE);
        Journal.format(device, LOG);
        openCache();
    }

    private void openCache() {
        try (BufferReplayer replayer = new BufferReplayer(device, FREED)) {
            journal = Journal.open(device, LOG, JournalOptions.defaults(), replayer);
        }
        cache = new BufferCache(device, journal, (long) BufferCache.MIN_FRAMES * BLOCK_SIZE);
    }

    @AfterEach
    void close() {
        journal.close();
        cache.close();
        device.close();
        arena.close();
    }

    /** Forces the log, cuts the power (everything forced is on the device), and opens the cache again after a recovery that replayed something. */
    private void crashAndRecover() {
        journal.forceAll();
        device.cutPower();
        journal.close();
        cache.close();
        device.restorePower();
        openCache();
        assertFalse(journal.recovery().clean());
    }

    /** Writes a sound test block holding {@code payload} straight to the device. */
    private MemorySegment writeBlock(long block, int magic, long blockNo, long owner, long payload) {
        MemorySegment b = arena.allocate(BLOCK_SIZE, BLOCK_SIZE);
        BlockHeaderFormat.init(b, magic, blockNo, owner);
        b.set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, payload);
        BlockHeaderFormat.stamp(b, 1);
        device.poke(block, b);
        return b;
    }

    private void writeBlocks(long from, int count) {
        for (long b = from; b < from + count; b++) {
            writeBlock(b, MAGIC, b, OWNER, b * 7);
        }
    }

    private Buffer get(long block) {
        return cache.get(block, MAGIC, OWNER, WHAT);
    }

    private static long payload(Buffer b) {
        return b.data().get(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD);
    }

    /**
     * A buffer let go unchanged by one transaction, the last of those it held, while another thread's
     * transaction takes it at once as its second and logs it: the first must not write its place in
     * its list (`Buffer.heldAt`) after letting it go. It did, and the second's log call found the buffer
     * at the wrong place, threw with the change logged, and the journal shut down (a `bench kv` insert
     * phase, one run in ten).
     */
    @Test
    void aBufferLetGoUnchangedIsFoundWhereItsNextHolderKeepsIt() throws Exception {
        writeBlocks(FIRST, 2);
        Buffer x = get(FIRST), b = get(FIRST + 1);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread letGo = new Thread(() -> {
            while (!stop.get()) {
                try (Txn t = Txn.begin(cache, 2)) {
                    if (t.lock(b)) {
                        t.releaseUnchanged(b); // its only buffer: the last of its list
                    }
                }
            }
        });
        letGo.start();
        try {
            long end = System.nanoTime() + 1_000_000_000L;
            for (int i = 0; System.nanoTime() < end; i++) {
                try (Txn t = Txn.begin(cache, 4)) {
                    assertTrue(t.lock(x) && t.lock(b));
                    t.log(b, (int) PAYLOAD, 8); // b second in the list
                    t.commit();
                }
                if (i % 256 == 0) {
                    journal.forceAll(); // keeps the log from filling
                }
            }
        } finally {
            stop.set(true);
            letGo.join();
        }
    }

    /**
     * Three threads' transactions each lock a random set of eight shared buffers (in block order, so none
     * waits for another in a cycle), let a random subset go unchanged in random order (the first, a middle
     * or the last of their lists), log some of the rest and commit, for a second: each transaction keeps
     * holding exactly what it did not let go, and each log call finds its buffer where its list says
     * ({@code Buffer.heldAt}), with no other transaction's index written over it. The broad form of
     * {@link #aBufferLetGoUnchangedIsFoundWhereItsNextHolderKeepsIt}.
     */
    @Test
    void transactionsLettingBuffersGoSideBySideKeepTheirListsStraight() throws Exception {
        int n = 8;
        writeBlocks(FIRST, n);
        for (int i = 0; i < n; i++) {
            get(FIRST + i);
        }
        long end = System.nanoTime() + 1_000_000_000L;
        AtomicLong rounds = new AtomicLong();
        List<Callable<Void>> workers = new ArrayList<>();
        for (int w = 0; w < 3; w++) {
            SplittableRandom r = new SplittableRandom(SEED + w);
            workers.add(() -> {
                Buffer[] bs = new Buffer[n];
                boolean[] mine = new boolean[n];
                int[] order = new int[n];
                while (System.nanoTime() < end) {
                    try (Txn t = Txn.begin(cache, n + 2)) {
                        int held = 0;
                        for (int i = 0; i < n; i++) {
                            mine[i] = r.nextInt(3) != 0;
                            if (mine[i]) {
                                do {
                                    bs[i] = get(FIRST + i);
                                } while (!t.lock(bs[i])); // obsolete: look it up again
                                order[held++] = i;
                            }
                        }
                        for (int k = held - 1; k > 0; k--) { // a random order to let them go in
                            int j = r.nextInt(k + 1), o = order[k];
                            order[k] = order[j];
                            order[j] = o;
                        }
                        int kept = held;
                        for (int k = 0; k < held; k++) {
                            int i = order[k];
                            if (r.nextBoolean()) {
                                t.release(bs[i]);
                                mine[i] = false;
                                kept--;
                                assertFalse(t.holds(bs[i]), "a buffer let go is still this transaction's");
                            }
                        }
                        assertEquals(kept, t.held());
                        boolean logged = false;
                        for (int i = 0; i < n; i++) {
                            if (mine[i]) {
                                assertTrue(t.holds(bs[i]), "a buffer kept is no longer this transaction's");
                                if (r.nextBoolean()) {
                                    t.log(bs[i], (int) PAYLOAD, 8); // throws if its index is wrong
                                    logged = true;
                                }
                            }
                        }
                        if (logged) {
                            t.commit();
                        }
                    }
                    if (rounds.incrementAndGet() % 256 == 0) {
                        journal.forceAll(); // keeps the log from filling
                    }
                }
                return null;
            });
        }
        ExecutorService pool = Executors.newFixedThreadPool(workers.size());
        try {
            for (Future<Void> f : pool.invokeAll(workers)) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(rounds.get() > 1000, rounds.get() + " transactions");
    }

    @Test
    void countsHitsAndMisses() {
        writeBlocks(FIRST, 2);
        Buffer a = get(FIRST);
        assertSame(a, get(FIRST));
        Buffer b = get(FIRST + 1);
        assertEquals(FIRST * 7, payload(a));
        assertEquals((FIRST + 1) * 7, payload(b));
        CacheStats s = cache.stats();
        assertEquals(2, s.misses(), s.toString());
        assertEquals(1, s.hits(), s.toString());
        assertEquals(2, s.cached(), s.toString());
        assertEquals(1.0 / 3, s.hitRatio(), 1e-9);
        assertEquals(1, device.reads(FIRST));
        assertEquals(BufferCache.MIN_FRAMES, cache.capacity());
    }

    /** A recording gets an event per miss (block, structure, read time) and the counters every period. */
    @Test
    void missesAndCountersReachFlightRecordings() throws Exception {
        writeBlocks(FIRST, 3);
        List<RecordedEvent> misses = new CopyOnWriteArrayList<>();
        CompletableFuture<RecordedEvent> counted = new CompletableFuture<>();
        try (RecordingStream r = new RecordingStream()) {
            r.enable("dev.ferrite.btree.CacheMiss");
            r.enable("dev.ferrite.btree.CacheStatistics").withPeriod(Duration.ofMillis(20));
            r.onEvent("dev.ferrite.btree.CacheMiss", misses::add);
            // Statistics of every cache in this JVM arrive; this one's is the one with its three accesses.
            r.onEvent("dev.ferrite.btree.CacheStatistics", e -> {
                if (e.getInt("frames") == BufferCache.MIN_FRAMES && e.getLong("misses") == 2 && e.getLong("hits") == 1) {
                    counted.complete(e);
                }
            });
            r.startAsync();
            get(FIRST);
            get(FIRST + 2);
            get(FIRST);
            RecordedEvent stats = counted.get(30, TimeUnit.SECONDS);
            assertEquals(2, stats.getInt("cached"));
            // a miss is committed before the counters that count it are sampled, and streams deliver in order
            assertEquals(List.of(FIRST, FIRST + 2), misses.stream().map(e -> e.getLong("block")).sorted().toList());
            assertTrue(misses.stream().allMatch(e -> e.getString("structure").equals(WHAT)));
        }
    }

    /**
     * A claim that finds every frame taken waits on a signal, not a poll: it sweeps again only when a
     * frame is let go, and that wakes it at once.
     */
    @Test
    void aClaimWaitingForAFrameSleepsUntilOneIsLetGo() throws Exception {
        int[] all = new int[cache.capacity()];
        for (int i = 0; i < all.length; i++) {
            all[i] = cache.reserveFrame();
        }
        CompletableFuture<Integer> claimed = awaitSleepingClaim(() -> cache.reserveFrame());
        assertEquals(all[0], wake(claimed, () -> cache.unreserveFrame(all[0])));
        for (int f : all) {
            cache.unreserveFrame(f);
        }
    }

    /** A claim waiting because every buffer is locked is woken by the unlock of one, which it then evicts. */
    @Test
    void aClaimWaitingForAFrameIsWokenByAnUnlock() throws Exception {
        writeBlocks(FIRST, cache.capacity());
        writeBlocks(FIRST + 100, 1);
        try (Txn txn = Txn.begin(cache, cache.capacity())) {
            Buffer[] held = new Buffer[cache.capacity()];
            for (int i = 0; i < held.length; i++) {
                held[i] = get(FIRST + i);
                assertTrue(txn.lock(held[i]));
            }
            CompletableFuture<Buffer> claimed = awaitSleepingClaim(() -> get(FIRST + 100));
            assertEquals((FIRST + 100) * 7, payload(wake(claimed, () -> txn.release(held[7]))));
            assertNull(cache.lookup(FIRST + 7), "the unlocked buffer was the one evicted");
        }
    }

    /**
     * Starts {@code claim} on a thread of its own, once every frame is taken, and checks that it waits
     * asleep: given time to sweep many times were it polling, it sweeps once more at most.
     */
    private <T> CompletableFuture<T> awaitSleepingClaim(Supplier<T> claim) {
        CompletableFuture<T> claimed = CompletableFuture.supplyAsync(claim, r -> Thread.ofPlatform().name("claimer").start(r));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (cache.stats().dirtyWaits() == 0) {
            assertTrue(System.nanoTime() < deadline, "the claim never found the cache full");
            Thread.onSpinWait();
        }
        long before = cache.stats().dirtyWaits();
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
        long sweeps = cache.stats().dirtyWaits() - before;
        assertFalse(claimed.isDone(), "nothing was freed yet");
        assertTrue(sweeps <= 1, "the waiting claim swept the cache " + sweeps + " times in 200 ms with nothing freed");
        return claimed;
    }

    /** Runs {@code free} and returns what the waiting claim got, checking that it got it at once. */
    private static <T> T wake(CompletableFuture<T> claimed, Runnable free) throws Exception {
        long freed = System.nanoTime();
        free.run();
        T got = claimed.get(10, TimeUnit.SECONDS);
        long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - freed);
        assertTrue(tookMs < 1000, "the claim got its frame " + tookMs + " ms after it was freed");
        return got;
    }

    /** A claim that finds no frame for its bound fails, saying which cache and what held its frames. */
    @Test
    void aClaimThatFindsNoFrameEndsWithAnExceptionNamingTheCache() {
        int[] all = new int[cache.capacity()];
        for (int i = 0; i < all.length; i++) {
            all[i] = cache.reserveFrame();
        }
        cache.claimWaitNanos = TimeUnit.MILLISECONDS.toNanos(100);
        NoSpaceException e = assertTimeoutPreemptively(Duration.ofSeconds(20),
                () -> assertThrows(NoSpaceException.class, cache::reserveFrame));
        assertTrue(e.getMessage().contains("buffer cache of " + all.length + " blocks on " + device.name()), e.getMessage());
        assertTrue(e.getMessage().contains(all.length + " frames reserved or loading"), e.getMessage());
        for (int f : all) {
            cache.unreserveFrame(f);
        }
    }

    /**
     * A cluster miss reads the run once and caches the blocks that verify; one that does not is dropped
     * silently (and reported when asked for itself); a block cached with changes not yet home is left as
     * it is; read-ahead buffers start unused, so the clock takes them first.
     */
    @Test
    void aClusterMissCachesTheNeighboursThatVerify() {
        writeBlocks(FIRST, 8);
        writeBlock(FIRST + 5, MAGIC, FIRST + 5, 7, 1); // another owner's
        Buffer changed = get(FIRST + 6);
        try (Txn txn = Txn.begin(cache, 1)) {
            assertTrue(txn.lock(changed));
            changed.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, -6);
            txn.log(changed, (int) PAYLOAD, 8);
            txn.commit();
        }
        Buffer b = cache.get(FIRST + 2, MAGIC, OWNER, WHAT, FIRST, 8);
        assertEquals((FIRST + 2) * 7, payload(b));
        for (long blk = FIRST; blk < FIRST + 8; blk++) {
            assertEquals(blk == FIRST + 6 ? 2 : 1, device.reads(blk), "reads of block " + blk);
        }
        CacheStats s = cache.stats();
        long misses = s.misses();
        assertEquals(5, s.readAhead(), s.toString()); // all but the one asked, the changed one and the foreign one
        for (long blk : new long[] {FIRST, FIRST + 1, FIRST + 3, FIRST + 4, FIRST + 7}) {
            assertEquals(blk * 7, payload(get(blk)), "block " + blk);
        }
        assertSame(changed, get(FIRST + 6));
        assertEquals(-6, payload(changed), "a cached block with changes not yet home must not be read over");
        assertEquals(misses, cache.stats().misses(), "the neighbours came from the cluster read");
        CorruptionException e = assertThrows(CorruptionException.class, () -> get(FIRST + 5));
        assertEquals(FIRST + 5, e.block());
        assertThrows(CorruptionException.class, () -> cache.get(FIRST + 5, MAGIC, OWNER, WHAT, FIRST, 8));
        assertThrows(dev.ferrite.io.InvalidArgumentException.class, () -> cache.get(FIRST + 9, MAGIC, OWNER, WHAT, FIRST, 8));
    }

    @Test
    void readAheadGoesFirstWhenFramesRunShort() {
        writeBlocks(FIRST, BufferCache.MIN_FRAMES + 9);
        Buffer asked = cache.get(FIRST, MAGIC, OWNER, WHAT, FIRST, 8);
        for (long blk = FIRST + 8; blk < FIRST + 8 + BufferCache.MIN_FRAMES - 8; blk++) {
            get(blk); // every other frame, each touched once
        }
        get(FIRST + BufferCache.MIN_FRAMES); // takes a frame: an untouched read-ahead buffer's
        assertSame(asked, cache.get(FIRST, MAGIC, OWNER, WHAT, FIRST, 8), "the block asked for was touched: it stays");
        int readAheadLeft = 0;
        for (long blk = FIRST + 1; blk < FIRST + 8; blk++) {
            readAheadLeft += cache.lookup(blk) != null && !cache.lookup(blk).isObsolete() ? 1 : 0;
        }
        assertEquals(6, readAheadLeft);
    }

    /** Getters arriving while a block loads get the loading buffer and wait on its lock: one device read. */
    @Test
    void concurrentMissesReadOnce() throws Exception {
        writeBlocks(FIRST, 1);
        device.closeGate(FIRST);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        try {
            CompletableFuture<Buffer> first = CompletableFuture.supplyAsync(() -> get(FIRST), pool);
            device.awaitGate();
            CompletableFuture<Buffer> second = CompletableFuture.supplyAsync(() -> get(FIRST), pool);
            CompletableFuture<Buffer> third = CompletableFuture.supplyAsync(() -> get(FIRST), pool);
            Buffer b2 = second.get(30, TimeUnit.SECONDS);
            Buffer b3 = third.get(30, TimeUnit.SECONDS);
            assertSame(b2, b3);
            assertTrue(b2.isLocked(), "the buffer handed out while loading is locked by its loader");
            assertFalse(first.isDone());
            CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> {
                long v = b2.readVersion(); // waits for the load
                long p = payload(b2);
                return b2.validate(v) ? p : -1;
            }, pool);
            device.openGate();
            assertSame(b2, first.get(30, TimeUnit.SECONDS));
            assertEquals(FIRST * 7, waiter.get(30, TimeUnit.SECONDS));
            assertEquals(1, device.reads(FIRST));
            assertEquals(1, cache.stats().misses());
        } finally {
            device.openGate();
            pool.shutdownNow();
        }
    }

    /**
     * A block allocated anew while a reader that followed an old pointer is still loading it: the
     * allocating writer, which holds other nodes locked (as a split does), takes the block over at once
     * instead of waiting for that read, so readers of the nodes it holds are not stalled by the device;
     * the stale load is dropped when it lands, and its getter sees it obsolete.
     */
    @Test
    void allocatingABlockBeingLoadedWaitsForNoRead() throws Exception {
        writeBlocks(FIRST, 2);
        Buffer held = get(FIRST + 1);
        device.closeGate(FIRST);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        try {
            CompletableFuture<Buffer> staleRead = CompletableFuture.supplyAsync(() -> get(FIRST), pool);
            device.awaitGate();
            int frame = cache.reserveFrame();
            CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
                try (Txn txn = Txn.begin(cache, 4)) {
                    assertTrue(txn.lock(held));
                    Buffer fresh = cache.create(txn, FIRST, MAGIC, OWNER, frame);
                    fresh.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 99L);
                    txn.log(fresh, 0, BLOCK_SIZE);
                    held.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 98L);
                    txn.log(held, 0, BLOCK_SIZE);
                    txn.commit();
                }
            }, pool);
            writer.get(20, TimeUnit.SECONDS);
            long v = held.readVersion(); // a reader of the node the writer held
            assertEquals(98L, payload(held));
            assertTrue(held.validate(v));
            assertFalse(staleRead.isDone(), "the stale read is still at the gate");
            device.openGate();
            Buffer stale = staleRead.get(30, TimeUnit.SECONDS);
            assertEquals(-1, stale.readVersion(), "the stale load is dropped");
            assertEquals(99L, payload(get(FIRST)));
        } finally {
            device.openGate();
            pool.shutdownNow();
        }
    }

    /** A load that finds corruption leaves nothing behind: waiters see the buffer obsolete, the next get reads again. */
    @Test
    void failedLoadLeavesNothingCached() throws Exception {
        writeBlock(FIRST, MAGIC, FIRST, 7, 1);
        device.closeGate(FIRST);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            CompletableFuture<Buffer> loader = CompletableFuture.supplyAsync(() -> get(FIRST), pool);
            device.awaitGate();
            Buffer waiting = pool.submit(() -> get(FIRST)).get(30, TimeUnit.SECONDS);
            CompletableFuture<Long> version = CompletableFuture.supplyAsync(waiting::readVersion, pool);
            device.openGate();
            Exception e = assertThrows(Exception.class, () -> loader.get(30, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof CorruptionException, e.toString());
            assertEquals(-1, version.get(30, TimeUnit.SECONDS), "a waiter on a failed load must look again");
        } finally {
            device.openGate();
            pool.shutdownNow();
        }
        assertNull(cache.lookup(FIRST));
        assertThrows(CorruptionException.class, () -> get(FIRST));
        assertEquals(2, device.reads(FIRST));
    }

    @Test
    void corruptBlocksNameTheBlockAndWhatWasWrong() {
        long crc = FIRST, magic = FIRST + 1, misdirected = FIRST + 2, foreign = FIRST + 3;
        MemorySegment torn = writeBlock(crc, MAGIC, crc, OWNER, 1);
        torn.set(ValueLayout.JAVA_BYTE, 100, (byte) 1); // changed after the checksum was computed
        device.poke(crc, torn);
        writeBlock(magic, 0x0BAD_0BAD, magic, OWNER, 1);
        writeBlock(misdirected, MAGIC, 999, OWNER, 1);
        writeBlock(foreign, MAGIC, foreign, 7, 1);
        byte[][] before = new byte[4][];
        for (int i = 0; i < 4; i++) {
            before[i] = onDisk(FIRST + i);
        }
        long[] blocks = {crc, magic, misdirected, foreign};
        String[] details = {"crc32c 0x", "magic 0xbad0bad, expected 0x" + Integer.toHexString(MAGIC),
                "the block says it is block 999", "owner 7, expected " + OWNER};
        for (int i = 0; i < blocks.length; i++) {
            long block = blocks[i];
            CorruptionException e = assertThrows(CorruptionException.class, () -> get(block));
            assertEquals(block, e.block());
            assertEquals(WHAT, e.structure());
            assertTrue(e.getMessage().startsWith(WHAT + " at block " + block + " is corrupt: " + details[i]), e.getMessage());
            assertNull(cache.lookup(block), "a block that failed verification stays cached");
        }
        assertTrue(cache.stats().dirtyWaits() == 0 && cache.stats().cached() == 0, cache.stats().toString());
        journal.quiesce();
        assertEquals(0, journal.stats().commits(), "reading logged something");
        for (int i = 0; i < 4; i++) {
            assertArrayEquals(before[i], onDisk(FIRST + i), "block " + (FIRST + i) + " was written");
        }
        CorruptionException e = assertThrows(CorruptionException.class, () -> cache.get(foreign, MAGIC, OWNER, "other"));
        assertEquals("other", e.structure());
        assertEquals(1, payload(cache.get(foreign, MAGIC, -1, WHAT)), "owner -1 accepts any owner");
    }

    private byte[] onDisk(long block) {
        MemorySegment b = arena.allocate(BLOCK_SIZE, BLOCK_SIZE);
        device.read(block, b);
        return b.toArray(ValueLayout.JAVA_BYTE);
    }

    /**
     * Under pressure the clock takes leaves (priority 1) before interior nodes and headers (higher): after
     * a whole cache of new leaves went through, the higher-priority buffers are all still there and the
     * leaves read with them are gone.
     */
    @Test
    void interiorBuffersOutliveLeaves() {
        int frames = cache.capacity();
        int interior = 8;
        writeBlocks(FIRST, 3 * frames);
        Buffer[] high = new Buffer[interior];
        Buffer[] low = new Buffer[interior];
        for (int i = 0; i < interior; i++) {
            high[i] = get(FIRST + i);
            high[i].priority = 3;
            assertSame(high[i], get(FIRST + i)); // a hit raises its usage to its priority
            low[i] = get(FIRST + interior + i);
        }
        long next = FIRST + 2 * interior;
        for (int i = 0; i < frames; i++) {
            get(next++);
        }
        CacheStats s = cache.stats();
        assertTrue(s.leafEvictions() >= interior, s.toString());
        assertEquals(0, s.interiorEvictions(), s.toString());
        for (int i = 0; i < interior; i++) {
            assertSame(high[i], cache.lookup(high[i].block()), "interior buffer " + i + " was evicted: " + s);
            assertFalse(high[i].isObsolete());
            assertNull(cache.lookup(low[i].block()), "leaf buffer " + i + " outlived a cache of newer leaves: " + s);
            assertTrue(low[i].isObsolete());
        }
        // kept from then on only while in use: a long enough stream of leaves takes them too
        for (int i = 0; i < 3 * frames && next < FIRST + 3 * frames; i++) {
            get(next++);
        }
        assertTrue(cache.stats().interiorEvictions() > 0, cache.stats().toString());
    }

    /**
     * A freed block leaves the cache when freed and is never written home (the AIL drops it). It stays
     * busy, refused to create and skipped by the allocator, until the free is in a checkpoint: the free
     * and the new contents are then in different checkpoints, in order, whichever threads made them, and
     * recovery ends with the new contents.
     */
    @Test
    void freedBlocksAreBusyUntilCheckpointedThenReused() throws Exception {
        long bitmap = FIRST + 400, x = FIRST, y = FIRST + 1;
        BitmapAllocator allocator;
        try (Txn txn = Txn.begin(cache, 2)) {
            allocator = BitmapAllocator.format(txn, bitmap, x, 2, OWNER);
            txn.commit();
        }
        ExecutorService[] thread = {Executors.newSingleThreadExecutor(), Executors.newSingleThreadExecutor()};
        try {
            Buffer b = thread[0].submit(() -> allocateAndWrite(allocator, 1)).get();
            assertEquals(x, b.block());
            assertEquals(y, thread[1].submit(() -> allocateAndWrite(allocator, 1)).get().block());
            assertSame(b, get(x));
            thread[0].submit(() -> {
                try (Txn txn = Txn.begin(cache, 2)) {
                    assertTrue(txn.lock(b));
                    assertThrows(IllegalStateException.class, () -> cache.create(txn, x, MAGIC, OWNER),
                            "a block held by a transaction was created again");
                    allocator.free(txn, x);
                    cache.free(txn, b, FREED);
                    assertNull(cache.lookup(x), "a freed buffer is still found");
                    assertTrue(cache.isBusy(x));
                    txn.commit();
                }
            }).get();
            assertTrue(b.isObsolete());
            assertTrue(cache.isBusy(x), "a free not yet in a checkpoint");
            thread[1].submit(() -> {
                try (Txn txn = Txn.begin(cache, 2)) {
                    assertThrows(IllegalStateException.class, () -> cache.create(txn, x, MAGIC, OWNER));
                }
            }).get();
            assertFalse(journal.isShutdown());
            assertTrue(cache.isBusy(x));
            // the only free block is busy: the allocator forces the log and waits for the free to reach the AIL
            Buffer again = thread[1].submit(() -> allocateAndWrite(allocator, 2)).get();
            assertFalse(cache.isBusy(x));
            assertEquals(x, again.block());
            assertNotSame(b, again);
            assertSame(again, get(x));
        } finally {
            for (ExecutorService e : thread) {
                e.shutdown();
            }
        }
        // the free and the new contents are in the log only: recovery must end with the new ones
        crashAndRecover();
        assertEquals(2, payload(get(x)), "recovery of a freed and reused block");
        journal.quiesce();
        MemorySegment home = MemorySegment.ofArray(onDisk(x));
        BlockHeaderFormat.verify(home, x, MAGIC, OWNER, WHAT);
        assertEquals(2, home.get(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD));
    }

    /**
     * A block the log leaves freed is not written by recovery: once free it may hold what the layer above
     * wrote there without logging it (file data), which its logged history must not overwrite.
     */
    @Test
    void recoveryDoesNotWriteABlockTheLogLeavesFreed() {
        long x = FIRST + 3;
        try (Txn txn = Txn.begin(cache, 1)) {
            Buffer b = cache.create(txn, x, MAGIC, OWNER);
            b.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 5);
            txn.log(b, 0, BLOCK_SIZE);
            txn.commit();
        }
        try (Txn txn = Txn.begin(cache, 1)) {
            Buffer b = get(x);
            assertTrue(txn.lock(b));
            cache.free(txn, b, FREED);
            txn.commit();
        }
        journal.forceAll(); // the free durable before the block is reused
        MemorySegment data = arena.allocate(BLOCK_SIZE, BLOCK_SIZE);
        data.fill((byte) 0x5A); // unlogged contents written after the free was durable
        device.poke(x, data);
        crashAndRecover();
        assertEquals(-1, MemorySegment.ofArray(onDisk(x)).mismatch(data), "recovery wrote over a freed block");
    }

    /**
     * Freed blocks nobody asks about again (a freed inode chunk's) leave the busy set once their free is
     * checkpointed, by the sweep a later free runs, though no allocator looks at them and the cache is
     * large enough never to evict their stale buffers.
     */
    @Test
    void freedBlocksNobodyAsksAboutLeaveTheBusySetOnceCheckpointed() {
        cache.close();
        cache = new BufferCache(device, journal, 1024L * BLOCK_SIZE);
        writeBlocks(FIRST, 300);
        freeBlocks(FIRST, 200);
        assertEquals(200, cache.busyBound(), "all 200 frees are busy");
        journal.quiesce(); // the frees are in the AIL (and dropped from it): none is busy any more
        freeBlocks(FIRST + 200, 100); // the 256th free sweeps
        assertTrue(cache.busyBound() <= 100, "the checkpointed frees are still counted: " + cache.busyBound());
        assertTrue(cache.isBusy(FIRST + 299), "the latest free is not checkpointed");
    }

    private void freeBlocks(long from, int count) {
        for (long x = from; x < from + count; x++) {
            try (Txn txn = Txn.begin(cache, 1)) {
                Buffer b = get(x);
                assertTrue(txn.lock(b));
                cache.free(txn, b, FREED);
                txn.commit();
            }
        }
    }

    /**
     * A reader that followed a stale pointer to a freed block reads its old contents back in (the free is
     * never written home, so they still verify). That buffer must not stop the block from being allocated
     * again: it is dropped, and whoever still holds it sees it obsolete.
     */
    @Test
    void staleReadOfAFreedBlockGivesWayToItsReuse() {
        long bitmap = FIRST + 400, x = FIRST;
        BitmapAllocator allocator;
        try (Txn txn = Txn.begin(cache, 2)) {
            allocator = BitmapAllocator.format(txn, bitmap, x, 1, OWNER);
            txn.commit();
        }
        Buffer b = allocateAndWrite(allocator, 1);
        journal.quiesce(); // block x's contents are home
        try (Txn txn = Txn.begin(cache, 2)) {
            assertTrue(txn.lock(b));
            allocator.free(txn, x);
            cache.free(txn, b, FREED);
            txn.commit();
        }
        journal.quiesce(); // the free is in a checkpoint: x is no longer busy
        assertFalse(cache.isBusy(x));
        Buffer stale = get(x);
        assertEquals(1, payload(stale), "the freed block's old contents");
        long v = stale.readVersion();
        Buffer again = allocateAndWrite(allocator, 2);
        assertNotSame(stale, again);
        assertTrue(stale.isObsolete());
        assertFalse(stale.validate(v));
        assertSame(again, get(x));
        assertEquals(2, payload(again));
    }

    /** Allocates a block and creates it holding {@code payload}, in a transaction of its own; a new block starts zeroed. */
    private Buffer allocateAndWrite(BitmapAllocator allocator, long payload) {
        try (Txn txn = Txn.begin(cache, 3)) {
            Buffer b = cache.create(txn, allocator.allocate(txn), MAGIC, OWNER);
            assertEquals(0, payload(b));
            b.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, payload);
            txn.log(b, (int) PAYLOAD, 8);
            txn.commit();
            return b;
        }
    }
}
