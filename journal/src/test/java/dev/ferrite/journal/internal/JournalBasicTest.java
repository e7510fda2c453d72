package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class JournalBasicTest {
    @Test
    void commitForceCloseReopen() {
        try (MemoryDevice dev = MemoryDevice.create(2048, 4096); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(1000, 512);
            Journal.format(dev, g);
            TestItem[] items = new TestItem[10];
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                assertTrue(j.recovery().clean());
                for (int i = 0; i < items.length; i++) {
                    items[i] = new TestItem(10 + i, 4096, arena);
                }
                for (int round = 0; round < 100; round++) {
                    Transaction tx = j.begin(Reservation.items(2));
                    TestItem a = items[round % 10], b = items[(round + 3) % 10];
                    a.lock.lock();
                    b.lock.lock();
                    try {
                        a.add(tx, 0, 1);
                        b.add(tx, 1, 1);
                        long seq = tx.commit();
                        if (round % 10 == 0) {
                            a.lock.unlock();
                            b.lock.unlock();
                            j.force(seq);
                            continue;
                        }
                    } finally {
                        if (a.lock.isHeldByCurrentThread()) {
                            a.lock.unlock();
                        }
                        if (b.lock.isHeldByCurrentThread()) {
                            b.lock.unlock();
                        }
                    }
                }
                System.out.println(j.stats());
            }
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                assertTrue(j.recovery().clean(), j.recovery().toString());
            }
            MemorySegment blk = arena.allocate(4096, BlockDevice.BUFFER_ALIGNMENT);
            for (int i = 0; i < 10; i++) {
                dev.read(10 + i, blk);
                assertEquals(10, TestItem.blockCounter(blk, 0), "item " + i);
                assertEquals(10, TestItem.blockCounter(blk, 1), "item " + i);
                assertTrue(TestItem.blockValid(blk));
            }
        }
    }
}
