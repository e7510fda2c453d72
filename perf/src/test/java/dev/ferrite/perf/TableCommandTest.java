package dev.ferrite.perf;

import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ferrite.dir.Durability;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.dir.WriteTransaction;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code ferrite table}, and the tables in {@code ferrite check} and {@code ferrite dump}. */
class TableCommandTest extends CommandTest {
    @TempDir
    Path dir;

    private Path img;

    @BeforeEach
    void format() {
        img = dir.resolve("v.img");
        assertEquals(0, run("format", img.toString(), "--size", "64M", "--ags", "2"), err.toString());
    }

    /** Runs {@code table DEVICE args...}, expecting exit 0; returns what it printed. */
    private String table(String... args) {
        String[] all = new String[args.length + 2];
        all[0] = "table";
        all[1] = img.toString();
        System.arraycopy(args, 0, all, 2, args.length);
        assertEquals(0, run(all), String.join(" ", all) + ": " + out + err);
        return out.toString();
    }

    /** Runs {@code table DEVICE args...}, expecting exit {@code status} and a message on stderr containing {@code message}. */
    private void refused(int status, String message, String... args) {
        String[] all = new String[args.length + 2];
        all[0] = "table";
        all[1] = img.toString();
        System.arraycopy(args, 0, all, 2, args.length);
        assertEquals(status, run(all), String.join(" ", all) + ": " + out + err);
        assertTrue(err.toString().contains(message), err.toString());
        assertEquals(1, err.toString().lines().count(), "one line, no stack trace: " + err);
    }

    @Test
    void createPutGetScanRenameAndDrop() throws Exception {
        assertEquals("no tables\n", table("list"));
        table("create", "users");
        table("create", "orders");
        for (String k : new String[] {"user:3", "user:1", "user:2", "admin:1"}) {
            table("put", "users", k, "value of " + k);
        }
        table("put", "users", "user:2", "changed");
        byte[] before = Files.readAllBytes(img);
        assertEquals("value of user:1\n", table("get", "users", "user:1"));
        assertEquals("changed\n", table("get", "users", "user:2"));
        assertEquals("admin:1\tvalue of admin:1\nuser:1\tvalue of user:1\nuser:2\tchanged\nuser:3\tvalue of user:3\n",
                table("scan", "users"));
        assertEquals("user:1\tvalue of user:1\nuser:2\tchanged\n", table("scan", "users", "--from", "user:1", "--to", "user:3"));
        assertEquals("user:3\tvalue of user:3\nuser:2\tchanged\n", table("scan", "users", "--prefix", "user:", "--reverse", "--limit", "2"));
        assertEquals("user:2\tchanged\nuser:1\tvalue of user:1\n", table("scan", "users", "--reverse", "--from", "user:2", "--to", "admin:1"));
        assertEquals("", table("scan", "orders"));
        String list = table("list");
        assertTrue(Pattern.compile("(?m)^orders +\\d+ +0 +1 +\\d+ +0 +0$").matcher(list).find(), list);
        assertTrue(Pattern.compile("(?m)^users +\\d+ +4 +1 +\\d+ +0 +0$").matcher(list).find(), list);
        assertTrue(list.indexOf("orders") < list.indexOf("users") && list.startsWith("NAME"), list);
        assertArrayEquals(before, Files.readAllBytes(img), "list, get and scan wrote to the device");

        table("delete", "users", "admin:1");
        refused(1, "table 'users' has no key 'admin:1'", "get", "users", "admin:1");
        table("rename", "users", "people");
        assertEquals("changed\n", table("get", "people", "user:2"));
        table("drop", "orders");
        assertEquals(1, table("list").lines().filter(l -> !l.startsWith("NAME")).count(), out.toString());
        assertEquals(0, run("check", img.toString()), out + " " + err);
        assertTrue(out.toString().contains("1 tables"), out.toString());
    }

