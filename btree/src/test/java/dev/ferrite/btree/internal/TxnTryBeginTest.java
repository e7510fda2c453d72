package dev.ferrite.btree.internal;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Txn#tryBegin}: with the log's space reserved by open transactions, it returns null at once and
 * reserves nothing, for a thread with an idle transaction to reuse and for one without; once a
 * transaction gives its space back, exactly as many more begin as fit in it.
 */
class TxnTryBeginTest {
    private static final int ITEMS = 8;

    @Test
    void withoutSpaceNowItReservesNothing() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096); Store s = Store.format(dev, 256, 16L << 20)) {
            Txn.begin(s.cache, ITEMS).close(); // this thread now has an idle transaction to reuse
            Deque<Txn> held = new ArrayDeque<>();
            for (Txn t; (t = Txn.tryBegin(s.cache, ITEMS)) != null; ) {
                held.push(t);
            }
            assertTrue(held.size() > 2, "the log took " + held.size() + " transactions");
            assertNull(Txn.tryBegin(s.cache, ITEMS), "reusing this thread's idle transaction");
            assertNull(CompletableFuture.supplyAsync(() -> Txn.tryBegin(s.cache, ITEMS)).get(10, TimeUnit.SECONDS), "on a thread without one");
            held.pop().close();
            Txn again = Txn.tryBegin(s.cache, ITEMS);
            assertNotNull(again, "the space one transaction gave back: the refused ones took none of it");
            assertNull(Txn.tryBegin(s.cache, ITEMS), "and no more");
            again.close();
            while (!held.isEmpty()) {
                held.pop().close();
            }
        }
    }
}
