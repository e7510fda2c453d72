package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Bounded forward and reverse cursors against a sorted map, alone and beside a writer splitting and merging leaves. */
@ExtendWith(TestSeed.class)
class CursorRangeTest {
    private static final long SEED = TestSeed.get(11);

    @Test
    void boundedCursorsMatchTheModel() {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 8L << 20)) {
            TreeMap<byte[], byte[]> model = new TreeMap<>(Keys::compare);
            for (int i = 0; i < 5000; i++) {
                byte[] k = key(rnd);
                byte[] v = new byte[rnd.nextInt(40)];
                rnd.nextBytes(v);
                s.tree.put(k, v);
                model.put(k, v);
            }
            Cursor reused = null;
            for (int round = 0; round < 200; round++) {
                byte[] a = rnd.nextInt(8) == 0 ? null : key(rnd);
                byte[] b = rnd.nextInt(8) == 0 ? null : key(rnd);
                boolean reverse = rnd.nextBoolean();
                List<byte[]> expected = new ArrayList<>();
                for (byte[] k : reverse ? model.descendingKeySet() : model.navigableKeySet()) {
                    int fromSide = a == null ? 1 : Keys.compare(k, a) * (reverse ? -1 : 1);
                    int toSide = b == null ? -1 : Keys.compare(k, b) * (reverse ? -1 : 1);
                    if (fromSide >= 0 && toSide < 0) {
                        expected.add(k);
                    }
                }
                String where = "seed " + SEED + ", round " + round + ", reverse " + reverse + ", from "
                        + (a == null ? "null" : HexFormat.of().formatHex(a)) + " to " + (b == null ? "null" : HexFormat.of().formatHex(b));
                Cursor c;
                if (round % 2 == 0) {
                    c = s.tree.cursor(a, b, reverse);
                } else { // one cursor reopened again and again, left part way through another range each time
                    reused = reused == null ? s.tree.cursor(null, null, !reverse) : s.tree.cursor(reused, key(rnd), null, !reverse);
                    for (int k = rnd.nextInt(300); k > 0 && reused.next(); k--) {
                        reused.key();
                    }
                    c = reused = s.tree.cursor(reused, a, b, reverse);
                    where += ", reopened";
                }
                for (byte[] k : expected) {
                    assertTrue(c.next(), where);
                    assertArrayEquals(k, c.key(), where);
                    assertArrayEquals(model.get(k), c.value(), where);
                    assertArrayEquals(model.get(k), valueCopy(c), where);
                }
                assertFalse(c.next(), where);
                assertFalse(c.next(), where);
            }
            assertArrayEquals(model.firstKey(), s.tree.firstKey());
            assertArrayEquals(model.lastKey(), s.tree.lastKey());
        }
    }

    @Test
    void cursorsSeeEveryStableKeyOnceInOrderWhileLeavesSplitAndMerge() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 8L << 20)) {
            int n = 6000;
            for (int i = 0; i < n; i += 2) {
                s.tree.put(key(i), new byte[48]);
            }
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread writer = new Thread(() -> {
                Random rnd = new Random(SEED);
                try {
                    while (!stop.get()) {
                        int lo = 1 + 2 * rnd.nextInt(n / 2 - 200);
                        for (int i = lo; i < lo + 400; i += 2) {
                            s.tree.put(key(i), new byte[48]);
                        }
                        for (int i = lo; i < lo + 400; i += 2) {
                            s.tree.delete(key(i));
                        }
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            }, "cursor-test-writer");
            writer.start();
            try {
                for (int round = 0; round < 40; round++) {
                    boolean reverse = round % 2 == 1;
                    List<Integer> stable = new ArrayList<>();
                    Cursor c = s.tree.cursor(null, reverse);
                    int previous = reverse ? Integer.MAX_VALUE : -1;
                    while (c.next()) {
                        int k = (int) Keys.getLong(c.keySegment(), 0);
                        assertTrue(reverse ? k < previous : k > previous, "seed " + SEED + ", round " + round + ": " + k + " after " + previous);
                        previous = k;
                        if (k % 2 == 0) {
                            stable.add(k);
                        }
                    }
                    assertEquals(n / 2, stable.size(), "seed " + SEED + ", round " + round + ": stable keys seen");
                }
            } finally {
                stop.set(true);
                writer.join();
            }
            assertNull(failure.get());
            TreeCheck check = s.tree.check();
            assertTrue(check.ok(), check.toString());
        }
    }

    /** The value through {@link Cursor#value(MemorySegment)}, into a buffer longer than any value. */
    private static byte[] valueCopy(Cursor c) {
        byte[] out = new byte[BTreeNodeFormat.MAX_VALUE];
        return java.util.Arrays.copyOf(out, c.value(MemorySegment.ofArray(out)));
    }

    private static byte[] key(long i) {
        return Keys.ofLong(i);
    }

    private static byte[] key(Random rnd) {
        byte[] k = new byte[1 + rnd.nextInt(12)];
        rnd.nextBytes(k);
        k[0] &= 0x3F; // fewer distinct first bytes: more keys share prefixes
        return k;
    }
}
