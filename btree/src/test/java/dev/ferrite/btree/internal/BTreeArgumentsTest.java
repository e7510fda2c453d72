package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import dev.ferrite.io.InvalidArgumentException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_ENTRY;
import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_KEY;
import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_VALUE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Keys and values outside the limits: every entry point refuses them with an
 * {@link InvalidArgumentException} naming the length and the limit, before touching anything, so the
 * tree, the transaction and the journal carry on as if the call had not been made. The limits themselves
 * are accepted.
 */
class BTreeArgumentsTest {
    private static final byte[] EMPTY = new byte[0];
    private static final byte[] LONG_KEY = filled(MAX_KEY + 1, 'k');
    /** Too long beside any key. */
    private static final byte[] LONG_VALUE = filled(MAX_ENTRY, 'v');
    private static final String KEY_LIMIT = "keys are 1 to " + MAX_KEY + " bytes";

    private ProbeDevice device;
    private Store store;
    private BTree tree;

    @BeforeEach
    void fill() {
        device = new ProbeDevice(4096, 4096);
        store = Store.format(device, 512, 256L * 4096);
        tree = store.tree;
        for (int i = 0; i < 400; i++) {
            tree.put(("key" + i).getBytes(), filled(i % 200, (char) ('a' + i % 26)));
        }
        assertTrue(tree.height() > 1, "the tree under test has more than one level");
    }

    @AfterEach
    void close() {
        store.close();
        device.close();
    }

    @Test
    void keyTooLong() {
        refused("key of " + (MAX_KEY + 1) + " bytes: " + KEY_LIMIT, invalidKeyCalls(LONG_KEY));
    }

    @Test
    void emptyKey() {
        refused("key of 0 bytes: " + KEY_LIMIT, invalidKeyCalls(EMPTY));
    }

    /** A key and its value take at most {@link BTreeNodeFormat#MAX_ENTRY} bytes together: one byte more is refused, whatever the key. */
    @Test
    void valueTooLongForItsKey() {
        byte[] k = "key7".getBytes(), fresh = "fresh".getBytes(), longKey = filled(MAX_KEY, 'q');
        byte[] over4 = filled(MAX_ENTRY - 4 + 1, 'v'), over5 = filled(MAX_ENTRY - 5 + 1, 'v'), over1024 = filled(MAX_VALUE + 1, 'v');
        refused("value of " + over4.length + " bytes: a key and its value are at most " + MAX_ENTRY + " bytes together ("
                        + (MAX_ENTRY - 4) + " beside this 4-byte key)",
                () -> tree.put(k, over4),
                () -> inTxn(txn -> tree.put(txn, seg(k), seg(over4))));
        refused("value of " + over5.length + " bytes: a key and its value are at most " + MAX_ENTRY + " bytes together ("
                        + (MAX_ENTRY - 5) + " beside this 5-byte key)",
                () -> tree.put(fresh, over5),
                () -> inTxn(txn -> tree.putIfAbsent(txn, seg(fresh), seg(over5))));
        refused("value of " + over1024.length + " bytes: a key and its value are at most " + MAX_ENTRY + " bytes together ("
                        + MAX_VALUE + " beside this 1024-byte key)",
                () -> tree.put(longKey, over1024));
    }

    /** A cache without wide cells (a volume formatted before them) bounds values alone, to {@link BTreeNodeFormat#MAX_VALUE}. */
    @Test
    void valueTooLongWithoutWideCells() {
        store.cache.wideCells(false);
        byte[] k = "key7".getBytes();
        byte[] over = filled(MAX_VALUE + 1, 'v');
        refused("value of " + over.length + " bytes: values are at most " + MAX_VALUE + " bytes",
                () -> tree.put(k, over),
                () -> tree.put("fresh".getBytes(), over),
                () -> inTxn(txn -> tree.put(txn, seg(k), seg(over))),
                () -> inTxn(txn -> tree.putIfAbsent(txn, seg("fresh".getBytes()), seg(over))));
        byte[] largest = filled(MAX_VALUE, 'V');
        tree.put(k, largest);
        assertArrayEquals(largest, tree.get(k));
    }

