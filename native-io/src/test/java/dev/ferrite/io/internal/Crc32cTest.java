package dev.ferrite.io.internal;


import dev.ferrite.io.InvalidArgumentException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Random;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@ExtendWith(TestSeed.class)
class Crc32cTest {
    private static MemorySegment bytes(byte[] b) {
        return MemorySegment.ofArray(b);
    }

    private static MemorySegment filled(int length, int value) {
        byte[] b = new byte[length];
        java.util.Arrays.fill(b, (byte) value);
        return bytes(b);
    }

    /** Bit-at-a-time CRC32C (reflected polynomial 0x82F63B78): slow, but independent of the JDK's. */
    private static int reference(byte[] data, int from, int to) {
        int crc = ~0;
        for (int i = from; i < to; i++) {
            crc ^= data[i] & 0xFF;
            for (int k = 0; k < 8; k++) {
                crc = (crc >>> 1) ^ (0x82F63B78 & -(crc & 1));
            }
        }
        return ~crc;
    }

    @Test
    void checkValue() {
        assertEquals(0xE3069283, Crc32c.compute(bytes("123456789".getBytes(StandardCharsets.US_ASCII))));
        assertEquals(0xE3069283, Crc32c.compute("123456789".getBytes(StandardCharsets.US_ASCII)), "the array form");
        assertEquals(0, Crc32c.compute(new byte[0]));
    }

    @Test
    void iscsiTestVectorsOfRfc3720() {
        byte[] ascending = new byte[32];
        byte[] descending = new byte[32];
        for (int i = 0; i < 32; i++) {
            ascending[i] = (byte) i;
            descending[i] = (byte) (31 - i);
        }
        byte[] scsiRead = HexFormat.of().parseHex(
                "01c00000000000000000000000000000" + "14000000000004000000001400000018" + "28000000000000000200000000000000");
        assertEquals(0x8A9136AA, Crc32c.compute(filled(32, 0x00)));
        assertEquals(0x62A8AB43, Crc32c.compute(filled(32, 0xFF)));
        assertEquals(0x46DD794E, Crc32c.compute(bytes(ascending)));
        assertEquals(0x113FDB5C, Crc32c.compute(bytes(descending)));
        assertEquals(0xD9963A56, Crc32c.compute(bytes(scsiRead)));
    }

    @Test
    void emptyInputIsZero() {
        assertEquals(0, Crc32c.compute(bytes(new byte[0])));
    }

