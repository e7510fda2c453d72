package dev.ferrite.perf.crash;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.CRC32C;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.WriteTransaction;
import dev.ferrite.io.BlockDevice;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * One thread's part of a workload and the model of what it did: the namespace under its directory
 * {@code /lN}, the files' data histories and its keys ({@code lN/...}) of table {@link #TABLE}. Lanes touch
 * disjoint parts of the volume, so each recovered lane is checked against its own operations alone.
 * The model keeps the state after each operation (index 0: after the setup, which the base image holds
 * durably) as canonical strings, so a recovered volume is matched by string equality.
 *
 * <p>Every 8-byte word a workload writes names its file, its write and its offset ({@link #stamp}), so a
 * word out of place (another file's, another offset's, an unwritten block's) is recognised as such.
 */
final class Lane {
    static final String TABLE = "t";
    /** Most bytes a file gets: offsets and lengths stay below this. */
    static final int MAX_FILE = 256 << 10;

    final int index;
    final String root;
    private final TreeMap<String, Node> nodes = new TreeMap<>();
    private final TreeMap<String, byte[]> table = new TreeMap<>();
    private int nextObject;

    /** After op i: the canonical namespace, the file object at each file path, the canonical table. */
    private final List<String> structures = new ArrayList<>();
    private final List<Map<String, FileObject>> filesAt = new ArrayList<>();
    private final List<String> tables = new ArrayList<>();
    /**
     * Ops run after the setup (numbered from 1); what each persistence point acknowledged, and the
     * recording's event count when it returned.
     */
    private int opCount;
    private final List<Ack> acks = new ArrayList<>();
    private final List<Integer> ackEvents = new ArrayList<>();
    /** When op i + 1 returned ({@link System#nanoTime}). */
    private final List<Long> returned = new ArrayList<>();

    /** Whether the setup is over: until then every op is part of the base image, op 0. */
    private boolean started;

    Lane(int index) {
        this.index = index;
        this.root = "/l" + index;
        snapshot();
    }

    /** Ends the setup: later ops are numbered from 1 and acknowledge what they make durable. */
    void start() {
        started = true;
    }

    // ------------------------------------------------------------------------------------ the model

    sealed interface Node permits Dir, File, Sym {
    }

    static final class Dir implements Node {
        int permissions = 0755;
        /** uid:gid, as a create through the Java API makes them until a setattr changes them. */
        String owner = "0:0";
    }

    record File(FileObject object) implements Node {
    }

    record Sym(String target) implements Node {
    }

    /** A regular file, however many names it has: its data history, in ops of its lane. */
    static final class FileObject {
        final int id;
        /** The op that created it (0 for the setup's). */
        final int createdAt;
        int permissions = 0644;
        String owner = "0:0";
        long size;
        int writes;
        /** {op, kind, offset, length, write number}; kinds below. */
        final List<long[]> events = new ArrayList<>();
        /** {op, size} each time the size changed, from the creation's {op, 0}. */
        final List<long[]> sizes = new ArrayList<>();
        /** {op, mtime} each time a setattr set the modification time or another op made it unknown ({@link #UNKNOWN}). */
        final List<long[]> mtimes = new ArrayList<>();
        static final long UNKNOWN = Long.MIN_VALUE;

        static final int WRITE = 0, ZERO = 1, TRUNCATE = 2;

        FileObject(int id, int op) {
            this.id = id;
            this.createdAt = op;
            sizes.add(new long[] {op, 0});
            mtimes.add(new long[] {op, UNKNOWN});
        }

        /** Records the modification time op {@code op} left: a setattr's, or {@link #UNKNOWN} after a data change (the clock's). */
        void setMtime(int op, long mtime) {
            mtimes.add(new long[] {op, mtime});
        }

        /** The op that set the modification time in force after op {@code at}. */
        long mtimeSetAt(int at) {
            long op = -1;
            for (long[] e : mtimes) {
                if (e[0] > at) {
                    break;
                }
                op = e[0];
            }
            return op;
        }

        /**
         * The modification times the file had after op {@code from} and later ones; null if one of them
         * came from the clock (any time may show then).
         */
        List<Long> mtimesFrom(int from) {
            List<Long> out = new ArrayList<>();
            out.add(mtimeAt(from));
            for (long[] e : mtimes) {
                if (e[0] > from) {
                    out.add(e[1]);
                }
            }
            return out.contains(UNKNOWN) ? null : out;
        }

        /** The modification time after op {@code at}, or {@link #UNKNOWN} if an op took it from the clock. */
        long mtimeAt(int at) {
            long m = UNKNOWN;
            for (long[] e : mtimes) {
                if (e[0] > at) {
                    break;
                }
                m = e[1];
            }
            return m;
        }

        void setSize(int op, long s) {
            if (s != size) {
                size = s;
                sizes.add(new long[] {op, s});
            }
        }

        /** The word at {@code offset} after the events up to op {@code at}. */
        long wordAt(long offset, int at) {
            long w = 0;
            for (long[] e : events) {
                if (e[0] > at) {
                    break;
                }
                if (covers(e, offset)) {
                    w = valueOf(e, offset);
                }
            }
            return w;
        }

        private static boolean covers(long[] e, long offset) {
            return e[1] == TRUNCATE ? offset >= e[2] : offset >= e[2] && offset < e[2] + e[3];
        }

        private long valueOf(long[] e, long offset) {
            return e[1] == WRITE ? stamp(id, (int) e[4], offset) : 0;
        }

        /** Whether {@code word} at {@code offset} is its value at op {@code ack} or one a later event gave it. */
        boolean allows(long offset, long word, int ack) {
            if (word == wordAt(offset, ack)) {
                return true;
            }
            for (long[] e : events) {
                if (e[0] > ack && covers(e, offset) && valueOf(e, offset) == word) {
                    return true;
                }
            }
            return false;
        }

        /** Sizes a crash may show when the data was durable at op {@code ack}: the size then, or any later one. */
        List<Long> sizesAfter(int ack) {
            List<Long> out = new ArrayList<>();
            long then = 0;
            for (long[] s : sizes) {
                if (s[0] <= ack) {
                    then = s[1];
                } else {
                    out.add(s[1]);
                }
            }
            out.add(then);
            return out;
        }
    }

    /** The word a write stores at a file offset: file, write number and offset, never 0. */
    static long stamp(int file, int write, long offset) {
        return (long) file << 48 | (long) (write & 0xFFFF) << 32 | (offset >>> 3);
    }

    /**
     * What op i's durability acknowledges once it returned: the lane's namespace up to op
     * {@code namespace}, table up to {@code table}, and file object {@code file}'s data up to
     * {@code data} and its attributes up to {@code attributes} (every file's when {@code file} is -1).
     */
    record Ack(int op, int namespace, int table, int file, int data, int attributes, long started) {
    }

    FileObject file(String path) {
        return nodes.get(path) instanceof File f ? f.object() : null;
    }

    boolean isDir(String path) {
        return path.isEmpty() || nodes.get(path) instanceof Dir;
    }

    static String parent(String path) {
        int slash = path.lastIndexOf('/');
        return slash < 0 ? "" : path.substring(0, slash);
    }

    boolean isEmptyDir(String path) {
        if (!(nodes.get(path) instanceof Dir)) {
            return false;
        }
        String below = nodes.higherKey(path + "/");
        return below == null || !below.startsWith(path + "/");
    }

    List<String> paths() {
        return List.copyOf(nodes.keySet());
    }

    int opCount() {
        return opCount;
    }

    /** Whether {@code op} is valid in the model's current state (the workload generator only makes valid ones). */
    boolean valid(Op op) {
        return switch (op) {
            case Op.Mkdir m -> fresh(m.path());
            case Op.Create c -> fresh(c.path());
            case Op.Write w -> file(w.path()) != null && w.offset() + w.length() <= MAX_FILE;
            case Op.Append a -> file(a.path()) != null && file(a.path()).size + a.length() <= MAX_FILE;
            case Op.Truncate t -> file(t.path()) != null && t.size() <= MAX_FILE;
            case Op.Fallocate f -> file(f.path()) != null && f.offset() + f.length() <= MAX_FILE;
            case Op.Rename r -> renamable(r.from(), r.to());
            case Op.Link l -> file(l.existing()) != null && fresh(l.path());
            case Op.Symlink s -> fresh(s.path());
            case Op.Unlink u -> nodes.get(u.path()) instanceof File || nodes.get(u.path()) instanceof Sym;
            case Op.Rmdir r -> isEmptyDir(r.path());
            case Op.Setattr c -> nodes.get(c.path()) instanceof File || nodes.get(c.path()) instanceof Dir;
            case Op.Fsync f -> file(f.path()) != null;
            case Op.Fdatasync f -> file(f.path()) != null;
            case Op.Sync s -> true;
            case Op.Txn t -> !t.changes().isEmpty();
        };
    }

    private boolean fresh(String path) {
        return !nodes.containsKey(path) && isDir(parent(path));
    }

    private boolean renamable(String from, String to) {
        Node a = nodes.get(from), b = nodes.get(to);
        if (a == null || from.equals(to) || !isDir(parent(to)) || to.startsWith(from + "/")) {
            return false;
        }
        if (b == null) {
            return true;
        }
        if (a instanceof Dir) {
            return isEmptyDir(to);
        }
        // a hard link renamed over another name of the same file changes nothing (rename(2)): not generated
        return !(b instanceof Dir) && !(a instanceof File fa && b instanceof File fb && fa.object() == fb.object());
    }

    // --------------------------------------------------------------------------- running an op

    /** Scratch for one lane's writes. */
    private final MemorySegment buffer = Arena.ofAuto().allocate(MAX_FILE, BlockDevice.BUFFER_ALIGNMENT);

    /**
     * Runs {@code op} on the volume and, once it returned, applies it to the model as op number
     * {@link #opCount()} + 1, noting where in the recording it returned ({@code eventsAtReturn}).
     */
    void run(Volume v, Table t, Op op, java.util.function.IntSupplier eventsAtReturn) {
        Namespace ns = v.namespace();
        int n = this.started ? opCount + 1 : 0;
        long started = System.nanoTime();
        switch (op) {
            case Op.Mkdir m -> ns.mkdir(at(m.path()), 0755);
            case Op.Create c -> ns.create(at(c.path()), 0644, true);
            case Op.Write w -> {
                FileObject f = file(w.path());
                try (Handle h = ns.open(at(w.path()))) {
                    ns.write(h, w.offset(), stamped(f, f.writes + 1, w.offset(), w.length()));
                }
            }
            case Op.Append a -> {
                FileObject f = file(a.path());
                try (Handle h = ns.open(at(a.path()))) {
                    long got = ns.append(h, stamped(f, f.writes + 1, f.size, a.length()));
                    if (got != f.size) {
                        throw new IllegalStateException(op + " appended at " + got + ", the model's size is " + f.size);
                    }
                }
            }
            case Op.Truncate tr -> {
                try (Handle h = ns.open(at(tr.path()))) {
                    ns.truncate(h, tr.size());
                }
            }
            case Op.Fallocate fa -> {
                try (Handle h = ns.open(at(fa.path()))) {
                    ns.fallocate(h, fa.mode(), fa.offset(), fa.length());
                }
            }
            case Op.Rename r -> ns.rename(at(r.from()), at(r.to()));
            case Op.Link l -> ns.link(at(l.existing()), at(l.path()));
            case Op.Symlink s -> ns.symlink(s.target(), at(s.path()));
            case Op.Unlink u -> ns.unlink(at(u.path()));
            case Op.Rmdir r -> ns.rmdir(at(r.path()));
            case Op.Setattr c -> ns.setattr(at(c.path()), c.permissions(), c.uid(), c.gid(), -1, c.mtimeNanos());
            case Op.Fsync f -> {
                try (Handle h = ns.open(at(f.path()))) {
                    ns.fsync(h);
                }
            }
            case Op.Fdatasync f -> {
                try (Handle h = ns.open(at(f.path()))) {
                    ns.fdatasync(h);
                }
            }
            case Op.Sync s -> v.sync();
            case Op.Txn tx -> {
                try (WriteTransaction w = v.begin(tx.durability())) {
                    for (Op.Change c : tx.changes()) {
                        if (c.length() < 0) {
                            w.delete(t, key(c.key()));
                        } else {
                            w.put(t, key(c.key()), value(n, c.key(), c.length()));
                        }
                    }
                    w.commit();
                }
            }
        }
        int events = eventsAtReturn.getAsInt();
        if (this.started) {
            returned.add(System.nanoTime());
        }
        apply(op, n);
        if (this.started && op.persists()) {
            acks.add(ackOf(op, n, started));
            ackEvents.add(events);
        }
    }

    List<Ack> acks() {
        return List.copyOf(acks);
    }

    /** How many of the lane's ops had returned at {@code nanos}: the last op a sync called then covers. */
    int returnedBefore(long nanos) {
        int n = 0;
        while (n < returned.size() && returned.get(n) < nanos) {
            n++;
        }
        return n;
    }

    List<Integer> ackEvents() {
        return List.copyOf(ackEvents);
    }

    private Ack ackOf(Op op, int n, long started) {
        return switch (op) {
            case Op.Sync s -> new Ack(n, n, n, -1, n, n, started);
            case Op.Txn t -> new Ack(n, 0, n, 0, 0, 0, started);
            // fsync makes the file's creation and attributes durable (and every earlier change the log holds,
            // which is not claimed); fdatasync its size and extents, not its times
            case Op.Fsync f -> new Ack(n, file(f.path()).createdAt, 0, file(f.path()).id, n, n, started);
            case Op.Fdatasync f -> new Ack(n, 0, 0, file(f.path()).id, n, 0, started);
            default -> throw new IllegalArgumentException(op + " acknowledges nothing");
        };
    }

    String at(String path) {
        return root + "/" + path;
    }

    byte[] key(String k) {
        return ("l" + index + "/" + k).getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** A table value naming its lane, op and key, {@code length} bytes. */
    byte[] value(int op, String key, int length) {
        byte[] v = new byte[length];
        long x = (long) index << 40 ^ (long) op << 20 ^ key.hashCode();
        for (int i = 0; i < length; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            v[i] = (byte) (x >>> 56);
        }
        return v;
    }

    private MemorySegment stamped(FileObject f, int write, long offset, int length) {
        MemorySegment s = buffer.asSlice(0, length);
        for (int w = 0; w < length; w += 8) {
            s.set(JAVA_LONG_UNALIGNED, w, stamp(f.id, write, offset + w));
        }
        return s;
    }

    /** Applies a successful {@code op} to the model as op {@code n} and records the state after it. */
    void apply(Op op, int n) {
        switch (op) {
            case Op.Mkdir m -> nodes.put(m.path(), new Dir());
            case Op.Create c -> nodes.put(c.path(), new File(new FileObject(index * 1000 + ++nextObject, n)));
            case Op.Write w -> {
                FileObject f = file(w.path());
                f.events.add(new long[] {n, FileObject.WRITE, w.offset(), w.length(), ++f.writes});
                f.setSize(n, Math.max(f.size, w.offset() + w.length()));
                f.setMtime(n, FileObject.UNKNOWN);
            }
            case Op.Append a -> {
                FileObject f = file(a.path());
                f.events.add(new long[] {n, FileObject.WRITE, f.size, a.length(), ++f.writes});
                f.setSize(n, f.size + a.length());
                f.setMtime(n, FileObject.UNKNOWN);
            }
            case Op.Truncate t -> {
                FileObject f = file(t.path());
                f.events.add(new long[] {n, FileObject.TRUNCATE, t.size(), 0, 0});
                f.setSize(n, t.size());
                f.setMtime(n, FileObject.UNKNOWN);
            }
            case Op.Fallocate fa -> {
                FileObject f = file(fa.path());
                if ((fa.mode() & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) != 0) {
                    f.events.add(new long[] {n, FileObject.ZERO, fa.offset(), fa.length(), 0});
                }
                if ((fa.mode() & FALLOC_FL_KEEP_SIZE) == 0) {
                    f.setSize(n, Math.max(f.size, fa.offset() + fa.length()));
                }
                f.setMtime(n, FileObject.UNKNOWN);
            }
            case Op.Rename r -> {
                nodes.remove(r.to());
                TreeMap<String, Node> moved = new TreeMap<>(nodes.subMap(r.from(), true, r.from() + "/\uffff", true));
                moved.keySet().removeIf(p -> !p.equals(r.from()) && !p.startsWith(r.from() + "/"));
                for (Map.Entry<String, Node> e : moved.entrySet()) {
                    nodes.remove(e.getKey());
                }
                for (Map.Entry<String, Node> e : moved.entrySet()) {
                    nodes.put(r.to() + e.getKey().substring(r.from().length()), e.getValue());
                }
            }
            case Op.Link l -> nodes.put(l.path(), nodes.get(l.existing()));
            case Op.Symlink s -> nodes.put(s.path(), new Sym(s.target()));
            case Op.Unlink u -> nodes.remove(u.path());
            case Op.Rmdir r -> nodes.remove(r.path());
            case Op.Setattr c -> {
                if (nodes.get(c.path()) instanceof Dir d) {
                    d.permissions = c.permissions();
                    d.owner = c.uid() + ":" + c.gid();
                } else {
                    FileObject f = file(c.path());
                    f.permissions = c.permissions();
                    f.owner = c.uid() + ":" + c.gid();
                    f.setMtime(n, c.mtimeNanos());
                }
            }
            case Op.Fsync f -> { }
            case Op.Fdatasync f -> { }
            case Op.Sync s -> { }
            case Op.Txn t -> {
                for (Op.Change c : t.changes()) {
                    if (c.length() < 0) {
                        table.remove(c.key());
                    } else {
                        table.put(c.key(), value(n, c.key(), c.length()));
                    }
                }
            }
        }
        if (n > 0) {
            opCount++;
        }
        snapshot();
    }

    /** Records the current state as the one after the latest op (the setup's, at index 0, first). */
    void snapshot() {
        if (structures.size() > opCount) { // the setup's ops all share index 0
            structures.removeLast();
            filesAt.removeLast();
            tables.removeLast();
        }
        TreeMap<String, Entry> shapes = new TreeMap<>();
        Map<String, FileObject> files = new HashMap<>();
        for (Map.Entry<String, Node> e : nodes.entrySet()) {
            shapes.put(e.getKey(), switch (e.getValue()) {
                case Dir d -> new Entry('d', d.permissions, d.owner, 0, null, null);
                case File f -> {
                    files.put(e.getKey(), f.object());
                    yield new Entry('f', f.object().permissions, f.object().owner, 0, null, f.object());
                }
                case Sym s -> new Entry('l', 0, null, 0, s.target(), null);
            });
        }
        structures.add(describe(shapes));
        filesAt.add(files);
        tables.add(describeTable(table));
    }

    String structureAfter(int op) {
        return structures.get(op);
    }

    Map<String, FileObject> filesAfter(int op) {
        return filesAt.get(op);
    }

    String tableAfter(int op) {
        return tables.get(op);
    }

    // ------------------------------------------------------------------------- canonical forms

    /**
     * One name's shape: type ('d', 'f', 'l'), permissions and owner (uid:gid), a file's link count as the volume says it (0
     * in the model: the names counted), a symlink's target, and for a file what identifies it (equal for
     * names of one file): the model's object or the volume's inode number.
     */
    record Entry(char type, int permissions, String owner, int links, String target, Object identity) {
    }

    /** The namespace as one string: a line per name, files with their link count and first name (hard links). */
    static String describe(TreeMap<String, Entry> shapes) {
        Map<Object, String> first = new HashMap<>();
        Map<Object, Integer> links = new HashMap<>();
        for (Map.Entry<String, Entry> e : shapes.entrySet()) {
            Object id = e.getValue().identity();
            if (id != null) {
                first.putIfAbsent(id, e.getKey());
                links.merge(id, 1, Integer::sum);
            }
        }
        StringBuilder s = new StringBuilder();
        for (Map.Entry<String, Entry> e : shapes.entrySet()) {
            Entry x = e.getValue();
            s.append(e.getKey()).append(' ').append(x.type());
            switch (x.type()) {
                case 'd' -> s.append(' ').append(Integer.toOctalString(x.permissions())).append(' ').append(x.owner());
                case 'f' -> s.append(' ').append(Integer.toOctalString(x.permissions())).append(' ').append(x.owner())
                        .append(" links ").append(x.links() > 0 ? x.links() : links.get(x.identity()))
                        .append(" =").append(first.get(x.identity()));
                case 'l' -> s.append(" -> ").append(x.target());
                default -> { }
            }
            s.append('\n');
        }
        return s.toString();
    }

    /** The lane's keys and values as one string: each key with its value's length and CRC32C. */
    static String describeTable(Map<String, byte[]> t) {
        StringBuilder s = new StringBuilder();
        for (Map.Entry<String, byte[]> e : t.entrySet()) {
            CRC32C crc = new CRC32C();
            crc.update(e.getValue());
            s.append(e.getKey()).append('=').append(e.getValue().length).append(':')
                    .append(Long.toHexString(crc.getValue())).append(' ');
        }
        return s.toString();
    }
}
