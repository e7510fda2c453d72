package dev.ferrite.dir;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A free list's reserve counts only entries that are not busy, and it answers from its bound on busy
 * entries without asking about each: the bound must cover every freed node put on the list.
 */
class FreeListTest {
    @Test
    void freedNodesOnTheListDoNotCountTowardsItsReserveUntilCheckpointed() {
        VolumeOptions one = VolumeFixtures.OPTIONS.withAgCount(1);
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096)) {
            Volume.format(dev, one);
            try (Volume v = Volume.open(dev, one)) {
                AllocationGroup ag = v.group(0);
                FreeList list = ag.agil;
                int freed = 8;
                long first = VolumeAllocations.allocBlocks(v, 0, freed); // blocks of nobody's, to play freed tree nodes
                try (Txn txn = Txn.begin(v.cache(), 1 + freed)) {
                    assertTrue(txn.lock(ag.agi));
                    int before = list.count();
                    assertTrue(list.holds(before), "nothing on the list is busy yet");
                    for (int i = 0; i < freed; i++) {
                        Buffer node = v.cache().create(txn, first + i, 0x45444F4E, 0);
                        v.cache().free(txn, node, 0x584F4E58);
                        list.free(txn, first + i);
                    }
                    assertEquals(before + freed, list.count());
                    assertTrue(list.holds(before), "the entries that were there still count");
                    assertFalse(list.holds(before + 1), "a freed node does not, before its free is checkpointed");
                    txn.commit();
                }
                v.cache().journal().forceAll();
                v.quiesce(); // the frees are in the AIL: no longer busy
                try (Txn txn = Txn.begin(v.cache(), 1)) {
                    assertTrue(txn.lock(ag.agi));
                    assertTrue(list.holds(list.count()), "every entry counts once the frees are checkpointed");
                }
            }
        }
    }
}
