package dev.ferrite.fuse;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.NamespaceException;

/**
 * The inodes the kernel knows, by node id (the number the kernel sends with every request about an inode): a slot
 * of a {@link SlotTable} plus one, so that the root, added first, is 1 ({@code FUSE_ROOT_ID}). Each node holds a
 * {@link Handle} on its inode, so an inode the kernel still knows is never freed and its number never reused
 * under it, however many names it loses (an unlinked inode stays an orphan until the kernel forgets it), and its
 * lookup count: one per entry replied (lookup, create, mknod, mkdir, symlink, link, each readdirplus entry), down
 * by FORGET; at zero the node goes and its handle is closed. One node per inode, found by inode number at each
 * entry reply, so that all names of a hard link are one kernel inode. Finding a node by id takes no lock.
 */
final class NodeTable {
    static final long ROOT = 1;
    /** Linux's "stale file handle" (dev.ferrite.io.Errno has no name for it). */
    private static final int ESTALE = 116;

    /** An inode the kernel knows. */
    static final class Node {
        final long id;
        final Handle handle;
        /** Guarded by the table. */
        private long lookups;

        private Node(long id, Handle handle) {
            this.id = id;
            this.handle = handle;
        }
    }

    private final SlotTable<Node> slots = new SlotTable<>();
    /** Guarded by this. */
    private final Map<Long, Node> byIno = new HashMap<>();

    /** A table knowing the root, through {@code root}, for as long as the mount lives (the kernel never forgets it). */
    NodeTable(Handle root) {
        add(root);
    }

    /** The handle of node {@code id}: ESTALE if the kernel's node is one this table does not know. */
    Handle get(long id) {
        Node n = slots.get(id - 1);
        if (n == null) {
            throw new NamespaceException(ESTALE, "no node " + id);
        }
        return n.handle;
    }

    /** The node of inode {@code ino} with its lookup count up by one if the kernel knows it already, else null: then a lookup needs no handle of its own. */
    synchronized Node lookupKnown(long ino) {
        Node n = byIno.get(ino);
        if (n != null) {
            n.lookups++;
        }
        return n;
    }

    /**
     * The node of {@code h}'s inode with its lookup count up by one: a new node holding {@code h}, or the one the
     * kernel knows already, in which case {@code h} is closed (the node keeps its own handle).
     */
    Node lookup(Handle h) {
        Node n;
        synchronized (this) {
            n = byIno.get(h.ino());
            if (n == null) {
                n = add(h);
            }
            n.lookups++;
            if (n.handle == h) {
                return n;
            }
        }
        h.close();
        return n;
    }

    /** Node {@code id}, which the kernel knows, with its lookup count up by one (a link's new name for it). */
    synchronized Node lookupAgain(long id) {
        Node n = slots.get(id - 1);
        if (n == null) {
            throw new NamespaceException(ESTALE, "no node " + id);
        }
        n.lookups++;
        return n;
    }

    private Node add(Handle h) {
        Node n = new Node(slots.add(null) + 1, h);
        slots.set(n.id - 1, n);
        byIno.put(h.ino(), n);
        return n;
    }

    /** FORGET: node {@code id}'s lookup count down by {@code count}; at zero the node goes and its handle is closed. */
    void forget(long id, long count) {
        Node n;
        synchronized (this) {
            n = id > ROOT ? slots.get(id - 1) : null;
            if (n == null) {
                return; // the root, or a node this table does not know: nothing to let go
            }
            n.lookups -= count;
            if (n.lookups > 0) {
                return;
            }
            slots.remove(id - 1);
            byIno.remove(n.handle.ino());
        }
        n.handle.close();
    }

    /** How many nodes the kernel holds, the root included. */
    synchronized int size() {
        return byIno.size();
    }

    /** Forgets every node (the mount is gone: the kernel's lookup counts are implicitly zero) and returns their handles, for the caller to close. */
    synchronized List<Handle> removeAll() {
        byIno.clear();
        return slots.removeAll().stream().map(n -> n.handle).toList();
    }
}