    /** A volume left by a crash: the reads recover it in memory only, a write recovers it on the device. */
    @Test
    void readsRecoverACrashLeftLogInMemoryAndWritesOnTheDevice() throws Exception {
        Path crashed = dir.resolve("crashed.img");
        try (BlockDevice dev = VolumeDevices.open(img, DeviceOptions.defaults());
             Volume v = Volume.open(dev, VolumeOptions.defaults());
             Table t = v.tables().create("users")) {
            t.put(b("user:1"), b("Ada")); // SYNC: in the log, maybe not yet in its home blocks
            Files.copy(img, crashed); // as if the power went now
        }
        img = crashed;
        byte[] before = Files.readAllBytes(crashed);
        assertEquals("Ada\n", table("get", "users", "user:1"));
        assertEquals("user:1\tAda\n", table("scan", "users"));
        assertArrayEquals(before, Files.readAllBytes(crashed), "a read wrote to the device");
        table("put", "users", "user:2", "Grace");
        assertEquals(0, run("check", crashed.toString()), out + " " + err);
        assertEquals("user:1\tAda\nuser:2\tGrace\n", table("scan", "users"));
    }

    /**
     * {@code put --value-file} stores a file's bytes as a value and {@code get --out} writes a value's bytes
     * to a file, a piece at a time: a value of several MiB (a blob), a medium and an empty one round-trip, and
     * {@code scan --lengths} shows their lengths; a missing source, an unwritable destination, the volume's
     * own image as the destination (by another spelling too), an absent key and VALUE given twice or not at
     * all are refused.
     */
    @Test
    void valuesComeFromAndGoToFiles() throws Exception {
        table("create", "files");
        byte[] big = new byte[(3 << 20) + 12_345]; // four pieces of --out's MiB
        new Random(7).nextBytes(big);
        Path in = dir.resolve("in.bin"), out = dir.resolve("out.bin");
        Files.write(in, big);
        assertEquals("", table("put", "files", "big", "--value-file", in.toString()));
        Files.write(out, new byte[5 << 20]); // longer than the value: replaced, not overwritten in part
        assertEquals("", table("get", "files", "big", "--out", out.toString()));
        assertArrayEquals(big, Files.readAllBytes(out));
        byte[] medium = Arrays.copyOf(big, 20_000); // kept in a data extent, not a blob
        Files.write(in, medium);
        table("put", "files", "medium", "--value-file", in.toString());
        table("get", "files", "medium", "--out", out.toString());
        assertArrayEquals(medium, Files.readAllBytes(out));
        Files.write(in, new byte[0]);
        table("put", "files", "--hex", "00", "--value-file", in.toString());
        assertEquals("\n", table("get", "files", "--hex", "00"));
        table("get", "files", "--hex", "00", "--out", out.toString());
        assertEquals(0, Files.size(out));

        assertEquals("0x00\t0\nbig\t" + big.length + "\nmedium\t20000\n", table("scan", "files", "--lengths"));
        assertEquals("medium\t20000\n", table("scan", "files", "--lengths", "--reverse", "--limit", "1"));

        refused(2, "VALUE or --value-file FILE is required", "put", "files", "k");
        refused(2, "give VALUE or --value-file FILE, not both", "put", "files", "k", "v", "--value-file", in.toString());
        refused(1, "NoSuchFileException", "put", "files", "k", "--value-file", dir.resolve("missing.bin").toString());
        Path never = dir.resolve("never.bin");
        refused(1, "table 'files' has no key 'absent'", "get", "files", "absent", "--out", never.toString());
        assertFalse(Files.exists(never), "no file for an absent key");
        refused(1, "NoSuchFileException", "get", "files", "big", "--out", dir.resolve("no/such/dir.bin").toString());
        refused(1, "table 'files' has no key 'k'", "get", "files", "k"); // no refused put left it
        byte[] volume = Files.readAllBytes(img);
        refused(2, "is DEVICE itself", "get", "files", "big", "--out", img.toString());
        refused(2, "is DEVICE itself", "get", "files", "big", "--out", dir.resolve(".").resolve(img.getFileName()).toString());
        refused(2, "is DEVICE itself", "put", "files", "self", "--value-file", dir.resolve(".").resolve(img.getFileName()).toString());
        assertArrayEquals(volume, Files.readAllBytes(img), "--out or --value-file naming the volume's own image left it as it was");
    }

