package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.internal.LogGeometry;
import dev.ferrite.journal.internal.LogRecordFormat;
import dev.ferrite.journal.internal.Lsn;
import dev.ferrite.journal.internal.ReplayItem;
import dev.ferrite.journal.internal.Replayer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Block initialisation records ({@link BufferCache#createInitialised}): a run of new blocks is logged as
 * one record, recovery rebuilds the blocks from it (before the rest of its checkpoint, over whatever
 * their home blocks held) unless a block at home is newer, replaying twice gives the same blocks, the
 * blocks hold the log's tail at the record until they are home or relogged whole, and a forged record is
 * refused.
 */
class BlockInitTest {
    private static final int BS = 4096;
    private static final LogGeometry LOG = new LogGeometry(1, 256);
    private static final long FIRST = 300;
    private static final int COUNT = 8;
    private static final int MAGIC = 0x54494E49; // "INIT"
    private static final long OWNER = 7;
    private static final long PAYLOAD = BlockHeaderFormat.SIZE + 100;

    private final Arena arena = Arena.ofConfined();
    private MemoryDevice device;
    private Journal journal;
    private BufferCache cache;

    @BeforeEach
    void open() {
        device = MemoryDevice.create(FIRST + 64, BS);
        Journal.format(device, LOG);
        for (long b = FIRST; b < FIRST + COUNT; b++) { // a previous life: sound blocks of another structure
            MemorySegment old = arena.allocate(BS, BS);
            old.fill((byte) 0x5A);
            BlockHeaderFormat.init(old, 0x444C4F, b, 3);
            BlockHeaderFormat.stamp(old, Lsn.NONE); // older than every checkpoint of the log
            device.write(b, old);
        }
        journal = recover(device);
        cache = new BufferCache(device, journal, (long) BufferCache.MIN_FRAMES * BS);
    }

    @AfterEach
    void close() {
        journal.close();
        cache.close();
        device.close();
        arena.close();
    }

    private static Journal recover(MemoryDevice d) {
        try (BufferReplayer replayer = new BufferReplayer(d)) {
            return Journal.open(d, LOG, JournalOptions.defaults(), replayer);
        }
    }

    /** Makes the run in one transaction and writes {@code payload} into block {@code FIRST + changed} in it. */
    private void makeRun(int changed, long payload) {
        int[] frames = new int[COUNT];
        for (int i = 0; i < COUNT; i++) {
            frames[i] = cache.reserveFrame();
        }
        try (Txn txn = Txn.begin(cache, COUNT + 1)) {
            cache.createInitialised(txn, FIRST, COUNT, MAGIC, OWNER, frames);
            Buffer b = cache.get(FIRST + changed, MAGIC, OWNER, "test block");
            assertTrue(txn.lock(b));
            b.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, payload);
            txn.log(b, (int) PAYLOAD, 8);
            txn.commit();
        }
        for (int f : frames) {
            assertEquals(-1, f, "every frame used");
        }
    }

    /** Recovers a copy of the device as it is now (a crash), closes it again and returns it. */
    private MemoryDevice crashAndRecover() {
        MemoryDevice crashed = device.copy("crashed");
        try (Journal j = recover(crashed)) {
            assertFalse(j.recovery().clean());
        }
        return crashed;
    }

    private MemorySegment read(MemoryDevice d, long block) {
        MemorySegment b = arena.allocate(BS, BS);
        d.read(block, b);
        return b;
    }

    /** A sound, freshly initialised block of the run, holding {@code payload} (0: none) and zeros elsewhere. */
    private void assertInitialised(MemoryDevice d, long block, long payload) {
        MemorySegment b = read(d, block);
        BlockHeaderFormat.verify(b, block, MAGIC, OWNER, "test block");
        assertEquals(payload, b.get(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD), "block " + block);
        b.set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 0);
        MemorySegment body = b.asSlice(BlockHeaderFormat.SIZE);
        assertEquals(-1, body.mismatch(arena.allocate(body.byteSize())), "block " + block + " is zero past its header");
    }

    @Test
    void recoveryRebuildsTheRunFromTheRecordThenReplaysItsChanges() {
        makeRun(3, 0x1234);
        journal.forceAll();
        try (MemoryDevice crashed = crashAndRecover()) {
            for (int i = 0; i < COUNT; i++) {
                assertInitialised(crashed, FIRST + i, i == 3 ? 0x1234 : 0);
            }
        }
    }

    @Test
    void replayingTwiceGivesTheSameBlocks() {
        makeRun(5, 77);
        journal.forceAll();
        try (MemoryDevice image = device.copy("image"); MemoryDevice once = image.copy("once");
             MemoryDevice twice = image.copy("twice")) {
            recover(once).close();
            recover(twice).close();
            // a crash after the replayed blocks were written home, before the log moved on: the log as it was
            for (long b = LOG.start(); b < LOG.start() + LOG.blocks(); b++) {
                twice.write(b, read(image, b));
            }
            try (Journal j = recover(twice)) {
                assertFalse(j.recovery().clean());
                assertTrue(j.recovery().itemsSkipped() > 0, "the second replay finds the blocks newer: " + j.recovery());
            }
            for (long b = FIRST; b < FIRST + COUNT; b++) {
                assertEquals(-1, read(once, b).mismatch(read(twice, b)), "block " + b);
                assertInitialised(twice, b, b == FIRST + 5 ? 77 : 0);
            }
        }
    }

    @Test
    void aBlockNewerAtHomeIsLeftAloneAndATornOneRebuilt() {
        makeRun(0, 1);
        journal.forceAll();
        MemorySegment newer = arena.allocate(BS, BS);
        BlockHeaderFormat.init(newer, MAGIC, FIRST + 2, OWNER);
        newer.set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 99);
        BlockHeaderFormat.stamp(newer, Lsn.of(1000, 0)); // written home after every checkpoint in the log
        MemorySegment torn = read(device, FIRST + 4); // the old block, its checksum broken by a torn write
        torn.set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 5);
        try (MemoryDevice crashed = device.copy("crashed")) {
            crashed.write(FIRST + 2, newer);
            crashed.write(FIRST + 4, torn);
            try (Journal j = recover(crashed)) {
                assertFalse(j.recovery().clean());
            }
            assertEquals(-1, read(crashed, FIRST + 2).mismatch(newer), "a block newer than the record is not touched");
            assertInitialised(crashed, FIRST + 4, 0);
            assertInitialised(crashed, FIRST, 1);
        }
    }

    @Test
    void aBlockReloggedBeforeHomeIsLoggedWholeAndMovesOnTheOthersHoldTheTail() {
        makeRun(1, 10);
        journal.forceAll();
        Buffer relogged = cache.get(FIRST + 6, MAGIC, OWNER, "test block");
        Buffer untouched = cache.get(FIRST + 7, MAGIC, OWNER, "test block");
        awaitInAil(relogged);
        awaitInAil(untouched);
        long recordLsn = relogged.lsn();
        assertEquals(recordLsn, untouched.lsn());
        try (Txn txn = Txn.begin(cache, 1)) {
            assertTrue(txn.lock(relogged));
            relogged.data().set(ValueLayout.JAVA_LONG_UNALIGNED, PAYLOAD, 11);
            txn.log(relogged, (int) PAYLOAD, 8);
            txn.commit();
        }
        journal.forceAll();
        awaitInAil(relogged);
        assertTrue(relogged.lsn() > recordLsn, "relogged whole, the block moves on in the AIL");
        assertEquals(recordLsn, untouched.lsn(), "a block not home holds the tail at its record");
        try (MemoryDevice image = device.copy("image")) {
            List<String> relogs = new ArrayList<>();
            try (BufferReplayer inner = new BufferReplayer(image)) {
                Replayer watching = new Replayer() {
                    @Override
                    public boolean knows(int type) {
                        return inner.knows(type);
                    }

                    @Override
                    public boolean replaysFirst(int type) {
                        return inner.replaysFirst(type);
                    }

                    @Override
                    public int blocks(ReplayItem item) {
                        return inner.blocks(item);
                    }

                    @Override
                    public boolean replay(ReplayItem item) {
                        if (item.home() == FIRST + 6 && item.lsn() > recordLsn) {
                            relogs.add((item.zeroed() ? "zeroed" : "plain") + " from " + item.rangeOffset(0));
                        }
                        return inner.replay(item);
                    }

                    @Override
                    public void finish() {
                        inner.finish();
                    }
                };
                Journal.open(image, LOG, JournalOptions.defaults(), watching).close();
            }
            assertEquals(List.of("zeroed from 0"), relogs, "the relog rebuilds the block without the record: zeroed, with its header");
            assertInitialised(image, FIRST + 6, 11);
            assertInitialised(image, FIRST + 1, 10);
        }
        journal.close(); // writes every block home
        for (long b = FIRST; b < FIRST + COUNT; b++) {
            assertInitialised(device, b, b == FIRST + 1 ? 10 : b == FIRST + 6 ? 11 : 0);
        }
        journal = recover(device);
    }

    private static void awaitInAil(Buffer b) {
        long deadline = System.nanoTime() + SECONDS.toNanos(10);
        while (b.isPinned() || b.lsn() == Lsn.NONE) {
            assertTrue(System.nanoTime() < deadline, b + " did not reach the AIL");
            LockSupport.parkNanos(100_000);
        }
    }

    @Test
    void aForgedRecordIsRefusedNamingTheLogBlock() {
        makeRun(2, 3);
        journal.forceAll();
        // the block change's op turned into a record: its one range is not at offset 0
        CorruptionException e = assertThrows(CorruptionException.class, () -> recoverForged(1, BufferCache.INIT_TYPE, 0));
        assertTrue(e.getMessage().contains("is malformed"), e.getMessage());
        // the record moved into the log
        e = assertThrows(CorruptionException.class, () -> recoverForged(BufferCache.INIT_TYPE, BufferCache.INIT_TYPE, LOG.start()));
        assertTrue(e.getMessage().contains("outside the device or inside the log"), e.getMessage());
        // the record moved to the device's end: its run would go past it
        e = assertThrows(CorruptionException.class, () -> recoverForged(BufferCache.INIT_TYPE, BufferCache.INIT_TYPE,
                device.blockCount() - COUNT / 2));
        assertTrue(e.getMessage().contains("outside the device or inside the log"), e.getMessage());
        assertTrue(e.getMessage().contains("log checkpoint"), e.getMessage());
    }

    /**
     * Recovers a copy of the device in which the first op of type {@code type} has been given type
     * {@code newType} and, unless 0, home block {@code newHome} (the record sealed again, as a forger would).
     */
    private void recoverForged(int type, int newType, long newHome) {
        try (MemoryDevice forged = device.copy("forged")) {
            boolean done = false;
            for (long b = LOG.start(); b < LOG.start() + LOG.blocks() && !done; b++) {
                MemorySegment h = read(forged, b);
                if (!LogRecordFormat.isRecordHeader(h) || b + LogRecordFormat.recordBlocks(h) > LOG.start() + LOG.blocks()) {
                    continue;
                }
                MemorySegment rec = arena.allocate(LogRecordFormat.recordBlocks(h) * BS, BS);
                forged.read(b, rec);
                long[] seen = new long[512];
                int fields = 0;
                for (; fields < seen.length; fields++) { // the header's 11 fields, then each op's
                    int k = fields;
                    if (!LogRecordFormat.rewriteField(rec, BS, k, old -> seen[k] = old)) {
                        break;
                    }
                }
                for (int k = 11; k + 4 < fields && !done; k++) {
                    if (seen[k] == type && seen[k + 4] >= FIRST && seen[k + 4] < FIRST + COUNT) { // type, ranges, flags, length, home
                        LogRecordFormat.rewriteField(rec, BS, k, old -> newType);
                        if (newHome != 0) {
                            LogRecordFormat.rewriteField(rec, BS, k + 4, old -> newHome);
                        }
                        forged.write(b, rec);
                        done = true;
                    }
                }
            }
            assertTrue(done, "no op of type " + type + " for the run in the log");
            recover(forged).close();
        }
    }
}
