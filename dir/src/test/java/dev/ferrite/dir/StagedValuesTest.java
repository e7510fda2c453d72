package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.internal.BufferPool;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A write transaction's values are copied off the heap into buffers of the process's staging pool, packed,
 * onto the heap when the pool has none free or a value is longer than a buffer, and the buffers go back
 * however the transaction ends: committed, rolled back, closed, or failed.
 */
class StagedValuesTest {
    private static byte[] value(int length, int seed) {
        byte[] v = new byte[length];
        for (int i = 0; i < length; i++) {
            v[i] = (byte) (seed * 31 + i);
        }
        return v;
    }

    @Test
    void copiesArePackedIntoLentBuffersThenOnTheHeapOnceThePoolIsDry() {
        try (BufferPool pool = new BufferPool(4096, 2)) {
            StagedValues staged = new StagedValues(pool);
            MemorySegment[] copies = new MemorySegment[9];
            byte[][] values = new byte[9][];
            for (int i = 0; i < copies.length; i++) {
                values[i] = value(1000, i);
                copies[i] = staged.copy(values[i]);
                values[i][0]++; // the caller's array changes after the put: the copy does not
            }
            for (int i = 0; i < copies.length; i++) {
                values[i][0]--;
                assertArrayEquals(values[i], copies[i].toArray(ValueLayout.JAVA_BYTE), "copy " + i);
                assertEquals(i < 8, copies[i].isNative(), "copy " + i + " off the heap"); // four to a buffer, two buffers
            }
            assertEquals(copies[0].address() + 1000, copies[1].address(), "packed one after another, 8-byte aligned");
            assertEquals(0, pool.available());
            MemorySegment longer = staged.copy(value(4097, 9));
            assertFalse(longer.isNative(), "a value longer than a buffer goes on the heap");
            staged.release();
            assertEquals(2, pool.available(), "every buffer back");
            assertTrue(staged.copy(value(10, 1)).isNative(), "the store is used again after its release");
            staged.release();
            assertEquals(2, pool.available());
        }
    }

    @Test
    void aTransactionGivesItsBuffersBackHoweverItEnds() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            byte[] big = value(16384, 3);
            int idle = Tables.stagingAvailable(); // the process's pool: other tests' transactions ended
            for (int round = 0; round < 200; round++) { // each takes two buffers: a leak runs the pool dry within 64
                WriteTransaction tx = v.begin(Durability.NONE);
                for (int i = 0; i < 20; i++) {
                    tx.put(t, b("k" + (round % 3) + "-" + i), big);
                }
                switch (round % 3) {
                    case 0 -> tx.commit();
                    case 1 -> tx.rollback();
                    default -> tx.close();
                }
                assertEquals(idle, Tables.stagingAvailable(), "round " + round);
            }
            WriteTransaction tx = v.begin(Durability.NONE);
            tx.put(t, b("k3"), big);
            tx.put(t, b("k4"), big);
            t.close();
            assertThrows(TableException.class, tx::commit);
            assertEquals(idle, Tables.stagingAvailable(), "after a failed commit");
            assertArrayEquals(big, v.tables().open("t").get(b("k0-19")));
        }
    }
}
