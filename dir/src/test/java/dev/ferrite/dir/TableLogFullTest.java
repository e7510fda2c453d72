package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;

import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.internal.Reservation;
import dev.ferrite.journal.internal.Transaction;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A write transaction that finds the log full while it applies (here because other reservations hold
 * it; in life because an item its group pinned holds the tail) is refused with LOG_FULL and undone,
 * changing nothing, instead of waiting for ever; retried once the log has room, it commits.
 */
class TableLogFullTest {
    @Test
    void aTransactionOnAFullLogIsUndoneAndMaySucceedLater() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(TableTest.b("before"), TableTest.b("1"));
            // a key above the transaction's: its keys (applied in order) land inside a leaf, so splits halve
            // leaves and log them whole, where appends at the tree's right edge would log little and fit
            t.put(TableTest.b("z"), TableTest.b("1"));
            v.sync();
            Journal j = v.journal();
            j.quiesce(); // nothing left to write home: no space comes back on its own now
            long budget = j.logBytes() / 4; // Tables.groupBudget: the quarter, on this log
            int puts = (int) (j.logBytes() / 2000);
            byte[] value = new byte[200];
            List<Transaction> held = new ArrayList<>();
            try {
                // everything but the group's budget and less than one more transaction's reservation
                for (int items : new int[] {64, 1}) {
                    while (j.stats().freeBytes() - budget >= j.reservationBytes(items) + j.reservationBytes(1)) {
                        held.add(j.begin(Reservation.items(items)));
                    }
                }
                assertTimeoutPreemptively(java.time.Duration.ofSeconds(60), () -> {
                    TableException e = assertThrows(TableException.class, () -> {
                        try (WriteTransaction tx = v.begin(Durability.NONE)) {
                            for (int i = 0; i < puts; i++) {
                                tx.put(t, TableTest.b(String.format("k%06d", i)), value);
                            }
                            tx.commit();
                        }
                    });
                    assertEquals(TableException.Kind.LOG_FULL, e.kind(), e.getMessage());
                });
                assertEquals(2, t.count(), "nothing of the refused transaction is left");
            } finally {
                held.forEach(Transaction::cancel);
            }
            try (WriteTransaction tx = v.begin(Durability.SYNC)) {
                for (int i = 0; i < puts; i++) {
                    tx.put(t, TableTest.b(String.format("k%06d", i)), value);
                }
                tx.commit();
            }
            assertEquals(puts + 2, t.count());
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), report.toString());
        }
    }
}
