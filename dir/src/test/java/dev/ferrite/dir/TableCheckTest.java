package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The volume check over tables: it counts the tables it walked, and a damaged table tree is reported naming
 * the table; the dump of the tables says which one cannot be read.
 */
class TableCheckTest {
    private static final int KEYS = 2000; // enough for a tree of two levels

    /** A catalog entry naming an inode that is no table (a checksum-valid but wrong field) is refused, naming it. */
    @Test
    void aCatalogEntryNamingAFileIsCorruptionNotATable() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            v.tables().create("t").close();
            long file = v.namespace().create("/f", 0644, true);
            Inode catalog = v.inodeCache().acquire(v.tables().catalogInode());
            try (Txn txn = Txn.begin(v.cache(),
                    8 + v.namespace().dirs.dirItems(catalog))) {
                catalog.lock();
                try {
                    v.namespace().dirs.replaceEntry(txn, catalog, EntryKey.of("t".getBytes(StandardCharsets.UTF_8)),
                            file, InodeFormat.S_IFTABLE);
                    txn.commit();
                } finally {
                    catalog.unlock();
                }
            } finally {
                v.inodeCache().release(catalog);
            }
            CorruptionException e = assertThrows(CorruptionException.class, () -> v.tables().open("t"));
            assertTrue(e.getMessage().contains("names inode " + file) && e.getMessage().contains("not a table"), e.getMessage());
            assertEquals(1, v.namespace().list("/").size(), "the file is untouched");
        }
    }

    @Test
    void aSoundVolumeCountsItsTables() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            assertEquals(0, v.namespace().check().tables(), "a volume without a catalog");
            fill(v, "users", 10);
            fill(v, "orders", KEYS);
            v.tables().create("empty").close();
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), report.toString());
            assertEquals(3, report.tables(), report.toString());
            assertTrue(report.toString().contains("3 tables"), report.toString());
        }
    }

    @Test
    void aLeafWithABadChecksumIsABTreeProblemNamingTheTable() {
        damagedNode(false);
    }

    @Test
    void aRootWithABadChecksumIsABTreeProblemNamingTheTable() {
        damagedNode(true);
    }

    /** Flips a byte of the root or of a leaf of table "orders" on the device image; the check names the table and block. */
    private static void damagedNode(boolean root) {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Arena arena = Arena.ofConfined()) {
            long ino, block;
            try (Volume v = Volume.open(dev, OPTIONS)) {
                fill(v, "users", 10);
                fill(v, "orders", KEYS);
                try (Table t = v.tables().open("orders")) {
                    ino = t.stats().ino();
                    BTree tree = t.tree();
                    assertEquals(2, tree.height(), "the test needs a root above leaves");
                    List<Long> blocks = new ArrayList<>();
                    TreeWalk.blocks(tree, blocks::add); // header, root, then the leaves
                    block = root ? blocks.get(1) : blocks.get(blocks.size() - 1);
                }
            }
            MemorySegment b = arena.allocate(dev.blockSize(), dev.blockSize());
            dev.read(block, b);
            b.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 200, (byte) (b.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 200) ^ 0x40));
            dev.write(block, b);
            assertTrue(!BlockHeaderFormat.checksumValid(b));
            try (Volume v = Volume.open(dev, OPTIONS)) {
                CheckReport report = v.namespace().check();
                assertTrue(report.problems().stream().anyMatch(p -> p.kind() == CheckProblem.Kind.BTREE
                        && p.path().equals(Optional.of("tables:orders")) && p.inode().orElse(-1) == ino
                        && p.block().orElse(-1) == block), report.toString());
                assertEquals(2, report.tables(), report.toString());
                String dump = VolumeDump.tables(v);
                assertTrue(dump.contains("  users: inode ") && dump.contains(root
                        ? "  orders: inode " + ino + ", cannot be read: " : "  orders: inode " + ino + ", height 2"), dump);
                assertTrue(root || dump.contains(" blocks, extent values not counted ("), dump);
            }
        }
    }

    private static void fill(Volume v, String name, int keys) {
        try (Table t = v.tables().create(name); WriteTransaction tx = v.begin(Durability.NONE)) {
            for (int i = 0; i < keys; i++) {
                tx.put(t, ("key-" + i).getBytes(StandardCharsets.UTF_8), ("value of key " + i).getBytes(StandardCharsets.UTF_8));
            }
            tx.commit();
        }
    }
}