    @Test
    void hexInAndOutAndValuesThatAreNotPrintable() {
        table("create", "bin");
        table("put", "bin", "--hex", "00ff", "0x0001");
        table("put", "bin", "--hex", "62696e", "0001"); // "bin"
        table("put", "bin", "tab", "a\tb");
        table("put", "bin", "looks-hex", "0x41");
        table("put", "bin", "empty", "");
        assertEquals("0001\n", table("get", "bin", "--hex", "00FF"));
        assertEquals("0x0001\n", table("get", "bin", "bin"));
        assertEquals("30783431\n", table("get", "bin", "--hex", "0x6c6f6f6b732d686578")); // "looks-hex": 0x before the digits
        assertEquals("0x00ff\t0x0001\nbin\t0x0001\nempty\t\nlooks-hex\t0x30783431\ntab\t0x610962\n", table("scan", "bin"));
        assertEquals("00ff\t0001\n", table("scan", "bin", "--hex", "--to", "01"));
    }

    @Test
    void badInputIsRefusedInOneLineAndChangesNothing() throws Exception {
        table("create", "users");
        table("put", "users", "k", "v");
        byte[] before = Files.readAllBytes(img);
        refused(1, "no table 'nope'", "get", "nope", "k");
        refused(1, "table 'users' has no key 'absent'", "get", "users", "absent");
        refused(1, "table 'users' has no key 0x00", "get", "users", "--hex", "00");
        refused(2, "KEY 'zz' is not hex", "get", "users", "--hex", "zz");
        refused(2, "VALUE '123' is not hex", "put", "users", "--hex", "01", "123");
        refused(2, "--prefix cannot be combined with --from or --to", "scan", "users", "--prefix", "a", "--from", "b");
        refused(2, "--limit 0 is less than 1", "scan", "users", "--limit", "0");
        refused(2, "a subcommand is required");
        assertArrayEquals(before, Files.readAllBytes(img), "a refused read or usage error wrote to the device");

        // the writes mount the volume (its superblock changes), then are refused, their tables unchanged
        refused(1, "no table 'nope'", "put", "nope", "k", "v");
        refused(1, "no table 'nope'", "drop", "nope");
        refused(1, "no table 'nope'", "rename", "nope", "other");
        refused(1, "table 'users' has no key 'absent'", "delete", "users", "absent");
        refused(1, "a key of 1025 bytes; keys are 1 to 1024 bytes", "put", "users", "x".repeat(1025), "v");
        refused(1, "a key of 0 bytes", "put", "users", "", "v");
        refused(1, "table 'users' exists", "create", "users");
        table("create", "other");
        refused(1, "table 'other' exists", "rename", "users", "other");
        refused(1, "a/b", "create", "a/b");
        assertEquals("k\tv\n", table("scan", "users"), "a refused write changed the table");
        String list = table("list");
        assertEquals(3, list.lines().count(), list);
        assertEquals(1, run("table", dir.resolve("missing.img").toString(), "list"));
        assertEquals(1, err.toString().lines().count(), err.toString());
    }

    @Test
    void dumpShowsTheCatalogAndEachTable() throws Exception {
        assertEquals(0, run("dump", img.toString(), "--tables"), err.toString());
        assertTrue(out.toString().contains("no table catalog"), out.toString());
        assertEquals(0, run("dump", img.toString()), err.toString());
        Matcher groups = Pattern.compile("allocation groups of \\d+ blocks from block (\\d+)").matcher(out.toString());
        assertTrue(groups.find(), out.toString());
        String agi = Long.toString(Long.parseLong(groups.group(1)) + 1); // group 0's inode header
        assertEquals(0, run("dump", img.toString(), "--block", agi), err.toString());
        assertTrue(out.toString().contains("(AGI)") && out.toString().contains("no table catalog"), out.toString());
        long ino = fill(2000);
        assertEquals(0, run("dump", img.toString(), "--tables"), err.toString());
        String dump = out.toString();
        Matcher catalog = Pattern.compile("table catalog: inode (\\d+), 2 tables:").matcher(dump);
        assertTrue(catalog.find(), dump);
        assertEquals(0, run("dump", img.toString(), "--block", agi), err.toString());
        assertTrue(out.toString().contains("table catalog inode " + catalog.group(1)), out.toString());
        assertTrue(Pattern.compile("  orders: inode " + ino + ", height 2, ~\\d+ keys, \\d+ blocks, 0 extent values in 0 blocks, "
                + "tree header block \\d+").matcher(dump).find(), dump);
        assertTrue(Pattern.compile("  users: inode \\d+, height 1, ~5 keys, \\d+ blocks, 2 extent values in 3 blocks, ").matcher(dump).find(), dump);
        assertTrue(Pattern.compile("(?m)^users +\\d+ +5 +1 +\\d+ +2 +3$").matcher(table("list")).find(), out.toString());
        assertEquals(0, run("dump", img.toString(), "--inode", Long.toString(ino)), err.toString());
        assertTrue(out.toString().contains("type table") && out.toString().contains("tree blocks"), out.toString());
    }

