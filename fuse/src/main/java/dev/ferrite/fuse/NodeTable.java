package dev.ferrite.fuse;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.NamespaceException;
import dev.ferrite.io.Errno;

/**
 * The inodes the kernel knows, by node id (the number the kernel sends with every request about an inode): a slot
 * of a {@link SlotTable} plus one, so that the root, added first, is 1 ({@code FUSE_ROOT_ID}). Each node holds a
 * {@link Handle} on its inode, so an inode the kernel still knows is not freed and its number not reused under it,
 * and the kernel's lookup count: one per entry replied (lookup, create, mknod, mkdir, symlink, link, each
 * readdirplus entry), down by FORGET; at zero the node goes and its handle is closed. One node per inode, found by
 * inode number at each entry reply, so that all names of a hard link are one kernel inode. A node also counts the
 * kernel's opens of it: an idle node can be detached (its handle closed, its slot kept until FORGET) just before
 * its inode loses its last name, so that the volume frees the inode at once instead of keeping it as an orphan for
 * a handle only the kernel's cache holds. Finding a node by id takes no lock.
 */
final class NodeTable {
    static final long ROOT = 1;
    /** Linux's "stale file handle" (dev.ferrite.io.Errno has no name for it). */
    private static final int ESTALE = 116;

    /** An inode the kernel knows. */
    static final class Node {
        final long id;
        final long ino;
        /** Null once detached. Written under the table's lock. */
        private volatile Handle handle;
        /** Guarded by the table. */
        private long lookups;
        private int opens;

        private Node(long id, Handle handle) {
            this.id = id;
            this.ino = handle.ino();
            this.handle = handle;
        }

        /** Its handle, or null if detached. */
        Handle handle() {
            return handle;
        }
    }

    private final SlotTable<Node> slots = new SlotTable<>();
    /** The attached nodes by inode number. Guarded by this. */
    private final Map<Long, Node> byIno = new HashMap<>();
    /** Nodes in slots, detached ones included. Guarded by this. */
    private int live;

    /** A table knowing the root, through {@code root}, for as long as the mount lives (the kernel never forgets it). */
    NodeTable(Handle root) {
        add(root);
    }

    /** The handle of node {@code id}: ESTALE if the kernel's node is one this table does not know, ENOENT if its inode lost its last name. */
    Handle get(long id) {
        Node n = slots.get(id - 1);
        Handle h = n != null ? n.handle : null;
        if (h == null) {
            throw new NamespaceException(n == null ? ESTALE : Errno.ENOENT, "no " + (n == null ? "" : "linked ") + "node " + id);
        }
        return h;
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
        if (n == null || n.handle == null) {
            throw new NamespaceException(ESTALE, "no linked node " + id);
        }
        n.lookups++;
        return n;
    }

    private Node add(Handle h) {
        Node n = new Node(slots.add(null) + 1, h);
        slots.set(n.id - 1, n);
        byIno.put(n.ino, n);
        live++;
        return n;
    }

    /** The kernel opens node {@code id} (a file or directory descriptor will refer to it): its handle, as {@link #get}. */
    synchronized Handle open(long id) {
        Handle h = get(id);
        slots.get(id - 1).opens++;
        return h;
    }

    /** The kernel released an open of node {@code id}. */
    synchronized void released(long id) {
        Node n = slots.get(id - 1);
        if (n != null) {
            n.opens--;
        }
    }

    /**
     * Detaches the node of inode {@code ino} if the kernel has it open nowhere: its handle is closed, and the node is
     * still found by id (ENOENT) but no longer by inode number. Returns it, or null if there is no such node or it is
     * open.
     */
    Node detachIfIdle(long ino) {
        Node n;
        Handle h;
        synchronized (this) {
            n = byIno.get(ino);
            if (n == null || n.opens > 0) {
                return null;
            }
            byIno.remove(ino);
            h = n.handle;
            n.handle = null;
        }
        h.close();
        return n;
    }

    /** Undoes {@link #detachIfIdle} with {@code h}, a new handle on the node's inode (its name stayed); closes {@code h} if the inode has a node again. */
    void reattach(Node n, Handle h) {
        synchronized (this) {
            if (h.ino() == n.ino && n.handle == null && slots.get(n.id - 1) == n && !byIno.containsKey(n.ino)) {
                n.handle = h;
                byIno.put(n.ino, n);
                return;
            }
        }
        h.close();
    }

    /** FORGET: node {@code id}'s lookup count down by {@code count}; at zero the node goes and its handle, if any, is closed. */
    void forget(long id, long count) {
        Handle h;
        synchronized (this) {
            Node n = id > ROOT ? slots.get(id - 1) : null;
            if (n == null) {
                return; // the root, or a node this table does not know: nothing to let go
            }
            n.lookups -= count;
            if (n.lookups > 0) {
                return;
            }
            slots.remove(id - 1);
            live--;
            h = n.handle;
            if (h != null) {
                byIno.remove(n.ino);
            }
        }
        if (h != null) {
            h.close();
        }
    }

    /** How many nodes the kernel holds, the root and detached nodes included. */
    synchronized int size() {
        return live;
    }

    /** Forgets every node (the mount is gone: the kernel's lookup counts are implicitly zero) and returns their handles, for the caller to close. */
    synchronized List<Handle> removeAll() {
        byIno.clear();
        live = 0;
        List<Handle> handles = new ArrayList<>();
        for (Node n : slots.removeAll()) {
            if (n.handle != null) {
                handles.add(n.handle);
            }
        }
        return handles;
    }
}
