package dev.ferrite.btree.internal;

import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Comparing and printing tree contents in tests. */
final class Contents {
    private Contents() {
    }

    static TreeMap<byte[], byte[]> empty() {
        return new TreeMap<>(Keys::compare);
    }

    static void assertEqual(TreeMap<byte[], byte[]> expected, TreeMap<byte[], byte[]> actual, String where) {
        for (Map.Entry<byte[], byte[]> e : expected.entrySet()) {
            byte[] v = actual.get(e.getKey());
            assertTrue(v != null, () -> where + ": key " + hex(e.getKey()) + " is missing");
            assertArrayEquals(e.getValue(), v, () -> where + ": key " + hex(e.getKey()) + " has another value");
        }
        for (byte[] k : actual.keySet()) {
            assertTrue(expected.containsKey(k), () -> where + ": key " + hex(k) + " should not be there");
        }
    }

    /** Random bytes, {@code min} to {@code max - 1} of them. */
    static byte[] random(Random rnd, int min, int max) {
        byte[] b = new byte[min + rnd.nextInt(max - min)];
        rnd.nextBytes(b);
        return b;
    }

    /** 64-bit FNV-1a. */
    static long hash(byte[] b) {
        long h = 0xCBF2_9CE4_8422_2325L;
        for (byte x : b) {
            h = (h ^ (x & 0xFF)) * 0x100_0000_01B3L;
        }
        return h;
    }

    /** A key in hex, its middle elided if it is long. */
    static String hex(byte[] k) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < k.length; i++) {
            if (i == 1 && k.length > 24) {
                sb.append("..");
                i = k.length - 6;
            }
            sb.append(String.format("%02x", k[i]));
        }
        return sb.toString();
    }
}
