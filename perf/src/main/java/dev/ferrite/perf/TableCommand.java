package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import java.util.function.Function;

import dev.ferrite.dir.Durability;
import dev.ferrite.dir.Snapshot;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.TableCursor;
import dev.ferrite.dir.TableStats;
import dev.ferrite.dir.Tables;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.OverlayDevice;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

@Command(name = "table", header = "Lists a volume's tables; gets, puts and scans their keys.",
        description = {
        "Lists the tables of the volume on DEVICE, reads and writes their keys. The",
        "device is mounted as usual (a log left by a crash is recovered): list, get",
        "and scan over an in-memory overlay, so they never write to it; put, delete,",
        "create, drop and rename write, each change durable (SYNC) before the command",
        "ends. Keys and values are given as UTF-8 text, or with --hex as hex digits;",
        "they are printed as text when printable (UTF-8, no control character, not",
        "starting with 0x), else as 0x and hex digits, or with --hex always as hex",
        "digits. Exit status: 0 done, 1 refused (no such table or key, a key or",
        "value too long, a name taken...: nothing changed) or the volume cannot be",
        "read, 2 usage (bad hex among them). A volume in use by another process is",
        "refused.", ""},
        subcommands = {TableCommand.ListTables.class, TableCommand.Get.class, TableCommand.Put.class,
                TableCommand.Delete.class, TableCommand.Scan.class, TableCommand.Create.class, TableCommand.Drop.class,
                TableCommand.Rename.class})
final class TableCommand implements Callable<Integer> {
    private static final VolumeOptions OPTIONS = VolumeOptions.defaults().withCacheBytes(64L << 20);

