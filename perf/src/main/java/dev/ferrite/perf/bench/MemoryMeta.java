package dev.ferrite.perf.bench;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import dev.ferrite.dir.NamespaceException;
import dev.ferrite.io.Errno;

/**
 * The ceiling of the metadata workloads: a namespace in the heap, each directory a {@link
 * ConcurrentSkipListMap} from name to inode, with nothing logged and nothing durable — what Ferrite's
 * namespace would cost if the device and the log were free. Driven like {@link FerriteMeta}: by
 * {@link MetaApi#HANDLE} a session looks each directory up in the root once and keeps it as its handle,
 * then creates, stats and unlinks in it by name; by {@link MetaApi#PATH} every call looks its directory
 * up from the root again. Inode numbers come from a run of {@value #INODE_RUN} per session, so that no shared counter
 * is contended per create. Refusals are Ferrite's: {@link NamespaceException} with EEXIST, ENOENT,
 * ENOTDIR, EISDIR or ENOTEMPTY. Listings come in name order.
 */
final class MemoryMeta implements MetaStore {
    static final String DESCRIPTION = "ConcurrentSkipListMap, no durability (a map per directory, name to inode)";
    /** Inode numbers a session takes at a time. */
    private static final int INODE_RUN = 1024;
    private static final long ROOT_INO = 1;

    /** A file or directory; {@code entries} is a directory's, null for a file. */
    private record Inode(long ino, long size, ConcurrentSkipListMap<String, Inode> entries) {
    }

    private final AtomicLong nextInodes = new AtomicLong(ROOT_INO + 1);
    private final Inode root = directory(ROOT_INO);
    private final boolean byPath;

    MemoryMeta(MetaApi api) {
        this.byPath = api == MetaApi.PATH;
    }

    private static Inode directory(long ino) {
        return new Inode(ino, 0, new ConcurrentSkipListMap<>());
    }

    @Override
    public String describe() {
        return DESCRIPTION;
    }

    @Override
    public Session session() {
        return new MemorySession();
    }

    @Override
    public void sync() {
        // nothing is durable: the ceiling pays for no device
    }

    @Override
    public String coldCache() {
        return "nothing to drop (all in the heap)";
    }

    @Override
    public void check() {
        // the maps keep their own order; the workload checks what it sees
    }

    @Override
    public void close() {
        // nothing held outside the heap
    }

    private final class MemorySession implements Session {
        private final Map<String, Inode> dirs = new HashMap<>();
        private long nextIno;
        private long endIno;

        private long ino() {
            if (nextIno == endIno) {
                nextIno = nextInodes.getAndAdd(INODE_RUN);
                endIno = nextIno + INODE_RUN;
            }
            return nextIno++;
        }

        private Inode dir(String name) {
            Inode d = byPath ? null : dirs.get(name);
            if (d == null) {
                d = lookup(root, name);
                if (d.entries() == null) {
                    throw new NamespaceException(Errno.ENOTDIR, name);
                }
                if (!byPath) {
                    dirs.put(name, d);
                }
            }
            return d;
        }

        private static Inode lookup(Inode dir, String name) {
            Inode i = dir.entries().get(name);
            if (i == null) {
                throw new NamespaceException(Errno.ENOENT, name);
            }
            return i;
        }

        @Override
        public void mkdir(String dir) {
            Inode d = directory(ino());
            if (root.entries().putIfAbsent(dir, d) != null) {
                throw new NamespaceException(Errno.EEXIST, dir);
            }
            dirs.put(dir, d);
        }

        @Override
        public void create(String dir, String name) {
            if (dir(dir).entries().putIfAbsent(name, new Inode(ino(), 0, null)) != null) {
                throw new NamespaceException(Errno.EEXIST, dir + "/" + name);
            }
        }

        @Override
        public long list(String dir, Consumer<String> names) {
            long n = 0;
            for (String name : dir(dir).entries().keySet()) {
                names.accept(name);
                n++;
            }
            return n;
        }

        @Override
        public long stat(String dir, String name) {
            return lookup(dir(dir), name).size();
        }

        @Override
        public void unlink(String dir, String name) {
            ConcurrentSkipListMap<String, Inode> entries = dir(dir).entries();
            Inode i = entries.get(name);
            if (i == null) {
                throw new NamespaceException(Errno.ENOENT, dir + "/" + name);
            }
            if (i.entries() != null) {
                throw new NamespaceException(Errno.EISDIR, dir + "/" + name);
            }
            if (!entries.remove(name, i)) {
                throw new NamespaceException(Errno.ENOENT, dir + "/" + name); // another thread unlinked it first
            }
        }

        /**
         * Removes an empty directory. Not atomic against a create in it: the workloads remove their
         * directories only once every thread is done with them.
         */
        @Override
        public void rmdir(String dir) {
            Inode d = lookup(root, dir);
            if (d.entries() == null) {
                throw new NamespaceException(Errno.ENOTDIR, dir);
            }
            if (!d.entries().isEmpty()) {
                throw new NamespaceException(Errno.ENOTEMPTY, dir);
            }
            root.entries().remove(dir, d);
            dirs.remove(dir);
        }

        @Override
        public void close() {
        }
    }
}
