package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

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

    /** The session a batch phase writes through: the store's batch session, else its plain one, as the bench picks. */
    static KvStore.Session batching(KvStore store) {
        KvStore.Session batch = store.batchSession();
        return batch != null ? batch : store.session();
    }

    /** Puts each of {@code keys} (indexes) with a value whose word is {@code base} plus the index. */
    static void putAll(KvStore.Session s, long base, long... keys) {
        byte[] key = new byte[KvKeys.KEY_MAX];
        byte[] value = new byte[KvKeys.VALUE];
        for (long i : keys) {
            KvKeys.value(base + i, value);
            s.put(key, KvKeys.key(i, key), value);
        }
    }

    /** The words of keys {@code 0..count-1}'s values, -1 for an absent key. */
    static long[] words(KvStore store, int count) {
        byte[] key = new byte[KvKeys.KEY_MAX];
        byte[] value = new byte[KvKeys.VALUE];
        long[] words = new long[count];
        try (KvStore.Session s = store.session()) {
            for (int i = 0; i < count; i++) {
                words[i] = s.get(key, KvKeys.key(i, key), value) < 0 ? -1 : KvKeys.word(value);
            }
        }
        return words;
    }

    /**
     * Two batches on two threads over keys {0..4, 9} and {9..5, 0}, each taking its keys in an order that
     * crosses the other's: the second asks for key 0, which the first holds where a store locks keys as they
     * are written, then the first asks for key 9, which the second holds (a deadlock for such a store, which
     * its batch session must survive). Both batches commit, and the two keys they share end with one batch's
     * values, as if one batch had run after the other. Keys {@code 0..9} start loaded with their index as
     * the word; the first batch's words are 100 + the index, the second's 200 + the index.
     */
    static void crossBatches(KvStore store) throws InterruptedException {
        try (KvStore.Session s = store.session()) {
            for (long i = 0; i < 10; i++) {
                putAll(s, 0, i);
                s.commit();
            }
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread second;
        try (KvStore.Session first = batching(store)) {
            putAll(first, 100, 0, 1, 2, 3, 4);
            second = Thread.ofPlatform().name("second-batch").start(() -> {
                try (KvStore.Session s = batching(store)) {
                    putAll(s, 200, 9, 8, 7, 6, 5, 0);
                    s.commit();
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            // until the second batch waits (for key 0, or for the store's one writer) or is done; a store
            // that waits outside Java (LMDB's writer mutex) looks running: then a second at most
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            while (second.isAlive() && System.nanoTime() < deadline
                    && (second.getState() == Thread.State.RUNNABLE || second.getState() == Thread.State.NEW)) {
                Thread.sleep(1);
            }
            putAll(first, 100, 9);
            first.commit();
        }
        second.join(TimeUnit.SECONDS.toMillis(30));
        assertFalse(second.isAlive(), "the second batch is stuck");
        if (failure.get() != null) {
            throw new AssertionError("the second batch failed", failure.get());
        }
        long[] words = words(store, 10);
        String all = Arrays.toString(words);
        for (int i = 1; i <= 4; i++) {
            assertEquals(100 + i, words[i], all);
        }
        for (int i = 5; i <= 8; i++) {
            assertEquals(200 + i, words[i], all);
        }
        assertEquals(words[0] / 100, words[9] / 100, "keys 0 and 9 from one batch: " + all);
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