    @Parameters(index = "0", paramLabel = "DEVICE", description = "file or block device holding a volume")
    Path device;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        throw new ParameterException(spec.commandLine(), "a subcommand is required: list, get, put, delete, scan, create, drop or rename");
    }

    /**
     * What {@code action} makes of the tables of the volume on DEVICE: with {@code write} mounted on the
     * device, unmounted cleanly at the end; else mounted over an in-memory overlay, the device never written.
     */
    private <T> T mount(boolean write, Function<Tables, T> action) {
        if (write) {
            try (BlockDevice dev = VolumeDevices.open(device, DeviceOptions.defaults());
                 Volume v = Volume.open(dev, OPTIONS)) {
                return action.apply(v.tables());
            }
        }
        try (BlockDevice dev = VolumeDevices.open(device, DeviceOptions.defaults().withReadOnly(true));
             OverlayDevice view = OverlayDevice.over(dev);
             Volume v = Volume.open(view, OPTIONS)) {
            return action.apply(v.tables());
        }
    }

    /** What every subcommand has: the table command (DEVICE), -h and the output. */
    abstract static class Sub implements Callable<Integer> {
        @ParentCommand
        TableCommand table;

        @Mixin
        HelpOption help;

        @Spec
        CommandSpec spec;

        PrintWriter out() {
            return spec.commandLine().getOut();
        }

        /** Changes the tables through {@code change} ({@link #mount} for writing). */
        void change(Consumer<Tables> change) {
            table.mount(true, tables -> {
                change.accept(tables);
                return null;
            });
        }
    }

    /** A subcommand on the keys of TABLE: --hex, and how keys and values are read and printed. */
    abstract static class Keyed extends Sub {
        @Parameters(index = "0", paramLabel = "TABLE")
        String name;

        @Option(names = "--hex", description = "keys and values given and printed as hex digits (given: 0x before them allowed)")
        boolean hex;

        byte[] bytes(String text, String what) {
            byte[] b = TableText.parse(text, hex);
            if (b == null) {
                throw new ParameterException(spec.commandLine(), what + " '" + text + "' is not hex (--hex: two digits 0-9a-f per byte)");
            }
            return b;
        }

        String text(byte[] b) {
            return TableText.format(b, hex);
        }

        /** What {@code action} makes of TABLE ({@link #mount}); a write made through it is durable when it returns (SYNC). */
        <T> T onTable(boolean write, Function<Table, T> action) {
            return table.mount(write, tables -> {
                try (Table t = tables.open(name)) {
                    return action.apply(t.withDurability(Durability.SYNC));
                }
            });
        }

        /** Reports that {@code key} is absent from TABLE; the exit status. */
        int noKey(byte[] key) {
            spec.commandLine().getErr().println("ferrite: table '" + name + "' has no key " + TableText.quote(key, hex));
            spec.commandLine().getErr().flush();
            return 1;
        }
    }

    /** A subcommand on one KEY of TABLE. */
    abstract static class OneKey extends Keyed {
        @Parameters(index = "1", paramLabel = "KEY")
        String key;

        /** A usage error if {@code file}, given with {@code option}, is DEVICE itself (by any spelling). */
        void refuseDevice(String option, Path file, String why) throws IOException {
            if (Files.exists(file) && Files.isSameFile(file, table.device)) {
                throw new ParameterException(spec.commandLine(), option + " " + file + " is DEVICE itself: " + why);
            }
        }
    }

    @Command(name = "list", header = "Lists the tables, with their sizes.",
            description = {"Lists the tables: inode, keys, tree height, bytes, extent values and blocks.",
            "By name; the keys are estimated from the tree's shape; the bytes are the",
            "device space each holds (its tree and the blocks set aside for its growth);",
            "EXTENTS counts its medium values kept in data extents (a scan of the table),",
            "EXT-BLOCKS the device blocks they take, beside the bytes.",
            "A table whose tree cannot be read is named on stderr, exit status 1.", ""})
    static final class ListTables extends Sub {
        @Override
        public Integer call() {
            List<String> damaged = new ArrayList<>();
            List<TableStats> all = table.mount(false, tables -> {
                List<TableStats> stats = new ArrayList<>();
                for (String name : tables.list().stream().sorted().toList()) {
                    try (Table t = tables.open(name)) {
                        stats.add(t.stats());
                    } catch (CorruptionException e) { // the others are still listed
                        damaged.add("ferrite: table '" + name + "' cannot be read: " + e.getMessage());
                    }
                }
                return stats;
            });
            PrintWriter out = out();
            if (all.isEmpty() && damaged.isEmpty()) {
                out.println("no tables");
            } else if (!all.isEmpty()) {
                int w = Math.max(4, all.stream().mapToInt(s -> s.name().length()).max().orElse(0));
                String row = "%-" + w + "s  %10s  %12s  %6s  %14s  %10s  %10s%n";
                out.printf(row, "NAME", "INODE", "KEYS(EST)", "HEIGHT", "BYTES", "EXTENTS", "EXT-BLOCKS");
                for (TableStats s : all) {
                    out.printf(row, s.name(), s.ino(), s.keysEstimate(), s.height(), s.bytes(), s.extentValues(), s.extentBlocks());
                }
            }
            out.flush();
            damaged.forEach(spec.commandLine().getErr()::println);
            spec.commandLine().getErr().flush();
            return damaged.isEmpty() ? 0 : 1;
        }
    }

    @Command(name = "get", description = {"Prints the value of KEY in TABLE; exit status 1 if it has none.",
            "With --out FILE it writes the value's bytes to FILE instead, as they are,",
            "read a MiB at a time from one snapshot (a value of any size).", ""})
    static final class Get extends OneKey {
        /** How much of a value {@code --out} reads and writes at a time. */
        private static final int PIECE = 1 << 20;

        @Option(names = "--out", paramLabel = "FILE", description = "write the value's bytes to FILE (made or replaced) instead of printing it")
        Path outFile;

        @Override
        public Integer call() throws IOException {
            byte[] k = bytes(key, "KEY");
            if (outFile != null) {
                refuseDevice("--out", outFile, "writing the value there would destroy the volume");
                try {
                    return table.mount(false, tables -> {
                        try (Table t = tables.open(name); Snapshot s = tables.snapshot()) {
                            long length = s.valueLength(t, k);
                            return length < 0 ? noKey(k) : writeOut(s, t, k, length);
                        }
                    });
                } catch (UncheckedIOException e) {
                    throw e.getCause(); // the file's own error, named by its type and path
                }
            }
            byte[] v = onTable(false, t -> t.get(k));
            if (v == null) {
                return noKey(k);
            }
            out().println(text(v));
            out().flush();
            return 0;
        }

        /** Writes {@code length} bytes of {@code key}'s value at snapshot {@code s} to --out; the exit status. */
        private int writeOut(Snapshot s, Table t, byte[] key, long length) {
            byte[] buf = new byte[(int) Math.min(PIECE, Math.max(1, length))];
            MemorySegment piece = MemorySegment.ofArray(buf);
            try (FileChannel ch = FileChannel.open(outFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING)) {
                for (long off = 0; off < length; ) {
                    s.read(t, key, off, piece);
                    ByteBuffer bb = ByteBuffer.wrap(buf, 0, (int) Math.min(buf.length, length - off));
                    while (bb.hasRemaining()) {
                        ch.write(bb);
                    }
                    off += bb.limit();
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return 0;
        }
    }

    @Command(name = "put", description = {"Sets KEY in TABLE to VALUE (durable when the command ends).",
            "With --value-file FILE the value is FILE's bytes, as they are (up to 1 GiB).", ""})
    static final class Put extends OneKey {
        @Parameters(index = "2", paramLabel = "VALUE", arity = "0..1")
        String value;

        @Option(names = "--value-file", paramLabel = "FILE", description = "the value is FILE's bytes, instead of VALUE")
        Path valueFile;

        @Override
        public Integer call() throws IOException {
            byte[] k = bytes(key, "KEY");
            if ((value == null) == (valueFile == null)) {
                throw new ParameterException(spec.commandLine(), value == null ? "VALUE or --value-file FILE is required"
                        : "give VALUE or --value-file FILE, not both");
            }
            if (valueFile == null) {
                byte[] v = bytes(value, "VALUE");
                onTable(true, t -> {
                    t.put(k, v);
                    return null;
                });
                return 0;
            }
            refuseDevice("--value-file", valueFile, "the volume would be writing the bytes the value is read from");
            // mapped, not read onto the heap (shared: the put may hand it to the volume's threads); opened before the
            // volume is mounted, so a file that cannot be read changes nothing
            try (Arena arena = Arena.ofShared(); FileChannel ch = FileChannel.open(valueFile, StandardOpenOption.READ)) {
                MemorySegment v = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
                onTable(true, t -> {
                    t.put(MemorySegment.ofArray(k), v);
                    return null;
                });
            }
            return 0;
        }
    }

    @Command(name = "delete", description = {"Deletes KEY from TABLE; exit status 1 if it has none.", ""})
    static final class Delete extends OneKey {
        @Override
        public Integer call() {
            byte[] k = bytes(key, "KEY");
            return onTable(true, t -> t.delete(k)) ? 0 : noKey(k);
        }
    }

    @Command(name = "scan", description = {
            "Prints TABLE's keys and values in key order.",
            "A line each: KEY, a tab, VALUE. --from K starts at K, --to K stops before",
            "K; with --reverse the scan goes down, from K (at most) down to just above",
            "--to's K. --prefix P: only the keys starting with P. --lengths prints each",
            "value's length in bytes instead of the value.", ""})
    static final class Scan extends Keyed {
        @Option(names = "--from", paramLabel = "K", description = "the first key (the last with --reverse), inclusive")
        String from;

        @Option(names = "--to", paramLabel = "K", description = "the key the scan stops before, exclusive")
        String to;

        @Option(names = "--prefix", paramLabel = "P", description = "only keys starting with P (not with --from or --to)")
        String prefix;

        @Option(names = "--reverse", description = "from the largest key down")
        boolean reverse;

        @Option(names = "--limit", paramLabel = "N", description = "print at most N keys")
        Long limit;

        @Option(names = "--lengths", description = "print each value's length in bytes, not the value (which is not read)")
        boolean lengths;

        @Override
        public Integer call() {
            if (prefix != null && (from != null || to != null)) {
                throw new ParameterException(spec.commandLine(), "--prefix cannot be combined with --from or --to");
            }
            if (limit != null && limit < 1) {
                throw new ParameterException(spec.commandLine(), "--limit " + limit + " is less than 1");
            }
            byte[] f = from == null ? null : bytes(from, "--from");
            byte[] t = to == null ? null : bytes(to, "--to");
            byte[] p = prefix == null ? null : bytes(prefix, "--prefix");
            long most = limit == null ? Long.MAX_VALUE : limit;
            PrintWriter out = out();
            onTable(false, tbl -> {
                try (TableCursor c = p != null ? tbl.prefix(p, reverse) : tbl.cursor(f, t, reverse)) {
                    for (long n = 0; n < most && c.next(); n++) {
                        out.print(text(c.key()));
                        out.print('\t');
                        out.println(lengths ? Long.toString(c.value(MemorySegment.NULL)) : text(c.value()));
                    }
                }
                return null;
            });
            out.flush();
            return 0;
        }
    }

    @Command(name = "create", description = {"Creates an empty table. The volume then needs code that knows tables.", ""})
    static final class Create extends Sub {
        @Parameters(index = "0", paramLabel = "TABLE")
        String name;

        @Override
        public Integer call() {
            change(tables -> tables.create(name).close());
            return 0;
        }
    }

    @Command(name = "drop", description = {"Drops a table and frees its space.", ""})
    static final class Drop extends Sub {
        @Parameters(index = "0", paramLabel = "TABLE")
        String name;

        @Override
        public Integer call() {
            change(tables -> tables.drop(name));
            return 0;
        }
    }

    @Command(name = "rename", description = {"Renames table FROM to TO, which must not exist.", ""})
    static final class Rename extends Sub {
        @Parameters(index = "0", paramLabel = "FROM")
        String from;

        @Parameters(index = "1", paramLabel = "TO")
        String to;

        @Override
        public Integer call() {
            change(tables -> tables.rename(from, to));
            return 0;
        }
    }
}
