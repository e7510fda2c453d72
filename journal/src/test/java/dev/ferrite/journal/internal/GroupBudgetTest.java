package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.ReservationExceededException;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Journal#pin(long)}: a group's holder that finds the log full (here: another reservation holds
 * it, as a group-pinned item at the tail would) goes on with its budget instead of waiting forever, is
 * refused cleanly once the budget cannot cover a transaction, and every byte goes back in the end.
 */
class GroupBudgetTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 256);

    @Test
    void aGroupOnAFullLogUsesItsBudgetThenIsRefused() {
        try (Arena arena = Arena.ofShared(); MemoryDevice dev = MemoryDevice.create(2048, BS)) {
            Journal.format(dev, G);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                long idle = j.space().freeBytes();
                long unit = j.reservationBytes(1);
                List<Ticket> blockers = new ArrayList<>();
                // in the timeout's own thread: a group belongs to the thread that began it
                assertTimeoutPreemptively(Duration.ofSeconds(30), () -> {
                    Journal.Pin pin = j.pin(3 * unit);
                    assertEquals(3 * unit, pin.budgetLeft());
                    // the rest of the log, held elsewhere: the heads cannot grant anything until it is let go
                    for (long free; (free = j.space().freeBytes()) > 0; ) {
                        Ticket t = new Ticket(Math.min(free, j.logBytes() / 2), 1);
                        j.space().reserve(t);
                        blockers.add(t);
                    }
                    int done = 0;
                    try {
                        for (;; done++) {
                            assertTrue(done < 800, "the budget never ran out"); // items stay below the log at block 1000
                            TestItem a = new TestItem(100 + done, BS, arena); // a new item each time: every commit takes log space
                            a.lock.lock();
                            try {
                                Transaction tx = j.begin(Reservation.items(1));
                                a.add(tx, 0, 1);
                                tx.commit();
                            } finally {
                                a.lock.unlock();
                            }
                            assertTrue(pin.budgetLeft() < 3 * unit, "commit " + done + " came out of the budget");
                        }
                    } catch (ReservationExceededException e) {
                        assertTrue(e.getMessage().contains("budget"), e.getMessage());
                    }
                    assertTrue(done >= 2, "the budget covered " + done + " transactions");
                    assertTrue(pin.budgetLeft() < unit, "refused only once the budget could not cover one more: " + pin.budgetLeft());
                    pin.close();
                });
                blockers.forEach(j.space()::ungrant);
                j.forceAll();
                j.quiesce();
                assertEquals(idle, j.space().freeBytes(), "the budget, the lent tickets and the blocker all gave back what they took");
                assertThrows(IllegalStateException.class, () -> {
                    try (Journal.Pin p = j.pin(unit); Journal.Pin q = j.pin(unit)) {
                        p.seq();
                    }
                });
            }
        }
    }
}
