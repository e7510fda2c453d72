package dev.ferrite.perf.crash;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32C;

import dev.ferrite.dir.Durability;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.WriteTransaction;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;

/**
 * The child JVM of {@link Kills}: mounts the volume on {@code IMAGE} (recovering it), prints
 * {@code ready}, then runs a random workload of round {@code ROUND} until it is killed. After each
 * fsync, volume sync or SYNC commit has returned, and only then, it prints on stdout what that made
 * durable, one fact a line after the word {@code ack} (the JVM may print its own warnings on stdout):
 * <ul>
 *   <li>{@code file PATH SIZE CRC}: the file holds SIZE bytes with that CRC32C (written, then fsync'd, or
 *       renamed into place from a temporary name and synced);
 *   <li>{@code key KEY LENGTH CRC}: table {@value #TABLE} maps KEY to such a value;
 *   <li>{@code counter KEY N}: the key's value is a decimal number of at least N (later commits raise it).
 * </ul>
 * Other changes (writes never synced, ASYNC and NONE commits, unlinks of scratch files) go on between them.
 * Usage: {@code KillChild IMAGE ROUND SEED}.
 */
public final class KillChild {
    static final String TABLE = "kill";
    static final String ACK = "ack ";
    /** Files a round acknowledges at most, so that many rounds fit the volume. */
    private static final int MAX_FILES = 150;

    private KillChild() {
    }

    public static void main(String[] args) {
        Path image = Path.of(args[0]);
        int round = Integer.parseInt(args[1]);
        Random rnd = new Random(Long.parseLong(args[2]));
        PrintStream out = System.out;
        try (BlockDevice dev = Kills.openWhenFree(image, DeviceOptions.defaults());
             Volume v = Volume.open(dev, Recording.OPTIONS.withCacheBytes(16L << 20).withDataCacheBytes(4L << 20));
             Table t = v.tables().openOrCreate(TABLE);
             Arena arena = Arena.ofConfined()) {
            out.println("ready");
            out.flush();
            Namespace ns = v.namespace();
            String dir = "/r" + round;
            ns.mkdir(dir, 0755);
            MemorySegment buf = arena.allocate(64 << 10, BlockDevice.BUFFER_ALIGNMENT);
            List<String> scratch = new ArrayList<>();
            int files = 0;
            for (int i = 0; ; i++) {
                int r = rnd.nextInt(10);
                if (r < 3 && files < MAX_FILES) {
                    files++;
                    String path = dir + "/f" + i;
                    int size = write(ns, path, rnd, buf);
                    try (Handle h = ns.open(path)) {
                        ns.fsync(h);
                    }
                    ack(out, "file " + path + " " + size + " " + crc(buf.asSlice(0, size)));
                } else if (r < 4 && files < MAX_FILES) {
                    files++;
                    String tmp = dir + "/tmp" + i, path = dir + "/g" + i;
                    int size = write(ns, tmp, rnd, buf);
                    ns.rename(tmp, path);
                    v.sync();
                    ack(out, "file " + path + " " + size + " " + crc(buf.asSlice(0, size)));
                } else if (r < 6) {
                    List<String> facts = new ArrayList<>();
                    try (WriteTransaction tx = v.begin(Durability.SYNC)) {
                        for (int k = 0, n = 1 + rnd.nextInt(3); k < n; k++) {
                            String key = "r" + round + "/k" + i + "." + k;
                            byte[] value = new byte[1 + rnd.nextInt(rnd.nextInt(8) == 0 ? 3000 : 300)];
                            rnd.nextBytes(value);
                            tx.put(t, key.getBytes(StandardCharsets.UTF_8), value);
                            facts.add("key " + key + " " + value.length + " " + crc(MemorySegment.ofArray(value)));
                        }
                        tx.commit();
                    }
                    for (String f : facts) {
                        ack(out, f);
                    }
                } else if (r < 7) {
                    String key = "r" + round + "/counter";
                    try (WriteTransaction tx = v.begin(Durability.SYNC)) {
                        tx.put(t, key.getBytes(StandardCharsets.UTF_8), Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                        tx.commit();
                    }
                    ack(out, "counter " + key + " " + i);
                } else if (r < 8) {
                    try (WriteTransaction tx = v.begin(rnd.nextBoolean() ? Durability.ASYNC : Durability.NONE)) {
                        tx.put(t, ("r" + round + "/counter").getBytes(StandardCharsets.UTF_8),
                                Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                        tx.put(t, ("r" + round + "/n" + i).getBytes(StandardCharsets.UTF_8), new byte[1 + rnd.nextInt(500)]);
                        tx.commit();
                    }
                } else if (r < 9 || scratch.isEmpty()) {
                    String path = dir + "/s" + i;
                    write(ns, path, rnd, buf);
                    scratch.add(path);
                } else {
                    ns.unlink(scratch.remove(rnd.nextInt(scratch.size())));
                }
            }
        }
    }

    /** Creates {@code path} with 1 to 64 KiB of random bytes (left in {@code buf}) in one to three writes; returns the size. */
    private static int write(Namespace ns, String path, Random rnd, MemorySegment buf) {
        int size = 1 + rnd.nextInt((int) buf.byteSize());
        byte[] bytes = new byte[size];
        rnd.nextBytes(bytes);
        MemorySegment.copy(bytes, 0, buf, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, size);
        ns.create(path, 0644, true);
        try (Handle h = ns.open(path)) {
            int cut = rnd.nextInt(size + 1);
            if (cut > 0) {
                ns.write(h, 0, buf.asSlice(0, cut));
            }
            if (cut < size) {
                ns.write(h, cut, buf.asSlice(cut, size - cut));
            }
        }
        return size;
    }

    static String crc(MemorySegment bytes) {
        CRC32C c = new CRC32C();
        c.update(bytes.asByteBuffer());
        return Long.toHexString(c.getValue());
    }

    private static void ack(PrintStream out, String fact) {
        out.println(ACK + fact);
        out.flush();
    }
}
