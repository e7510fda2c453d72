package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;

import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.ReservationExceededException;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** {@link Journal#begin(int, Transaction)}: a finished transaction starts again with a fresh, exact reservation. */
class TransactionReuseTest {
    @Test
    void aFinishedTransactionStartsAgainAndGivesItsSpaceBack() {
        try (MemoryDevice dev = MemoryDevice.create(2048, 4096); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(1000, 512);
            Journal.format(dev, g);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(10, 4096, arena), b = new TestItem(11, 4096, arena);
                long idle = j.space().freeBytes();
                Transaction tx = j.begin(Reservation.items(1));
                Transaction other = j.begin(1, tx);
                assertNotSame(tx, other, "a running transaction is not restarted");
                other.cancel();
                for (int round = 0; round < 200; round++) {
                    if (round > 0) {
                        assertSame(tx, j.begin(round % 2 + 1, tx), "round " + round);
                        assertFalse(tx.isDone());
                    }
                    a.lock.lock();
                    b.lock.lock();
                    try {
                        a.add(tx, 0, 1);
                        if (round % 2 == 1) {
                            b.add(tx, 1, 1);
                        } else { // the restart reserved for one item: a second is refused
                            int r = round;
                            assertThrows(ReservationExceededException.class, () -> tx.join(b), "round " + r);
                        }
                        tx.commit();
                    } finally {
                        a.lock.unlock();
                        b.lock.unlock();
                    }
                }
                j.forceAll();
                j.quiesce();
                assertEquals(idle, j.space().freeBytes(), "every reused ticket gave back what it took");
                assertThrows(InvalidArgumentException.class, () -> j.begin(0, tx));
            }
        }
    }
}
