package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.List;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TreeCheckTest {
    /** A problem names the block it was found in, so a volume check can report it by block. */
    @Test
    void aBrokenLeafLinkIsReportedAgainstTheLeaf() {
        try (MemoryDevice dev = MemoryDevice.create(4096, 4096);
             Store s = Store.format(dev, 256, 4L << 20)) {
            for (int i = 0; i < 400; i++) {
                s.tree.put(Keys.ofLong(i), new byte[100]);
            }
            List<Long> leaves = s.nodes().entrySet().stream().filter(e -> e.getValue() == 0).map(e -> e.getKey()).toList();
            assertTrue(leaves.size() >= 2, "leaves " + leaves);
            long leaf = leaves.get(0);
            MemorySegment n = s.tree.node(leaf).data();
            long right = BTreeNodeFormat.right(n);
            // the cached image only, not logged: the check reads the cache and the block is never written home
            BTreeNodeFormat.setRight(n, right + 1);
            try {
                TreeCheck c = s.tree.check();
                assertFalse(c.ok());
                assertEquals(List.of(new TreeCheck.Problem(leaf, "leaf: right link " + (right + 1) + ", expected " + right)),
                        c.problems(), c.toString());
                assertTrue(c.toString().contains("\n  block " + leaf + ": leaf: right link"), c.toString());
            } finally {
                BTreeNodeFormat.setRight(n, right);
            }
            assertTrue(s.tree.check().ok());
        }
    }
}
