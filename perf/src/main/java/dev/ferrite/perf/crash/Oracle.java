package dev.ferrite.perf.crash;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.CRC32C;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.TableCursor;
import dev.ferrite.dir.Volume;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * Judges one crash state: mounts it (recovery), runs the volume checker, and checks every lane against
 * its model. The lane's namespace must be the one after some op at or after the last op whose
 * durability the state holds (so renames are whole and nothing acknowledged is lost), its table keys
 * likewise (transactions are whole); each file's size one it had at or after its data's last
 * acknowledgement, and each 8-byte word the value it held then or one a later op gave it: no other
 * file's bytes, no byte of an unwritten block. Then it mounts the recovered image again, as a crash right
 * after the first recovery left it, and requires the same contents: recovery is idempotent.
 */
final class Oracle {
    private final Recording r;
    /** Owns {@link #buf}, a file's contents as read back; used by one thread. */
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment buf = arena.allocate(Lane.MAX_FILE * 2L, BlockDevice.BUFFER_ALIGNMENT);

    Oracle(Recording r) {
        this.r = r;
    }

    /**
     * What is wrong with crash state {@code state} of the recording, which {@code image} holds, or null if
     * nothing is; {@code again} receives the image as the first recovery left it, to recover again.
     */
    String judge(ImageDevice image, ImageDevice again, CrashState state) {
        String first;
        try (Volume v = Volume.open(image, Recording.OPTIONS)) {
            StringBuilder contents = new StringBuilder();
            String finding = check(v, state, contents);
            if (finding != null) {
                return finding;
            }
            first = contents.toString();
            again.load(image); // the crash right after this recovery and check
        } catch (RuntimeException e) {
            return "recovery or the check failed: " + e;
        }
        try (Volume v = Volume.open(again, Recording.OPTIONS)) {
            CheckReport report = v.namespace().check();
            if (!report.clean()) {
                return "the image recovered once, recovered again, fails the check: " + report;
            }
            String second = contents(v);
            return second.equals(first) ? null
                    : "recovering the recovered image again changed it:\nfirst:\n" + first + "\nagain:\n" + second;
        } catch (RuntimeException e) {
            return "recovering the recovered image again failed: " + e;
        }
    }

    private String check(Volume v, CrashState state, StringBuilder contents) {
        CheckReport report = v.namespace().check();
        if (!report.clean()) {
            return "the check found problems: " + report;
        }
        for (Lane lane : r.lanes) {
            String finding = checkLane(v, lane, state.prefix());
            if (finding != null) {
                return "lane " + lane.index + ": " + finding;
            }
        }
        contents.append(contents(v));
        return null;
    }

