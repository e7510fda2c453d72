package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** Large unforced transactions cycling over many items on a small log: reservations must never stall for good. */
class LogSpaceLivenessTest {
    static final int BS = 4096;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void largeTransactionsOnASmallLogKeepMoving() {
        int items = 2048;
        try (MemoryDevice dev = MemoryDevice.create(4096 + 2048, BS); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(4096, 1024);
            Journal.format(dev, g);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                TestItem[] pool = new TestItem[items];
                for (int i = 0; i < items; i++) {
                    pool[i] = new TestItem(i, BS, arena);
                }
                int next = 0;
                Thread dog = new Thread(() -> {
                    try {
                        Thread.sleep(20_000);
                        System.err.println("stalled: " + j.diagnostics() + "; " + j.stats());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt(); // finished in time
                    }
                });
                dog.setDaemon(true);
                dog.start();
                for (int n = 0; n < 3000; n++) {
                    Transaction tx = j.begin(Reservation.items(32));
                    TestItem[] batch = new TestItem[32];
                    for (int k = 0; k < 32; k++) {
                        batch[k] = pool[next];
                        next = (next + 1) % items;
                        batch[k].lock.lock();
                    }
                    try {
                        for (TestItem it : batch) {
                            it.image().fill((byte) n);
                            tx.log(it, 16, BS - 16);
                        }
                        tx.commit();
                    } finally {
                        for (TestItem it : batch) {
                            it.lock.unlock();
                        }
                    }
                }
                dog.interrupt();
                j.forceAll();
                assertTrue(j.stats().checkpointBytes() > 4 * j.logBytes(), j.stats().toString());
            }
        }
    }
}
