package dev.ferrite.fuse;

import java.nio.ByteBuffer;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.NamespaceException;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.fuse.NodeTable.Node;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The node table on a volume, without FUSE: one node per inode, lookup counts, opens, detaching before a last unlink. */
class NodeTableTest {
    private MemoryDevice device;
    private Volume volume;
    private Namespace ns;
    private NodeTable nodes;
    private Handle root;

    @BeforeEach
    void open() {
        device = MemoryDevice.create(16_384, 4096);
        Volume.format(device, VolumeOptions.defaults());
        volume = Volume.open(device, VolumeOptions.defaults());
        ns = volume.namespace();
        nodes = new NodeTable(ns.openRoot());
        root = nodes.get(NodeTable.ROOT);
    }

    @AfterEach
    void close() {
        nodes.removeAll().forEach(Handle::close);
        volume.close();
        device.close();
    }

    private Node file(String name, int bytes) {
        Handle h = ns.create(root, name, 0644, true);
        ns.write(h, 0, ByteBuffer.wrap(new byte[bytes]));
        ns.fsync(h);
        return nodes.lookup(h);
    }

    @Test
    void oneNodePerInodeUntilItsLookupsAreForgotten() {
        Node n = file("f", 10);
        ns.link(n.handle(), root, "g");
        assertSame(n, nodes.lookup(ns.open(root, "g")));
        assertSame(n, nodes.lookupKnown(n.ino));
        assertEquals(2, nodes.size());
        nodes.forget(n.id, 2);
        assertSame(n.handle(), nodes.get(n.id));
        nodes.forget(n.id, 1);
        assertEquals(1, nodes.size());
        assertEquals(116, assertThrows(NamespaceException.class, () -> nodes.get(n.id)).errno()); // ESTALE
        assertNull(nodes.lookupKnown(n.ino));
    }

    @Test
    void anIdleNodeIsDetachedSoThatItsLastUnlinkFreesTheInode() {
        Node n = file("f", 1 << 20);
        nodes.open(n.id);
        assertNull(nodes.detachIfIdle(n.ino), "open");
        nodes.released(n.id);
        long free = volume.statfs().freeBlocks();
        assertSame(n, nodes.detachIfIdle(n.ino));
        assertEquals(Errno.ENOENT, assertThrows(NamespaceException.class, () -> nodes.get(n.id)).errno());
        ns.unlink(root, "f");
        assertTrue(volume.statfs().freeBlocks() >= free + 256, () -> "free " + volume.statfs().freeBlocks() + ", before " + free);
        assertEquals(2, nodes.size(), "the kernel's node stays until its FORGET");
        nodes.forget(n.id, 1);
        assertEquals(1, nodes.size());
    }

    @Test
    void aDetachedNodeWhoseUnlinkFailedIsReattached() {
        Node n = file("f", 10);
        assertSame(n, nodes.detachIfIdle(n.ino));
        nodes.reattach(n, ns.open(root, "f"));
        assertSame(n, nodes.lookupKnown(n.ino));
        assertEquals(n.ino, nodes.get(n.id).ino());
    }
}