    private String checkLane(Volume v, Lane lane, int prefix) {
        int[] from = r.durableFrom.get(lane.index);
        List<Lane.Ack> acks = lane.acks();
        int nsAck = 0, tableAck = 0, allData = 0;
        Map<Integer, Integer> dataAck = new HashMap<>(), attrAck = new HashMap<>();
        List<String> held = new ArrayList<>();
        for (int i = 0; i < acks.size(); i++) {
            if (from[i] <= prefix) {
                Lane.Ack a = acks.get(i);
                held.add(Integer.toString(a.op()));
                nsAck = Math.max(nsAck, a.namespace());
                tableAck = Math.max(tableAck, a.table());
                if (a.file() == -1) {
                    allData = Math.max(allData, a.data());
                } else if (a.file() > 0) {
                    dataAck.merge(a.file(), a.data(), Math::max);
                    attrAck.merge(a.file(), a.attributes(), Math::max);
                }
            }
        }
        for (Lane other : r.lanes) { // a volume sync makes every change made before it durable, the other lanes' too
            int[] otherFrom = r.durableFrom.get(other.index);
            List<Lane.Ack> otherAcks = other.acks();
            for (int i = 0; other != lane && i < otherAcks.size(); i++) {
                Lane.Ack a = otherAcks.get(i);
                int before = lane.returnedBefore(a.started());
                if (otherFrom[i] <= prefix && a.file() == -1 && before > 0) {
                    held.add("up to " + before + " by lane " + other.index + "'s op " + a.op());
                    nsAck = Math.max(nsAck, before);
                    tableAck = Math.max(tableAck, before);
                    allData = Math.max(allData, before);
                }
            }
        }
        String acked = " (acknowledged durable: ops " + held + ")";
        Namespace ns = v.namespace();
        TreeMap<String, Lane.Entry> shapes = new TreeMap<>();
        walk(ns, lane.root, "", shapes);
        String structure = Lane.describe(shapes);
        List<Integer> matches = new ArrayList<>();
        for (int j = nsAck; j <= lane.opCount(); j++) {
            if (lane.structureAfter(j).equals(structure)) {
                matches.add(j);
            }
        }
        if (matches.isEmpty()) {
            return "the namespace is the state after no op from " + nsAck + " to " + lane.opCount() + acked
                    + ":\nrecovered:\n" + structure + "after op " + nsAck + ":\n" + lane.structureAfter(nsAck);
        }
        String table = readTable(v, lane);
        boolean tableOk = false;
        for (int j = tableAck; j <= lane.opCount() && !tableOk; j++) {
            tableOk = lane.tableAfter(j).equals(table);
        }
        if (!tableOk) {
            return "the table's keys are the state after no op from " + tableAck + " to " + lane.opCount() + acked
                    + ":\nrecovered: " + table + "\nafter op " + tableAck + ": " + lane.tableAfter(tableAck);
        }
        String firstFinding = null;
        for (int j : matches) {
            String finding = checkFiles(ns, lane, j, lane.filesAfter(j), allData, dataAck, attrAck);
            if (finding == null) {
                return null;
            }
            if (firstFinding == null) {
                firstFinding = "with the namespace as after op " + j + acked + ": " + finding;
            }
        }
        return firstFinding;
    }

    /**
     * The files of the namespace as after op {@code at}: sizes and words as above, and a modification
     * time the file had after op {@code at} or its attributes' last acknowledgement (an fsync of it),
     * whichever is later, or after a later op; any time if one of those came from the clock (a write).
     */
    private String checkFiles(Namespace ns, Lane lane, int at, Map<String, Lane.FileObject> files, int allData,
                              Map<Integer, Integer> dataAck, Map<Integer, Integer> attrAck) {
        Map<Lane.FileObject, Boolean> seen = new HashMap<>();
        for (Map.Entry<String, Lane.FileObject> e : new TreeMap<>(files).entrySet()) {
            Lane.FileObject f = e.getValue();
            if (seen.put(f, true) != null) {
                continue;
            }
            int ack = Math.max(allData, dataAck.getOrDefault(f.id, 0));
            String path = lane.at(e.getKey());
            try (Handle h = ns.open(path)) {
                InodeStat st = ns.stat(h);
                int since = Math.max(at, attrAck.getOrDefault(f.id, 0));
                List<Long> mtimes = f.mtimesFrom(since);
                if (mtimes != null && !mtimes.contains(st.mtimeNanos())) {
                    return path + ": modification time " + st.mtimeNanos() + " is none of " + mtimes + ", the times setattrs gave"
                            + " it from op " + since + " on (the one in force then set by op " + f.mtimeSetAt(since) + ")";
                }
                long size = st.size();
                List<Long> sizes = f.sizesAfter(ack);
                if (!sizes.contains(size) && !writtenBackOnTheWay(size, sizes)) {
                    return path + ": size " + size + " is none of " + sizes + " (its data acknowledged at op " + ack + ")";
                }
                long got = 0;
                while (got < size) {
                    int n = ns.read(h, got, buf.asSlice(got, size - got));
                    if (n <= 0) {
                        return path + ": read at " + got + " of " + size + " bytes returned " + n;
                    }
                    got += n;
                }
                for (long o = 0; o < size; o += 8) {
                    long word = buf.get(JAVA_LONG_UNALIGNED, o);
                    if (!f.allows(o, word, ack)) {
                        return path + ": the word at offset " + o + " is 0x" + Long.toHexString(word) + " (" + describeWord(word)
                                + "); after op " + ack + " (its data's last acknowledgement) it was 0x"
                                + Long.toHexString(f.wordAt(o, ack)) + " and only later writes, truncates and punches may change it";
                    }
                }
            }
        }
        return null;
    }