    @Test
    void nativeSegmentsSlicesAndOffsetsAgreeWithTheReference() {
        Random random = TestSeed.random(1);
        byte[] data = new byte[70_000];
        random.nextBytes(data);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment off = arena.allocate(data.length, 4096);
            MemorySegment.copy(bytes(data), 0, off, 0, data.length);
            assertEquals(reference(data, 0, data.length), Crc32c.compute(off));
            for (int i = 0; i < 200; i++) {
                int from = random.nextInt(data.length);
                int len = random.nextInt(Math.min(5000, data.length - from) + 1);
                int expected = reference(data, from, from + len);
                assertEquals(expected, Crc32c.compute(off, from, len), "native at " + from + "+" + len);
                assertEquals(expected, Crc32c.compute(off.asSlice(from, len)), "native slice at " + from + "+" + len);
                assertEquals(expected, Crc32c.compute(bytes(data), from, len), "heap at " + from + "+" + len);
            }
        }
    }

    @Test
    void everyBitMatters() {
        byte[] data = "ferrite block header".getBytes(StandardCharsets.US_ASCII);
        int base = Crc32c.compute(bytes(data));
        for (int bit = 0; bit < data.length * 8; bit++) {
            data[bit / 8] ^= (byte) (1 << (bit % 8));
            assertNotEquals(base, Crc32c.compute(bytes(data)), "flipping bit " + bit);
            data[bit / 8] ^= (byte) (1 << (bit % 8));
        }
    }

    @Test
    void computeSkippingEqualsComputeOfACopyWithTheFieldZeroed() {
        Random random = TestSeed.random(2);
        byte[] block = new byte[4096];
        random.nextBytes(block);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = arena.allocate(block.length, 4096);
            MemorySegment.copy(bytes(block), 0, seg, 0, block.length);
            for (long field : new long[] {0, 1, 28, 2049, 4092}) {
                byte[] zeroed = block.clone();
                java.util.Arrays.fill(zeroed, (int) field, (int) field + Crc32c.SIZE, (byte) 0);
                int expected = reference(zeroed, 0, zeroed.length);
                assertEquals(expected, Crc32c.computeSkipping(seg, field), "field at " + field);
                assertEquals(expected, Crc32c.computeSkipping(bytes(block), field), "heap, field at " + field);
            }
        }
    }

    @Test
    void stampedChecksumVerifiesAndCatchesCorruption() {
        byte[] block = new byte[512];
        new Random(3).nextBytes(block);
        MemorySegment seg = bytes(block);
        long field = 16;
        seg.set(JAVA_INT_UNALIGNED, field, Crc32c.computeSkipping(seg, field));
        assertEquals(seg.get(JAVA_INT_UNALIGNED, field), Crc32c.computeSkipping(seg, field),
                "the stored checksum must not count toward itself");
        seg.set(JAVA_BYTE, 300, (byte) (seg.get(JAVA_BYTE, 300) ^ 0x40));
        assertNotEquals(seg.get(JAVA_INT_UNALIGNED, field), Crc32c.computeSkipping(seg, field));
    }

    @Test
    void inPlaceStampAndVerifyAgreeWithComputeSkipping() {
        Random random = TestSeed.random(4);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = arena.allocate(4096, 4096);
            for (long field : new long[] {0, 1, 28, 2049, 4092}) {
                byte[] block = new byte[4096];
                random.nextBytes(block);
                MemorySegment.copy(bytes(block), 0, seg, 0, block.length);
                int expected = Crc32c.computeSkipping(seg, field);
                assertEquals(expected, Crc32c.stampInPlace(seg, field), "field at " + field);
                assertEquals(expected, seg.get(OnDisk.U32, field),
                        "stored little-endian at " + field);
                for (int i = 0; i < block.length; i++) {
                    if (i < field || i >= field + Crc32c.SIZE) {
                        assertEquals(block[i], seg.get(JAVA_BYTE, i), "byte " + i + " outside the field is untouched");
                    }
                }
                MemorySegment stamped = arena.allocate(4096).copyFrom(seg);
                assertTrue(Crc32c.verifyInPlace(seg, field), "field at " + field);
                assertEquals(-1, seg.mismatch(stamped), "verification leaves the block as it found it");
                seg.set(JAVA_BYTE, (field + 100) % 4096, (byte) ~seg.get(JAVA_BYTE, (field + 100) % 4096));
                assertFalse(Crc32c.verifyInPlace(seg, field), "a flipped byte at " + ((field + 100) % 4096));
                assertEquals(expected, seg.get(OnDisk.U32, field),
                        "a failed verification restores the field too");
            }
        }
    }

    @Test
    void inPlaceFormsRejectAFieldOutsideTheSegment() {
        MemorySegment seg = bytes(new byte[64]);
        for (long bad : new long[] {-1, 61, Long.MAX_VALUE}) {
            var e = assertThrows(InvalidArgumentException.class, () -> Crc32c.stampInPlace(seg, bad));
            assertTrue(e.getMessage().contains("checksum field at " + bad + " lies outside a 64-byte segment"), e.getMessage());
            assertThrows(InvalidArgumentException.class, () -> Crc32c.verifyInPlace(seg, bad));
        }
        assertEquals(-1, seg.mismatch(bytes(new byte[64])), "a rejected call writes nothing");
    }

    @Test
    void checksumFieldOutsideTheSegmentIsRejected() {
        MemorySegment seg = bytes(new byte[64]);
        for (long bad : new long[] {-1, 61, 64, Long.MAX_VALUE, Long.MIN_VALUE}) {
            var e = assertThrows(InvalidArgumentException.class, () -> Crc32c.computeSkipping(seg, bad));
            assertTrue(e.getMessage().contains("checksum field at " + bad + " lies outside a 64-byte segment"), e.getMessage());
        }
        assertThrows(InvalidArgumentException.class, () -> Crc32c.computeSkipping(bytes(new byte[3]), 0));
        assertEquals(Crc32c.compute(bytes(new byte[4])), Crc32c.computeSkipping(bytes(new byte[] {1, 2, 3, 4}), 0));
    }

    @Test
    void combiningTheChecksumsOfTwoPartsGivesTheChecksumOfBoth() {
        Random random = TestSeed.random(5);
        for (int round = 0; round < 200; round++) {
            byte[] data = new byte[random.nextInt(20_000)];
            random.nextBytes(data);
            int cut = random.nextInt(data.length + 1);
            int whole = reference(data, 0, data.length);
            int combined = Crc32c.combine(reference(data, 0, cut), reference(data, cut, data.length),
                    Crc32c.shiftOperator(data.length - cut));
            assertEquals(whole, combined, data.length + " bytes cut at " + cut);
        }
        assertEquals(0xE3069283, Crc32c.combine(Crc32c.compute("1234".getBytes(StandardCharsets.US_ASCII)),
                Crc32c.compute("56789".getBytes(StandardCharsets.US_ASCII)), Crc32c.shiftOperator(5)));
        int a = Crc32c.compute("123456789".getBytes(StandardCharsets.US_ASCII));
        assertEquals(a, Crc32c.combine(a, 0, Crc32c.shiftOperator(0)), "an empty second part");
        assertThrows(InvalidArgumentException.class, () -> Crc32c.shiftOperator(-1));
    }

    /**
     * The thread's buffer views are reused only for the same memory: segments at one address but of
     * other sizes, memory rewritten, another arena's segment (maybe at a freed one's address), and
     * several threads at once all get the reference checksum.
     */
    @Test
    void reusedViewsAnswerForTheSegmentAskedAbout() throws Exception {
        Random random = TestSeed.random(6);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment block = arena.allocate(4096, 4096);
            for (int round = 0; round < 50; round++) {
                byte[] data = new byte[4096];
                random.nextBytes(data);
                MemorySegment.copy(data, 0, block, JAVA_BYTE, 0, data.length);
                int size = 16 + random.nextInt(4080);
                assertEquals(reference(data, 0, size), Crc32c.compute(block.asSlice(0, size)), "size " + size + " at the block's address");
                assertEquals(reference(data, 0, 4096), Crc32c.compute(block), "the whole block after a slice");
                int from = random.nextInt(4000);
                assertEquals(reference(data, from, 4096), Crc32c.compute(block, from, 4096 - from));
                byte[] zeroed = data.clone();
                java.util.Arrays.fill(zeroed, 8, 12, (byte) 0);
                assertEquals(reference(zeroed, 0, 4096), Crc32c.computeSkipping(block, 8));
            }
        }
        for (int i = 0; i < 20; i++) { // arenas freed and made again: a new one may reuse an old address
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment seg = arena.allocate(4096, 4096);
                seg.fill((byte) i);
                byte[] data = new byte[4096];
                java.util.Arrays.fill(data, (byte) i);
                assertEquals(reference(data, 0, 4096), Crc32c.compute(seg));
            }
        }
        try (Arena arena = Arena.ofShared()) {
            MemorySegment shared = arena.allocate(8192, 4096);
            byte[] data = new byte[8192];
            random.nextBytes(data);
            MemorySegment.copy(data, 0, shared, JAVA_BYTE, 0, data.length);
            int expected = reference(data, 0, 4096), skipped = Crc32c.computeSkipping(shared.asSlice(4096), 0);
            Thread[] threads = new Thread[4];
            boolean[] wrong = new boolean[threads.length];
            for (int t = 0; t < threads.length; t++) {
                int me = t;
                threads[t] = new Thread(() -> {
                    for (int k = 0; k < 20_000; k++) {
                        wrong[me] |= Crc32c.compute(shared.asSlice(0, 4096)) != expected
                                || Crc32c.computeSkipping(shared.asSlice(4096), 0) != skipped;
                    }
                });
                threads[t].start();
            }
            for (int t = 0; t < threads.length; t++) {
                threads[t].join();
                assertFalse(wrong[t], "thread " + t + " got another checksum");
            }
        }
    }
}