    @Test
    void limitsThemselvesAreAccepted() {
        byte[] longest = filled(MAX_KEY, 'z');
        byte[] largest = filled(MAX_VALUE, 'V');
        byte[] widest = filled(MAX_ENTRY - 1, 'W'), beside16 = filled(MAX_ENTRY - 16, 'X');
        byte[] key16 = filled(16, 'm');
        tree.put(longest, largest);
        tree.put(new byte[] {0}, EMPTY);
        tree.put(new byte[] {1}, widest);
        tree.put(key16, beside16);
        assertArrayEquals(largest, tree.get(longest));
        assertArrayEquals(EMPTY, tree.get(new byte[] {0}));
        assertArrayEquals(widest, tree.get(new byte[] {1}));
        assertArrayEquals(beside16, tree.get(key16));
        Cursor c = tree.cursor(longest, false);
        assertTrue(c.next());
        assertArrayEquals(longest, c.key());
        TreeCheck check = tree.check();
        assertTrue(check.ok(), check.toString());
        assertEquals(404, check.keys());
    }

    /** A refused call inside a transaction leaves its earlier changes to commit, and an unchanged one to close quietly. */
    @Test
    void refusedCallLeavesTheTransactionUsable() {
        byte[] k = "key42".getBytes();
        try (Txn txn = Txn.begin(store.cache, 2 * tree.reservation())) {
            assertTrue(tree.put(txn, seg("a-new-key".getBytes()), seg("v".getBytes())));
            assertThrows(InvalidArgumentException.class, () -> tree.put(txn, seg(k), seg(LONG_VALUE)));
            txn.commit();
        }
        assertArrayEquals("v".getBytes(), tree.get("a-new-key".getBytes()));
        try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
            assertThrows(InvalidArgumentException.class, () -> tree.delete(txn, seg(LONG_KEY)));
        }
        assertFalse(store.journal.isShutdown(), "closing a transaction that changed nothing shut the journal down");
        tree.put(k, "after".getBytes());
        assertArrayEquals("after".getBytes(), tree.get(k));
        assertTrue(tree.check().ok());
    }

    private Executable[] invalidKeyCalls(byte[] key) {
        MemorySegment out = MemorySegment.ofArray(new byte[16]);
        return new Executable[] {
            () -> tree.put(key, "v".getBytes()),
            () -> tree.delete(key),
            () -> tree.get(key),
            () -> tree.get(seg(key), out),
            () -> tree.cursor(key, false),
            () -> tree.cursor(key, true),
            () -> inTxn(txn -> tree.put(txn, seg(key), seg("v".getBytes()))),
            () -> inTxn(txn -> tree.putIfAbsent(txn, seg(key), seg("v".getBytes()))),
            () -> inTxn(txn -> tree.delete(txn, seg(key))),
        };
    }

    /** Each call throws exactly {@code message}, and afterwards the tree holds what it held before. */
    private void refused(String message, Executable... calls) {
        List<byte[][]> before = entries();
        for (int i = 0; i < calls.length; i++) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, calls[i], "call " + i);
            assertEquals(message, e.getMessage(), "call " + i);
        }
        List<byte[][]> after = entries();
        assertEquals(before.size(), after.size());
        for (int i = 0; i < before.size(); i++) {
            assertArrayEquals(before.get(i)[0], after.get(i)[0]);
            assertArrayEquals(before.get(i)[1], after.get(i)[1]);
        }
        TreeCheck check = tree.check();
        assertTrue(check.ok(), check.toString());
        assertEquals(before.size(), check.keys());
        assertFalse(store.journal.isShutdown());
    }

    private List<byte[][]> entries() {
        List<byte[][]> list = new ArrayList<>();
        Cursor c = tree.cursor(null, false);
        while (c.next()) {
            list.add(new byte[][] {c.key(), c.value()});
        }
        return list;
    }

    private interface TxnBody {
        void run(Txn txn);
    }

    /** Runs {@code body} in a transaction that commits only if it returns. */
    private void inTxn(TxnBody body) {
        try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
            body.run(txn);
            txn.commit();
        }
    }

    private static MemorySegment seg(byte[] b) {
        return MemorySegment.ofArray(b);
    }

    private static byte[] filled(int n, char c) {
        byte[] b = new byte[n];
        Arrays.fill(b, (byte) c);
        return b;
    }
}
