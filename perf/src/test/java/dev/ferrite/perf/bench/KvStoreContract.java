package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** What the kv workload relies on of every {@link KvStore}: a test class per store extends this. */
abstract class KvStoreContract {
    /** A fresh store in {@code dir} (an empty directory), small enough for a test. */
    abstract KvStore open(Path dir);

    /** Values whose first word names them, as the workload's do. */
    static byte[] value(long word) {
        byte[] v = new byte[KvKeys.VALUE];
        KvKeys.value(word, v);
        return v;
    }

    /** The words of the values a scan of {@code [from, to)} returns, in its order. */
    static List<Long> scan(KvStore.Session s, byte[] from, byte[] to) {
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
    void putGetScanInUnsignedOrderAndDelete(@TempDir Path dir) {
        // 0x7f sorts before 0x80 unsigned (after it signed); a prefix before its extensions
        byte[][] keys = {{0x10}, {0x10, 0x00}, {0x7f, 0x01}, {(byte) 0x80}, {(byte) 0xff, 0x00}};
        try (KvStore store = open(dir); KvStore.Session s = store.session()) {
            byte[] buffer = new byte[KvKeys.KEY_MAX];
            byte[] v = new byte[KvKeys.VALUE];
            for (int i = keys.length - 1; i >= 0; i--) { // out of order, through reused, longer buffers
                System.arraycopy(keys[i], 0, buffer, 0, keys[i].length);
                KvKeys.value(i, v);
                s.put(buffer, keys[i].length, v);
            }
            s.commit();
            assertEquals(List.of(0L, 1L, 2L, 3L, 4L), scan(s, null, null));
            assertEquals(List.of(1L, 2L), scan(s, keys[1], keys[3]), "[from, to)");
            assertEquals(List.of(3L, 4L), scan(s, keys[3], null));
            assertEquals(List.of(0L, 1L, 2L), scan(s, null, keys[3]));
            assertEquals(List.of(), scan(s, keys[3], keys[3]), "an empty range");

            byte[] got = new byte[KvKeys.VALUE];
            assertEquals(KvKeys.VALUE, s.get(keys[2], keys[2].length, got));
            assertArrayEquals(value(2), got);
            byte[] longer = {0x7f, 0x01, 0x00};
            assertEquals(-1, s.get(longer, 2 + 1, got), "a longer key is another key");
            assertEquals(KvKeys.VALUE, s.get(longer, 2, got), "the key is the first keyLength bytes");

            s.put(keys[2], keys[2].length, value(42));
            s.commit();
            s.get(keys[2], keys[2].length, got);
            assertArrayEquals(value(42), got, "a put replaces");

            s.delete(keys[3], keys[3].length);
            s.commit();
            assertEquals(-1, s.get(keys[3], keys[3].length, got));
            assertEquals(List.of(0L, 1L, 42L, 4L), scan(s, null, null));
        }
    }
}
