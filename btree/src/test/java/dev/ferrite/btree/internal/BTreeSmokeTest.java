package dev.ferrite.btree.internal;

import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BTreeSmokeTest {
    @Test
    void insertGetDeleteScan() {
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096)) {
            TreeMap<byte[], byte[]> model = new TreeMap<>(Keys::compare);
            Random rnd = new Random(1);
            try (Store s = Store.format(dev, 2048, 8L << 20)) {
                for (int i = 0; i < 20000; i++) {
                    byte[] k = new byte[4 + rnd.nextInt(30)];
                    rnd.nextBytes(k);
                    byte[] v = new byte[rnd.nextInt(64)];
                    rnd.nextBytes(v);
                    s.tree.put(k, v);
                    model.put(k, v);
                }
                TreeCheck c = s.tree.check();
                assertTrue(c.ok(), c.toString());
                assertEquals(model.size(), c.keys());
                for (var e : model.entrySet()) {
                    assertArrayEquals(e.getValue(), s.tree.get(e.getKey()));
                }
                Cursor cur = s.tree.cursor(null, false);
                var it = model.entrySet().iterator();
                while (cur.next()) {
                    var e = it.next();
                    assertArrayEquals(e.getKey(), cur.key());
                }
                assertTrue(!it.hasNext());
                int n = 0;
                for (var it2 = model.keySet().iterator(); it2.hasNext(); ) {
                    byte[] k = it2.next();
                    if (n++ % 3 != 0) {
                        assertTrue(s.tree.delete(k) >= 0);
                        it2.remove();
                    }
                }
                c = s.tree.check();
                assertTrue(c.ok(), c.toString());
                assertEquals(model.size(), c.keys());
                System.out.println(c + " " + s.cache.stats() + " " + s.journal.stats());
            }
            try (Store s = Store.open(dev, 2048, 8L << 20)) {
                TreeCheck c = s.tree.check();
                assertTrue(c.ok(), c.toString());
                for (var e : model.entrySet()) {
                    assertArrayEquals(e.getValue(), s.tree.get(e.getKey()));
                }
                assertNull(s.tree.get(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
                // read back from disk, interior nodes and the header still outrank leaves in the clock
                s.nodes().forEach((block, level) -> assertEquals(level > 0 ? BTree.INTERIOR_PRIORITY : 1,
                        s.cache.lookup(block).priority, "block " + block + " at level " + level));
                assertEquals(BTree.INTERIOR_PRIORITY, s.tree.header().priority);
            }
        }
    }
}
