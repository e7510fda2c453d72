package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Closing a cursor hands its leaf copy and key buffers to the next cursor its thread opens: short scans
 * (YCSB E's, 1 to 100 entries) that close their cursors allocate none of them, a closed cursor refuses
 * every use, cursors open at once never share buffers, and scans from threads closing and opening
 * cursors while others insert each return their keys in order, every key loaded before them included.
 */
@ExtendWith(TestSeed.class)
class TableCursorTest {
    private static final long SEED = TestSeed.get(23);
    private static final int KEYS = 3000;

    private static byte[] key(int i) {
        return String.format("k%06d", i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    private static int index(byte[] key) {
        return Integer.parseInt(new String(key, 1, key.length - 1, java.nio.charset.StandardCharsets.US_ASCII));
    }

    private static byte[] value(int i) {
        byte[] v = new byte[64];
        for (int k = 0; k < v.length; k++) {
            v[k] = (byte) (i * 31 + k);
        }
        return v;
    }

    /** Keys 0, 2, 4, ... below 2 * KEYS: odd ones are left for inserts. */
    private static void load(Table t) {
        for (int i = 0; i < KEYS; i++) {
            t.put(key(2 * i), value(2 * i));
        }
    }

    /**
     * A short scan that closes its cursor, reading each value in pieces, allocates only the cursor objects
     * and a few views (about 150 bytes), not the cursor's 4 KiB leaf copy and 1 KiB key buffer (5.3 KiB a
     * scan when every cursor made its own) nor a view of each value (40 bytes an entry).
     */
    @Test
    void aShortScanThatClosesItsCursorAllocatesNoLeafCopy() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            load(t);
            SplittableRandom random = new SplittableRandom(SEED);
            long[] sum = new long[1];
            TableCursor.Pieces fold = (bytes, offset, length) -> sum[0] += bytes.get(ValueLayout.JAVA_BYTE, offset);
            byte[][] starts = new byte[KEYS][];
            for (int i = 0; i < KEYS; i++) {
                starts[i] = key(2 * i); // made before: formatting a key allocates more than a scan
            }
            double best = Double.MAX_VALUE;
            for (int round = 0; round < 5; round++) {
                long before = FileTestBase.allocatedBytes();
                for (int scan = 0; scan < 2000; scan++) {
                    int length = 1 + random.nextInt(100);
                    try (TableCursor c = t.cursor(starts[random.nextInt(KEYS)], null, false)) {
                        for (int n = 0; n < length && c.next(); n++) {
                            if (c.value(fold) != 64) {
                                fail("scan " + scan + " entry " + n + " is not 64 bytes");
                            }
                        }
                    }
                }
                double perScan = (FileTestBase.allocatedBytes() - before) / 2000.0;
                best = round == 0 ? best : Math.min(best, perScan); // the first round warms up
            }
            assertTrue(best < 512, best + " bytes allocated per short scan (seed " + SEED + ")");
        }
    }

    @Test
    void aClosedCursorRefusesEveryUse() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            load(t);
            try (Snapshot s = v.tables().snapshot()) {
                for (TableCursor c : List.of(t.cursor(), s.cursor(t, null, null, false))) {
                    assertTrue(c.next());
                    c.close();
                    c.close(); // a second close does nothing
                    for (Runnable use : List.<Runnable>of(c::next, c::key, c::keySegment, c::value, c::valueSegment,
                            () -> c.value(MemorySegment.ofArray(new byte[64])), () -> c.value((bytes, offset, length) -> { }),
                            () -> c.seek(key(0)))) {
                        TableException e = assertThrows(TableException.class, use::run);
                        assertEquals(TableException.Kind.CURSOR_CLOSED, e.kind(), e.getMessage());
                    }
                }
            }
        }
    }

    /**
     * Cursors open at once on one thread, one closed, its buffers taken by the next opened, then closed
     * again, each return their own keys while their moves interleave across many leaves.
     */
    @Test
    void cursorsOpenAtOnceOnOneThreadKeepTheirOwnPlaces() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            load(t);
            TableCursor first = t.cursor(key(100), null, false);
            assertTrue(first.next());
            TableCursor second = t.cursor(key(2000), null, false);
            first.close();
            TableCursor third = t.cursor(key(4000), null, true); // takes first's buffers
            first.close(); // must not hand them out again
            TableCursor fourth = t.cursor(key(10), null, false);
            int[] at = {2000, 4000, 10};
            TableCursor[] cursors = {second, third, fourth};
            for (int step = 0; step < 900; step++) {
                for (int c = 0; c < cursors.length; c++) {
                    assertTrue(cursors[c].next(), "cursor " + c + " step " + step);
                    assertArrayEquals(key(at[c]), cursors[c].key(), "cursor " + c + " step " + step);
                    assertArrayEquals(value(at[c]), cursors[c].value(), "cursor " + c + " step " + step);
                    at[c] += c == 1 ? -2 : 2;
                }
            }
            for (TableCursor c : cursors) {
                c.close();
            }
        }
    }

    /**
     * Threads running short scans, closing each cursor, race threads inserting the odd keys: every scan
     * returns keys in order, values intact, and every loaded key between its first and last; then the
     * volume checks clean.
     */
    @Test
    void shortScansThatCloseTheirCursorsRaceInserts() throws InterruptedException {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            load(t);
            AtomicReference<Throwable> failed = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < 2; w++) {
                int writer = w;
                threads.add(Thread.ofPlatform().name("inserter-" + w).start(() -> {
                    try {
                        for (int i = writer; i < KEYS && failed.get() == null; i += 2) {
                            t.put(key(2 * i + 1), value(2 * i + 1));
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, e);
                    }
                }));
            }
            for (int r = 0; r < 4; r++) {
                long seed = SEED + r;
                threads.add(Thread.ofPlatform().name("scanner-" + r).start(() -> {
                    try {
                        scan(t, new SplittableRandom(seed), 4000);
                    } catch (Throwable e) {
                        failed.compareAndSet(null, new AssertionError("seed " + seed, e));
                    }
                }));
            }
            for (Thread th : threads) {
                th.join(120_000);
                assertFalse(th.isAlive(), th.getName() + " did not finish");
            }
            if (failed.get() != null) {
                throw new AssertionError(failed.get());
            }
            assertEquals(2L * KEYS, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** Short scans, a quarter in reverse: keys strictly in order, loaded (even) ones all there, from the start key on. */
    private static void scan(Table t, SplittableRandom random, int scans) {
        for (int s = 0; s < scans; s++) {
            int from = 2 * random.nextInt(KEYS);
            int length = 1 + random.nextInt(100);
            boolean reverse = random.nextInt(4) == 0;
            int step = reverse ? -1 : 1;
            int loaded = from; // the next loaded key the scan must return
            int previous = from - step;
            try (TableCursor c = t.cursor(key(from), null, reverse)) {
                for (int n = 0; n < length && c.next(); n++) {
                    int k = index(c.key());
                    assertArrayEquals(value(k), c.value(), "scan " + s + " key " + k);
                    assertTrue((k - previous) * step > 0, "scan " + s + ": key " + k + " after " + previous);
                    if (k % 2 == 0) {
                        assertEquals(loaded, k, "scan " + s + " from " + from + " skipped a loaded key");
                        loaded += 2 * step;
                    }
                    previous = k;
                }
            }
        }
    }
}
