package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.JournalOptions;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

/** A closed {@link Txn} is started again by its thread's next begin on the same cache, and only then. */
class TxnReuseTest {
    static final int BS = 4096;

    private static byte[] key(long i) {
        return ByteBuffer.allocate(8).putLong(i).array();
    }

    private static MemorySegment seg(byte[] b) {
        return MemorySegment.ofArray(b);
    }

    @Test
    void aClosedTransactionIsReusedByItsThreadOnly() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(16384, BS)) {
            Store.format(dev, 1024, 64L << 20).close();
            try (Store s = Store.open(dev, 1024, 64L << 20, JournalOptions.defaults())) {
                Txn first;
                try (Txn t = Txn.begin(s.cache, s.tree.reservation())) {
                    first = t;
                    s.tree.put(t, seg(key(0)), seg(new byte[8]));
                    t.commit();
                }
                try (Txn again = Txn.begin(s.cache, s.tree.reservation())) {
                    assertSame(first, again);
                    assertFalse(again.transaction().isDone());
                    try (Txn nested = Txn.begin(s.cache, 1)) {
                        assertNotSame(again, nested, "a running transaction is never handed out again");
                    }
                    s.tree.put(again, seg(key(1)), seg(new byte[8]));
                    again.commit();
                }
                AtomicReference<Txn> other = new AtomicReference<>();
                Thread thread = new Thread(() -> {
                    try (Txn t = Txn.begin(s.cache, 1)) {
                        other.set(t);
                    }
                });
                thread.start();
                thread.join();
                assertNotSame(first, other.get(), "another thread's begin does not take this thread's transaction");

                for (long i = 2; i < 2000; i++) { // splits included: the recycled arrays and ticket stay exact
                    try (Txn t = Txn.begin(s.cache, s.tree.reservation())) {
                        assertSame(first, t, "put " + i);
                        s.tree.put(t, seg(key(i)), seg(key(i * 3)));
                        t.commit();
                    }
                }
                for (long i = 2; i < 2000; i++) {
                    assertArrayEquals(key(i * 3), s.tree.get(key(i)), "key " + i);
                }
            }
        }
    }
}