    /**
     * A size a crash may leave between two the file had: buffered data is written back in runs of blocks,
     * in file order, each run's transaction committing the size up to its end ({@code BufferedIo}), as
     * XFS moves its on-disk size with each completed write. So a block boundary above the acknowledged
     * size ({@code sizes}' last) and below a later one is allowed; the word check then holds every byte
     * under it to what the writes, truncates and punches allow.
     */
    static boolean writtenBackOnTheWay(long size, List<Long> sizes) {
        long acked = sizes.getLast();
        return size % Recording.BLOCK_SIZE == 0 && size > acked && sizes.stream().anyMatch(s -> s > size);
    }

    private static String describeWord(long word) {
        if (word == 0) {
            return "zero";
        }
        if (word == 0xA5A5A5A5A5A5A5A5L) {
            return "free space never written by the workload";
        }
        return "file " + (word >>> 48) + ", write " + (word >>> 32 & 0xFFFF) + ", offset " + ((word & 0xFFFFFFFFL) << 3);
    }

    /** Every name under {@code dir} (lane-relative {@code rel}) with its shape; a file's identity is its inode number. */
    private static void walk(Namespace ns, String dir, String rel, TreeMap<String, Lane.Entry> out) {
        for (DirEntry d : ns.list(dir)) {
            String path = dir + "/" + d.name();
            String name = rel.isEmpty() ? d.name() : rel + "/" + d.name();
            InodeStat st = ns.lstat(path);
            int perm = st.mode() & 07777;
            String owner = st.uid() + ":" + st.gid();
            if (st.isDirectory()) {
                out.put(name, new Lane.Entry('d', perm, owner, 0, null, null));
                walk(ns, path, name, out);
            } else if (st.isSymlink()) {
                out.put(name, new Lane.Entry('l', 0, null, 0, ns.readlink(path), null));
            } else {
                out.put(name, new Lane.Entry(st.isRegularFile() ? 'f' : '?', perm, owner, st.nlink(), null, st.ino()));
            }
        }
    }

    private static String readTable(Volume v, Lane lane) {
        TreeMap<String, byte[]> got = new TreeMap<>();
        byte[] prefix = lane.key("");
        try (Table t = v.tables().open(Lane.TABLE)) {
            TableCursor c = t.prefix(prefix, false);
            while (c.next()) {
                got.put(new String(c.key(), prefix.length, c.key().length - prefix.length, java.nio.charset.StandardCharsets.UTF_8), c.value());
            }
        }
        return Lane.describeTable(got);
    }

    /** The volume's contents as one string: each lane's namespace, files' sizes and CRC32Cs, and table keys. */
    private String contents(Volume v) {
        Namespace ns = v.namespace();
        StringBuilder s = new StringBuilder();
        for (Lane lane : r.lanes) {
            TreeMap<String, Lane.Entry> shapes = new TreeMap<>();
            walk(ns, lane.root, "", shapes);
            s.append(Lane.describe(shapes));
            for (Map.Entry<String, Lane.Entry> e : shapes.entrySet()) {
                if (e.getValue().type() == 'f') {
                    try (Handle h = ns.open(lane.at(e.getKey()))) {
                        long size = ns.stat(h).size();
                        CRC32C crc = new CRC32C();
                        for (long at = 0; at < size; ) {
                            int n = ns.read(h, at, buf.asSlice(0, Math.min(buf.byteSize(), size - at)));
                            crc.update(buf.asSlice(0, n).asByteBuffer());
                            at += n;
                        }
                        s.append(e.getKey()).append(" size ").append(size).append(" crc ").append(Long.toHexString(crc.getValue())).append('\n');
                    }
                }
            }
            s.append(readTable(v, lane)).append('\n');
        }
        return s.toString();
    }

    void close() {
        arena.close();
    }
}
