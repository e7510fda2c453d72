package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import dev.ferrite.btree.internal.Txn;

import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A transaction whose tree reserve needs a refill while every group's free space is busy (freed by
 * commits not yet durable, which the group's own checkpoint holds): the refill cannot wait inside the
 * journal group, so the commit undoes what it did, lets the log make the frees durable and applies again.
 */
@ExtendWith(TestSeed.class)
class TableBusySpaceTest {
    private static final long SEED = TestSeed.get(29);

    @Test
    void aRefillThatFindsOnlyBusySpaceInsideItsGroupIsRetriedAfterIt() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table b = v.tables().create("b")) {
            Table none = a.withDurability(Durability.NONE);
            int values = 0;
            byte[] medium = new byte[16 << 10];
            try {
                for (; ; values++) { // the volume full of 16 KiB extent values
                    rnd.nextBytes(medium);
                    none.put(b("m" + values), medium);
                    if (TableExtentTest.spare(v) < 64) {
                        values++;
                        break;
                    }
                }
            } catch (NoSpaceException full) {
                // full before the spare ran low
            }
            List<Long> held = new ArrayList<>();
            try {
                for (;;) {
                    held.add(VolumeAllocations.allocBlocks(v, 0, 1)); // and whatever is left
                }
            } catch (NoSpaceException full) {
                // nothing but the blocks held back for the free lists
            }
            v.sync();
            for (int i = 0; i < values; i++) {
                none.delete(b("m" + i)); // free, but busy: nothing made these deletes durable
            }
            takeAllButBusy(v, held); // what the deletes' tree changes gave back unbusy (free lists' spills)
            byte[][] vals = new byte[300][];
            try (WriteTransaction tx = v.begin(Durability.NONE)) {
                for (int i = 0; i < vals.length; i++) {
                    vals[i] = new byte[1000];
                    rnd.nextBytes(vals[i]);
                    tx.put(b, b(String.format("k%04d", i)), vals[i]);
                }
                tx.commit(); // splits past the reserve: refills from busy space only, inside the group
            }
            for (int i = 0; i < vals.length; i++) {
                assertArrayEquals(vals[i], b.get(b(String.format("k%04d", i))), "key " + i + " (seed " + SEED + ")");
            }
            assertEquals(0, a.count(), "the deletes stay");
            for (long block : held) {
                VolumeAllocations.freeBlocks(v, block, 1);
            }
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), report.toString());
        }
    }

    /** Takes every free block that is not busy, a block at a time, without waiting for busy ones (which would force the log). */
    private static void takeAllButBusy(Volume v, List<Long> held) {
        for (int g = 0; g < v.geometry().agCount(); g++) {
            AllocationGroup ag = v.group(g);
            for (;;) {
                try (Txn txn = Txn.begin(v.cache(), ag.blockItems())) {
                    if (ag.allocBlocks(txn, 1) != AllocOutcome.DONE) {
                        break;
                    }
                    held.add(ag.allocatedBlock(txn));
                    txn.commit();
                }
            }
        }
    }
}