    @Test
    void checkCountsTheTablesAndNamesADamagedOneAndListAndDumpShowTheOthers() throws Exception {
        long ino = fill(2000);
        assertEquals(0, run("check", img.toString()), out + " " + err);
        assertTrue(out.toString().contains("clean") && out.toString().contains(", 2 tables"), out.toString());
        assertEquals(0, run("dump", img.toString(), "--inode", Long.toString(ino)), err.toString());
        Matcher m = Pattern.compile("tree blocks.*: \\[(\\d+), (\\d+), (\\d+)").matcher(out.toString());
        assertTrue(m.find(), out.toString());
        long leaf = Long.parseLong(m.group(3)); // header, root, first leaf
        flipAByte(leaf);
        assertEquals(1, run("check", img.toString()), out + " " + err);
        String report = out.toString();
        assertTrue(report.lines().anyMatch(l -> l.contains("BTREE block " + leaf) && l.contains("'tables:orders'")), report);
        assertTrue(report.contains(", 2 tables"), report);
        assertFalse(report.contains("cannot be checked"), report);

        long root = Long.parseLong(m.group(2)); // unreadable: the tree cannot even be walked
        flipAByte(root);
        assertEquals(1, run("check", img.toString()), out + " " + err);
        assertTrue(out.toString().lines().anyMatch(l -> l.contains("BTREE block " + root) && l.contains("'tables:orders'")), out.toString());
        assertEquals(1, run("table", img.toString(), "list"));
        assertTrue(out.toString().contains("users") && !out.toString().contains("orders"), out.toString());
        assertTrue(err.toString().startsWith("ferrite: table 'orders' cannot be read: B-tree node at block " + root), err.toString());
        assertEquals(0, run("dump", img.toString(), "--tables"), err.toString());
        assertTrue(out.toString().contains("  orders: inode " + ino + ", cannot be read: "), out.toString());
    }

    /** Flips a bit in the middle of block {@code block} of the image, leaving its checksum wrong. */
    private void flipAByte(long block) throws Exception {
        try (RandomAccessFile f = new RandomAccessFile(img.toFile(), "rw")) {
            f.seek(block * 4096 + 200);
            int b = f.read();
            f.seek(block * 4096 + 200);
            f.write(b ^ 0x40);
        }
    }

    /** Tables "users" (3 keys and 2 extent values) and "orders" ({@code keys} keys) written through the API; returns the inode of "orders". */
    private long fill(int keys) {
        try (BlockDevice dev = VolumeDevices.open(img, DeviceOptions.defaults());
             Volume v = Volume.open(dev, VolumeOptions.defaults())) {
            try (Table users = v.tables().create("users"); Table orders = v.tables().create("orders");
                 WriteTransaction tx = v.begin(Durability.SYNC)) {
                for (int i = 0; i < 3; i++) {
                    tx.put(users, b("user:" + i), b("user " + i));
                }
                tx.put(users, b("photo:1"), new byte[5000]); // medium values, in data extents: 2 blocks
                tx.put(users, b("photo:2"), new byte[4096]); // and 1
                for (int i = 0; i < keys; i++) {
                    tx.put(orders, b("order:" + i), b("the order numbered " + i));
                }
                tx.commit();
                return orders.stats().ino();
            }
        }
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
