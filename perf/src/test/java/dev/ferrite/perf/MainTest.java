package dev.ferrite.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ferrite.perf.bench.DeviceBench;
import dev.ferrite.perf.bench.JsonReader;
import dev.ferrite.perf.bench.KvBench;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import org.junit.jupiter.api.io.TempDir;

class MainTest {
    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    private int run(String... args) {
        return Main.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(args);
    }

    /**
     * The default suite runs each step through its own command, goes on past a step that fails and one it
     * skips, and ends with the summary and one results.json holding every step's results.
     */
    @Test
    void theSuiteRunsEveryStepSummarizesAndWritesOneResultsFile(@TempDir Path dir) throws Exception {
        picocli.CommandLine bench = Main.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err))
                .getSubcommands().get("bench");
        List<BenchSuite.Step> steps = List.of(
                new BenchSuite.Step("a failing step", List.of("dbench", "--seconds", "0")),
                new BenchSuite.Step("a step this machine cannot run", List.of("appends"), "no tool here"),
                new BenchSuite.Step("the device", List.of("device", "--size", "16M", "--seconds", "0.05", "--no-fio")));
        StringWriter printed = new StringWriter();
        assertEquals(1, BenchSuite.run(bench, steps, dir.resolve("out"), null, new PrintWriter(printed)));
        String text = printed.toString() + err;
        assertTrue(text.contains("=== 3/3  the device: ./ferrite bench device --size 16M --seconds 0.05 --no-fio"), text);
        assertTrue(text.contains("=== summary"), text);
        assertTrue(text.contains("failed: dbench (exit 2)"), text);
        assertTrue(text.contains("skipped: appends (no tool here)"), text);
        assertFalse(Files.exists(dir.resolve("out/02-appends.json")), "a skipped step ran");
        Object json = JsonReader.parse(Files.readString(dir.resolve("out/results.json")));
        List<?> results = (List<?>) JsonReader.at(json, "results");
        assertEquals(5, results.size(), "the device workload's five phases: " + results);
        assertEquals("device", JsonReader.at(json, "results", 0, "workload"));
    }

    /** A suite whose only missing piece is a step it skips succeeds: a fresh machine without dbench. */
    @Test
    void aSkippedStepFailsNothing(@TempDir Path dir) {
        picocli.CommandLine bench = Main.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err))
                .getSubcommands().get("bench");
        StringWriter printed = new StringWriter();
        assertEquals(0, BenchSuite.run(bench, List.of(new BenchSuite.Step("dbench", List.of("dbench"), "no loadfile")),
                dir.resolve("out"), null, new PrintWriter(printed)));
        assertTrue(printed.toString().contains("skipped: dbench (no loadfile)"), printed.toString());
        boolean loadfile = Files.isReadable(dev.ferrite.perf.bench.BaselineTools.DBENCH_LOADFILE);
        BenchSuite.Step suites = BenchSuite.steps(false, true, null).getLast();
        assertEquals("dbench", suites.command());
        assertEquals(loadfile, suites.skip() == null, "the suite's dbench step skips exactly when the loadfile is missing: " + suites);
    }

    /** bench report: the page of the last run, and every rate of it beside the first run's. */
    @Test
    void benchReportComparesRunsAndWritesThePage(@TempDir Path dir) throws Exception {
        dev.ferrite.perf.bench.Machine machine = dev.ferrite.perf.bench.Machine.collect(null);
        Path before = dir.resolve("before.json"), after = dir.resolve("after.json");
        dev.ferrite.perf.bench.ResultJson.write(before, machine, List.of(
                new dev.ferrite.perf.bench.Result("kv", "get", "ferrite", 1, 10, 100, "ops/s", 1, 2, 2.5, 3, 1)));
        dev.ferrite.perf.bench.ResultJson.write(after, machine, List.of(
                new dev.ferrite.perf.bench.Result("kv", "get", "ferrite", 1, 10, 150, "ops/s", 1, 2, 2.5, 3, 1)));
        Path page = dir.resolve("page.html");
        assertEquals(0, run("bench", "report", before.toString(), after.toString(), "--out", page.toString()));
        assertTrue(out.toString().lines().anyMatch(l -> l.startsWith("kv") && l.endsWith("1.50")), out.toString());
        assertTrue(Files.readString(page).contains("<svg"));
        assertEquals(2, run("bench", "report", dir.resolve("missing.json").toString()));
    }

    /** --jfr records the run for JDK Mission Control, whatever bench command it is given to. */
    @Test
    void jfrRecordsTheRun(@TempDir Path dir) throws Exception {
        Path jfr = dir.resolve("run.jfr");
        assertEquals(0, run("bench", "device", "--size", "16M", "--seconds", "0.05", "--no-fio", "--jfr", jfr.toString()));
        assertTrue(out.toString().contains("recording: " + jfr.toAbsolutePath()), out.toString());
        assertTrue(jdk.jfr.consumer.RecordingFile.readAllEvents(jfr).stream()
                .anyMatch(e -> e.getEventType().getName().equals("jdk.JVMInformation")), "not a recording of this JVM: " + jfr);
    }

    /** The suite on a real device: only with the confirmation, and then every step runs there. */
    @Test
    void theSuiteRunsOnADeviceOnlyWhenToldItMayDestroyIt(@TempDir Path dir) {
        assertEquals(2, run("bench", "--device", dir.resolve("dev").toString()));
        assertTrue(err.toString().contains("add --yes-destroy-data"), err.toString());
        for (BenchSuite.Step s : BenchSuite.steps(false, true, Path.of("/dev/nvme9n1"))) {
            assertTrue(s.args().containsAll(List.of("--device", "/dev/nvme9n1", "--force")), s.toString());
        }
        for (BenchSuite.Step s : BenchSuite.steps(false, true, null)) {
            assertFalse(s.args().contains("--device"), s.toString());
        }
    }

    @Test
    void helpListsTheCommands() {
        assertEquals(0, run("--help"));
        String help = out.toString();
        assertTrue(help.contains("bench "), help);
        assertTrue(help.contains("jmh "), help);
        assertTrue(help.contains("./ferrite test [maven args]"), help);
        assertTrue(help.contains("./ferrite build"), help);
    }

    /** picocli formats descriptions: a bare '%' in one makes it print a warning and the raw text. */
    @Test
    void everyCommandsHelpFormatsWithoutWarnings() {
        PrintStream stderr = System.err;
        ByteArrayOutputStream warnings = new ByteArrayOutputStream();
        System.setErr(new PrintStream(warnings, true, StandardCharsets.UTF_8));
        List<String> helped = new ArrayList<>();
        try {
            help(Main.commandLine(), helped);
        } finally {
            System.setErr(stderr);
        }
        assertTrue(helped.size() > 10 && helped.contains("ferrite bench kv"), helped.toString());
        assertEquals("", warnings.toString(StandardCharsets.UTF_8), "while rendering the help of " + helped);
    }

    /**
     * Every command's help reads whole. A command list shows each subcommand's header, else its
     * description's first line: it must be a whole sentence on one line. And picocli wraps a description
     * line wider than the usage (80 columns) where it falls, the line after it starting afresh, so a
     * paragraph laid out by hand turns ragged: every line must fit, but a paragraph's last, which picocli may wrap.
     */
    @Test
    void everyCommandsHelpReadsWhole() {
        List<String> problems = new ArrayList<>();
        helpProblems(Main.commandLine(), problems);
        assertEquals(List.of(), problems);
    }

    private static void helpProblems(CommandLine cmd, List<String> problems) {
        int width = cmd.getCommandSpec().usageMessage().width();
        String[] description = cmd.getCommandSpec().usageMessage().description();
        for (int i = 0; i + 1 < description.length; i++) {
            String shown = String.format(description[i]);
            if (shown.length() > width && !description[i + 1].isEmpty()) {
                problems.add(cmd.getCommandSpec().qualifiedName() + ": a description line of " + shown.length() + " columns: " + shown);
            }
        }
        List<String> lines = cmd.getUsageMessage().lines().toList();
        for (var e : cmd.getSubcommands().entrySet()) {
            var usage = e.getValue().getCommandSpec().usageMessage();
            String summary = usage.header().length > 0 ? usage.header()[0] : usage.description().length > 0 ? usage.description()[0] : "";
            boolean oneLine = lines.stream().anyMatch(l -> l.matches("  " + e.getKey() + " +\\Q" + summary + "\\E"));
            if (!summary.endsWith(".") || !oneLine) {
                problems.add(e.getValue().getCommandSpec().qualifiedName() + ": listed as '" + summary + "', wrapped or cut mid-sentence");
            }
            helpProblems(e.getValue(), problems);
        }
    }

    private static void help(CommandLine cmd, List<String> helped) {
        cmd.getUsageMessage();
        helped.add(cmd.getCommandSpec().qualifiedName());
        for (CommandLine sub : cmd.getSubcommands().values()) {
            if (!helped.contains(sub.getCommandSpec().qualifiedName())) {
                help(sub, helped);
            }
        }
    }

    @Test
    void badSizeIsAUsageErrorThatSaysWhatASizeIs() {
        assertEquals(2, run("bench", "device", "--size", "12Q"));
        assertEquals("ferrite bench device: Invalid value for option '--size': '12Q' is not a size: give bytes,"
                + " or a whole number with K, M, G or T (powers of 1024), e.g. 16M or 1G"
                + " (see 'ferrite bench device --help')\n", err.toString());
        assertEquals("", out.toString());
    }

    @Test
    void metaWorkloadsRefuseAnUnknownApiBeforeMakingAnything() {
        for (String workload : List.of("meta", "dirscale")) {
            out.getBuffer().setLength(0);
            err.getBuffer().setLength(0);
            assertEquals(2, run("bench", workload, "--api", "fd"));
            assertTrue(err.toString().startsWith("ferrite bench " + workload + ": --api fd: give handle or path"), err.toString());
            assertEquals("", out.toString());
        }
    }

    @Test
    void aStallThresholdOutOfRangeIsRefusedBeforeAnythingIsMade() {
        for (String workload : List.of("meta", "kv", "dbench")) {
            out.getBuffer().setLength(0);
            err.getBuffer().setLength(0);
            assertEquals(2, run("bench", workload, "--stalls", "0"));
            assertTrue(err.toString().startsWith("ferrite bench " + workload + ": --stalls 0.0: give 0 < MS <= 60000"), err.toString());
            assertEquals("", out.toString());
        }
    }

    @Test
    void sizeMustBeWholeMebibytes() {
        assertEquals(2, run("bench", "device", "--size", "1500K", "--no-fio"));
        assertTrue(err.toString().startsWith("ferrite bench device: --size 1500 KiB is not a whole number of MiB"), err.toString());
    }

    @Test
    void randwriteRefusesWhatItCannotRunBeforeMakingAnyDevice() {
        assertEquals(2, run("bench", "randwrite", "--bs", "6K"));
        assertTrue(err.toString().startsWith("ferrite bench randwrite: --bs 6 KiB: give a multiple of 4 KiB up to 1 MiB"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, run("bench", "randwrite", "--file-size", "1500K"));
        assertTrue(err.toString().startsWith("ferrite bench randwrite: --file-size 1500 KiB: give a whole number of MiB"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, run("bench", "randwrite", "--targets", "ferrite,zfs"));
        assertTrue(err.toString().startsWith("ferrite bench randwrite: --targets: 'zfs' is not one of ferrite, fuse, xfs, ext4, raw"), err.toString());
        assertEquals("", out.toString());
    }

    @Test
    void dbenchRefusesWhatItCannotRunBeforeMakingAnyDevice(@TempDir Path dir) throws Exception {
        assertEquals(2, run("bench", "dbench", "--clients", "1,0"));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --clients [1, 0]: each count must be 1..128"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, run("bench", "dbench", "--targets", "ferrite,zfs"));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --targets: 'zfs' is not one of ferrite, fuse, xfs, ext4, btrfs"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, run("bench", "dbench", "--seconds", "0"));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --seconds 0: give 1 to 86400"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, run("bench", "dbench", "--rounds", "0"));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --rounds 0: give 1 to 100"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, run("bench", "dbench", "--jit-warmup", "-1"));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --jit-warmup -1: give 0 to 3600"), err.toString());
        err.getBuffer().setLength(0);
        Path missing = dir.resolve("none.txt");
        assertEquals(2, run("bench", "dbench", "--loadfile", missing.toString()));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --loadfile " + missing + ": cannot read it"), err.toString());
        err.getBuffer().setLength(0);
        Path bad = Files.writeString(dir.resolve("bad.txt"), "Close 1 NT_STATUS_OK\nLOOP 3\n");
        assertEquals(2, run("bench", "dbench", "--loadfile", bad.toString()));
        assertTrue(err.toString().startsWith("ferrite bench dbench: --loadfile " + bad + ":2: 'LOOP' is not a NetBench operation"),
                err.toString());
        assertEquals("", out.toString());
    }

    @Test
    void noCommandIsAUsageError() {
        assertEquals(2, run());
        assertEquals("ferrite: a command is required: bench, jmh, format, check, dump, table, mount, umount, crashtest or fuzz (see 'ferrite --help')\n", err.toString());
    }

    @Test
    void failureIsOneLineWithoutVerbose(@TempDir Path dir) {
        // A directory is neither a regular file nor a block device.
        assertEquals(1, run("bench", "device", "--device", dir.toString(), "--size", "1M", "--no-fio"));
        String[] lines = err.toString().lines().filter(l -> !l.isBlank() && !l.startsWith("\r")).toArray(String[]::new);
        assertEquals(1, lines.length, err.toString());
        assertTrue(lines[0].startsWith("ferrite: " + dir), lines[0]);
    }

    @Test
    void benchDeviceMeasuresEveryPhase(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("out.json");
        assertEquals(0, run("bench", "device", "--device", dir.resolve("dev").toString(), "--size", "16M",
                "--seconds", "0.05", "--no-fio", "--engine", "both", "--json", json.toString()), err.toString());

        List<?> results = (List<?>) JsonReader.at(JsonReader.parse(Files.readString(json)), "results");
        List<String> phases = results.stream().map(r -> (String) ((Map<?, ?>) r).get("phase")).distinct().toList();
        assertEquals(DeviceBench.PHASES, phases);
        assertEquals(7, results.size(), "the queue-depth phases run once per engine");
        for (Object r : results) {
            assertTrue(JsonReader.number(r, "rate") > 0, r.toString());
            assertTrue(JsonReader.number(r, "n") > 0, r.toString());
            assertTrue(JsonReader.number(r, "p50_us") > 0, r.toString());
        }
        for (String phase : DeviceBench.PHASES) {
            assertTrue(out.toString().contains(phase), out.toString());
        }
    }

    @Test
    void benchJournalMeasuresForcedCommitsAndLogBandwidthBesideTheDevice(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("journal.json");
        assertEquals(0, run("bench", "journal", "--device", dir.resolve("dev").toString(), "--size", "128M",
                "--seconds", "0.2", "--threads", "1,4", "--json", json.toString()), err.toString());
        List<?> results = (List<?>) JsonReader.at(JsonReader.parse(Files.readString(json)), "results");
        assertEquals(7, results.size(), "two forced-commit phases on both targets, log-write on three (the device flushed too): " + results);
        for (Object r : results) {
            assertTrue(JsonReader.number(r, "rate") > 0, r.toString());
            assertTrue(JsonReader.number(r, "n") > 0, r.toString());
        }
        assertTrue(out.toString().contains("forced-commit x4"), out.toString());
        assertTrue(out.toString().contains("vs device"), out.toString());
        assertTrue(out.toString().lines().anyMatch(l -> l.startsWith("log-write") && l.contains(" device-flushed ")), out.toString());
    }

    @Test
    void benchJournalRefusesADeviceTooSmallForHomeAndLog() {
        assertEquals(2, run("bench", "journal", "--size", "100M"));
        assertTrue(err.toString().contains("too small"), err.toString());
    }

    @Test
    void benchKvRunsEveryPhaseOnEveryTargetAtEveryThreadCount(@TempDir Path dir) throws Exception {
        Path stores = Files.createDirectory(dir.resolve("stores"));
        Path json = dir.resolve("kv.json");
        assertEquals(0, run("bench", "kv", "--keys", "2000", "--threads", "1,2", "--dir", stores.toString(),
                "--cache", "16M", "--scan-seconds", "0", "--same-jvm", "--json", json.toString()), err.toString());

        List<?> results = (List<?>) JsonReader.at(JsonReader.parse(Files.readString(json)), "results");
        assertEquals(KvBench.PHASES.size() * 6 * 2, results.size(), results.toString());
        for (String target : List.of("ferrite", "rocksdb", "lmdb", "xodus", "mvstore", "memory")) {
            for (long threads : List.of(1L, 2L)) {
                List<String> phases = results.stream().map(r -> (Map<?, ?>) r)
                        .filter(r -> r.get("target").equals(target) && r.get("threads").equals(threads))
                        .map(r -> (String) r.get("phase")).toList();
                assertEquals(KvBench.PHASES, phases, target + " x" + threads);
            }
        }
        for (Object r : results) {
            assertEquals("kv", ((Map<?, ?>) r).get("workload"));
            assertTrue(JsonReader.number(r, "rate") > 0, r.toString());
            assertEquals(2000, JsonReader.number(r, "n"), r.toString());
        }
        String table = out.toString();
        assertTrue(table.contains("ferrite vs rocksdb") && table.contains("ferrite vs lmdb") && table.contains("ferrite vs xodus")
                && table.contains("ferrite vs mvstore") && table.contains("ferrite vs memory"), table);
        assertTrue(table.contains("memory:  ConcurrentSkipListMap, no durability"), table);
        assertTrue(table.contains("delete x2"), table);
        try (Stream<Path> left = Files.list(stores)) {
            assertEquals(List.of(), left.toList(), "the stores' files are deleted");
        }
    }

    @Test
    void benchKvRunsTheChosenFamiliesAtEachValueSizeAndShowsWhatATargetSkipped(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("kv.json");
        assertEquals(0, run("bench", "kv", "--targets", "ferrite,memory", "--keys", "2000", "--threads", "1",
                "--dir", dir.toString(), "--cache", "16M", "--phases", "ycsb,batch", "--ycsb-seconds", "0.05",
                "--value-sizes", "64,1K", "--json", json.toString(), "--jfr", dir.resolve("kv.jfr").toString()), err.toString());

        List<String> families = List.of("insert", "batch1", "batch100", "batch1000", "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-e");
        List<?> results = (List<?>) JsonReader.at(JsonReader.parse(Files.readString(json)), "results");
        List<String> memory = results.stream().map(r -> (Map<?, ?>) r).filter(r -> r.get("target").equals("memory"))
                .map(r -> (String) r.get("phase")).toList();
        assertEquals(Stream.concat(families.stream(), families.stream().map(p -> p + "-1KiB")).toList(), memory);
        List<String> ferrite = results.stream().map(r -> (Map<?, ?>) r).filter(r -> r.get("target").equals("ferrite"))
                .map(r -> (String) r.get("phase")).toList();
        assertEquals(Stream.concat(families.stream(), families.stream().map(p -> p + "-1KiB")).toList(), ferrite,
                "Ferrite keeps 1 KiB values out of line");
        String table = out.toString();
        assertTrue(table.contains("phases insert,batch1,batch100,batch1000,ycsb-a,ycsb-b,ycsb-c,ycsb-e"), table);
        assertTrue(table.contains("each target in a JVM of its own") && table.contains("\n--- memory\n")
                && table.contains("ferrite vs memory"), table);
        for (String target : List.of("ferrite", "memory")) { // each target's JVM records itself
            assertTrue(Files.size(dir.resolve("kv-" + target + ".jfr")) > 0, target);
        }
    }

    @Test
    void badKvPhasesAndValueSizesAreUsageErrors() {
        assertEquals(2, run("bench", "kv", "--value-sizes", "4"));
        assertTrue(err.toString().contains("--value-sizes 4 bytes: give 8 bytes to 1 MiB"), err.toString());
        assertEquals(2, run("bench", "kv", "--value-sizes", "2M"));
        assertEquals(2, run("bench", "kv", "--value-sizes", "64,64"));
        assertTrue(err.toString().contains("names a size twice"), err.toString());
        assertEquals(2, run("bench", "kv", "--phases", "basic,ycsb,basic"));
        assertTrue(err.toString().contains("names a family twice"), err.toString());
        assertEquals(2, run("bench", "kv", "--phases", "tpcc"));
        assertEquals(2, run("bench", "kv", "--ycsb-seconds", "0"));
        assertEquals(2, run("bench", "kv", "--rounds", "0"));
        assertTrue(err.toString().contains("--rounds 0: give 1 to 100"), err.toString());
        assertEquals(2, run("bench", "kv", "--rounds", "2", "--json", "results.json"));
        assertTrue(err.toString().contains("--json records one round's results"), err.toString());
        assertEquals("", out.toString());
    }

    @Test
    void benchKvCutsPhasesAtTheTimeLimit(@TempDir Path dir) {
        assertEquals(0, run("bench", "kv", "--targets", "lmdb", "--keys", "100000000", "--threads", "2",
                "--dir", dir.toString(), "--seconds-limit", "0.2"), err.toString());
        assertTrue(out.toString().contains("scan x2"), out.toString());
    }

    @Test
    void unknownKvTargetIsAUsageError() {
        assertEquals(2, run("bench", "kv", "--targets", "ferrite,leveldb"));
        assertTrue(err.toString().startsWith("ferrite bench kv: Invalid value for option '--targets'"), err.toString());
        assertTrue(err.toString().contains("leveldb"), err.toString());
        assertEquals("", out.toString());
    }

    @Test
    void repeatedKvTargetIsAUsageError() {
        assertEquals(2, run("bench", "kv", "--targets", "lmdb,ferrite,lmdb"));
        assertTrue(err.toString().contains("names a target twice"), err.toString());
    }
}
