package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.JournalStats;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

@ExtendWith(TestSeed.class)
class JournalWrapTest {
    static final int BS = 4096;

    @Test
    void smallLogWrapsManyTimesAndRecovers() {
        long seed = TestSeed.get(42);
        Random rnd = new Random(seed);
        int nItems = 16;
        long[] expected = new long[nItems];
        try (MemoryDevice dev = MemoryDevice.create(256, BS); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(100, 64);
            Journal.format(dev, g);
            MemoryDevice crashed;
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                TestItem[] items = new TestItem[nItems];
                for (int i = 0; i < nItems; i++) {
                    items[i] = new TestItem(i, BS, arena);
                }
                for (int n = 0; n < 4000; n++) {
                    Transaction tx = j.begin(Reservation.items(2));
                    int a = rnd.nextInt(nItems), b = (a + 1 + rnd.nextInt(nItems - 1)) % nItems;
                    items[a].lock.lock();
                    items[b].lock.lock();
                    long seq;
                    try {
                        items[a].add(tx, n % 7, 1);
                        items[b].add(tx, 3 + n % 5, 2);
                        seq = tx.commit();
                    } finally {
                        items[b].lock.unlock();
                        items[a].lock.unlock();
                    }
                    expected[a]++;
                    expected[b] += 2;
                    if (n % 3 == 0) {
                        j.force(seq);
                    }
                }
                j.forceAll();
                JournalStats s = j.stats();
                assertTrue(s.checkpointBytes() > 20L * j.logBytes(), "log should wrap many times: " + s);
                assertTrue(s.ailWrittenBack() > 0 && s.tailMoves() > 0, s.toString());
                crashed = dev.copy("crashed"); // everything forced is on the copy; the log is dirty
            }
            try (crashed) {
                try (TestReplayer rep = new TestReplayer(crashed);
                     Journal j = Journal.open(crashed, g, JournalOptions.defaults(), rep)) {
                    assertFalse(j.recovery().clean());
                }
                assertTotals(crashed, arena, expected, "after crash recovery (seed " + seed + ")");
            }
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                assertTrue(j.recovery().clean(), j.recovery().toString());
            }
            assertTotals(dev, arena, expected, "after clean close (seed " + seed + ")");
        }
    }

    static void assertTotals(BlockDevice dev, Arena arena, long[] expected, String when) {
        MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        for (int i = 0; i < expected.length; i++) {
            dev.read(i, blk);
            assertTrue(TestItem.blockValid(blk), "block " + i + " checksum " + when);
            long sum = 0;
            for (int c = 0; c < TestItem.counters(BS); c++) {
                sum += TestItem.blockCounter(blk, c);
            }
            assertEquals(expected[i], sum, "item " + i + " " + when);
        }
    }
}
