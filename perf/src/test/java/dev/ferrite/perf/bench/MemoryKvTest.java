package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MemoryKvTest {
    /** Values whose first word names them, as the workload's do. */
    private static byte[] value(long word) {
        byte[] v = new byte[KvKeys.VALUE];
        KvKeys.value(word, v);
        return v;
    }

    /** The words of the values a scan of {@code [from, to)} returns, in its order. */
    private static List<Long> scan(KvStore.Session s, byte[] from, byte[] to) {
        List<Long> words = new ArrayList<>();
        try (KvStore.Scan scan = s.scan(from, to)) {
            for (int length; (length = scan.next()) >= 0; ) {
                assertEquals(KvKeys.VALUE, length);
                words.add(scan.word());
            }
        }
        return words;
    }

    @Test
    void putGetScanInUnsignedOrderAndDelete() {
        // 0x7f sorts before 0x80 unsigned (after it signed); a prefix before its extensions
        byte[][] keys = {{0x10}, {0x10, 0x00}, {0x7f, 0x01}, {(byte) 0x80}, {(byte) 0xff, 0x00}};
        try (KvStore store = new MemoryKv(); KvStore.Session s = store.session()) {
            assertEquals(MemoryKv.DESCRIPTION, store.describe());
            byte[] buffer = new byte[KvKeys.KEY_MAX];
            for (int i = keys.length - 1; i >= 0; i--) { // out of order, through a reused, longer buffer
                System.arraycopy(keys[i], 0, buffer, 0, keys[i].length);
                s.put(buffer, keys[i].length, value(i));
            }
            assertEquals(List.of(0L, 1L, 2L, 3L, 4L), scan(s, null, null));
            assertEquals(List.of(1L, 2L), scan(s, keys[1], keys[3]), "[from, to)");
            assertEquals(List.of(3L, 4L), scan(s, keys[3], null));
            assertEquals(List.of(0L, 1L, 2L), scan(s, null, keys[3]));

            byte[] got = new byte[KvKeys.VALUE];
            assertEquals(KvKeys.VALUE, s.get(keys[2], keys[2].length, got));
            assertArrayEquals(value(2), got);
            byte[] longer = {0x7f, 0x01, 0x00};
            assertEquals(-1, s.get(longer, 2 + 1, got), "a longer key is another key");
            assertEquals(KvKeys.VALUE, s.get(longer, 2, got), "the key is the first keyLength bytes");

            s.put(keys[2], keys[2].length, value(42));
            s.get(keys[2], keys[2].length, got);
            assertArrayEquals(value(42), got, "a put replaces");

            s.delete(keys[3], keys[3].length);
            assertEquals(-1, s.get(keys[3], keys[3].length, got));
            assertEquals(List.of(0L, 1L, 42L, 4L), scan(s, null, null));
        }
    }

    @Test
    void theWorkloadRunsAndChecksOnTheCeiling(@TempDir Path dir) {
        KvBench bench = new KvBench(dir, List.of(KvTarget.FERRITE, KvTarget.MEMORY), 3_000, List.of(1, 2),
                16L << 20, 0, 0, KvBench.Plan.BASIC);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(KvBench.PHASES.size() * 2 * 2, results.size());
        assertTrue(results.stream().filter(r -> r.target().equals("memory")).allMatch(r -> r.n() == 3_000 && r.rate() > 0),
                results.toString());
        assertEquals(MemoryKv.DESCRIPTION, bench.setups().get(KvTarget.MEMORY));
    }
}
