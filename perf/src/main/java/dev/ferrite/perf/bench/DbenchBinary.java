package dev.ferrite.perf.bench;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ferrite.io.FerriteException;
import dev.ferrite.perf.bench.DbenchLoadfile.Kind;

/**
 * The real {@code dbench} (4.0's fileio backend), run as a child process on a kernel file system's
 * directory with its defaults — no {@code -s} (O_SYNC), {@code -S} (directory syncs) or {@code -F}
 * (fsync per write): page-cache writes, fsync only for the loadfile's Flush — and its report read back:
 * <pre>
 *  Operation      Count    AvgLat    MaxLat
 *  ----------------------------------------
 *  NTCreateX      78037     0.029     3.971
 *  ...
 * Throughput 818.454 MB/sec  2 clients  2 procs  max_latency=9.455 ms
 * </pre>
 * Lines dbench prints about a status or size it did not expect ({@code [line] open ... failed ...},
 * {@code [line] read failed ...}) are counted as mismatches.
 */
public final class DbenchBinary {
    private static final Pattern THROUGHPUT = Pattern.compile(
            "^Throughput ([0-9.]+) MB/sec.*?\\s(\\d+) clients\\s+\\d+ procs\\s+max_latency=([0-9.]+) ms\\s*$");
    private static final Pattern TABLE_HEAD = Pattern.compile("^\\s*Operation\\s+Count\\s+AvgLat\\s+MaxLat\\s*$");
    private static final Pattern TABLE_ROW = Pattern.compile("^\\s*(\\S+)\\s+(\\d+)\\s+([0-9.]+)\\s+([0-9.]+)\\s*$");
    /** dbench's complaints about one operation start with its loadfile line in brackets. */
    private static final Pattern COMPLAINT = Pattern.compile("^\\[\\d+] .*");

    private final Path executable;

    private DbenchBinary(Path executable) {
        this.executable = executable;
    }

    /** dbench from the PATH, if it is there. */
    public static Optional<DbenchBinary> find() {
        String path = System.getenv().getOrDefault("PATH", "");
        for (String dir : path.split(File.pathSeparator)) {
            Path candidate = dir.isEmpty() ? null : Path.of(dir, "dbench");
            if (candidate != null && Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
                return Optional.of(new DbenchBinary(candidate));
            }
        }
        return Optional.empty();
    }

    public Path executable() {
        return executable;
    }

    /** What {@code dbench --version} says, e.g. {@code dbench version 4.00}; "dbench" if it says nothing. */
    public String version() {
        try {
            Process p = new ProcessBuilder(executable.toString(), "--version").redirectErrorStream(true).start();
            String first = new String(p.getInputStream().readAllBytes()).lines().findFirst().orElse("").strip();
            p.waitFor();
            int dash = first.indexOf(" - ");
            return first.isEmpty() ? "dbench" : dash > 0 ? first.substring(0, dash) : first;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + executable + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FerriteException("interrupted while asking dbench for its version", e);
        }
    }

    /**
     * Runs {@code clients} clients of {@code loadfile} in {@code dir} for {@code seconds} (after dbench's own
     * warm-up of a fifth of that) and returns its report. The process and its children are killed if this
     * thread is interrupted, if they run far past their time, or if the JVM exits meanwhile (Ctrl-C), so
     * that nothing keeps the file system busy.
     */
    public DbenchResult run(Path loadfile, Path dir, int clients, int seconds, String target, Progress progress) {
        List<String> cmd = List.of(executable.toString(), "-c", loadfile.toString(), "-t", String.valueOf(seconds),
                "-D", dir.toString(), String.valueOf(clients));
        String phase = "dbench x" + clients;
        try (ScratchFile log = ScratchFile.create(Path.of(System.getProperty("java.io.tmpdir")), "ferrite-dbench-", ".log")) {
            CpuMeter.Sample cpu = CpuMeter.sample();
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.path().toFile()).start();
            int exit = await(p, phase, target, seconds, progress);
            double cpus = CpuMeter.busyCpusSince(cpu);
            String output = Files.readString(log.path());
            if (exit != 0) {
                throw new FerriteException("dbench failed on " + target + " with " + clients + " clients (exit " + exit
                        + "): " + tail(output));
            }
            return parse(output, target, cpus);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + executable + ": " + e.getMessage(), e);
        }
    }

    private static int await(Process p, String phase, String target, int seconds, Progress progress) {
        Thread killer = new Thread(() -> kill(p), "ferrite-dbench-killer");
        Runtime.getRuntime().addShutdownHook(killer);
        long start = System.nanoTime();
        // a warm-up of a fifth, the run, then its cleanup: minutes past that is a hang
        long limit = start + TimeUnit.SECONDS.toNanos(seconds * 2L + 120);
        try {
            while (!p.waitFor(1, TimeUnit.SECONDS)) {
                long now = System.nanoTime();
                if (now - limit > 0) {
                    kill(p);
                    throw new FerriteException("dbench did not finish " + phase + " on " + target + " within "
                            + TimeUnit.NANOSECONDS.toSeconds(now - start) + " s");
                }
                progress.update(phase, target, -1, now - start);
            }
            return p.exitValue();
        } catch (InterruptedException e) {
            kill(p);
            Thread.currentThread().interrupt();
            throw new FerriteException("interrupted while dbench ran " + phase + " on " + target, e);
        } finally {
            progress.done();
            try {
                Runtime.getRuntime().removeShutdownHook(killer);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running already
            }
        }
    }

    /** Kills dbench and its client processes and waits a little for them, so that the mount can go. */
    private static void kill(Process p) {
        List<ProcessHandle> all = new ArrayList<>(p.descendants().toList());
        all.add(p.toHandle());
        all.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle h : all) {
            try {
                h.onExit().get(5, TimeUnit.SECONDS);
            } catch (Exception e) {
                // gone already, or not within the wait: the lazy unmount copes
            }
        }
    }

    /**
     * Reads dbench's report: the last Throughput line, the operation table before it, and the complaint
     * lines. The max latency is the larger of the Throughput line's {@code max_latency} and the table's
     * longest operation. dbench folds the clients' latencies into {@code max_latency} once a second, and
     * the alarm that ends the run skips its fold, so the last second's operations never reach it (a third
     * of a 3 s run: 2.1 ms on XFS where the table's longest Flush took 4.2). The table times every
     * operation of the run, as Ferrite's side does.
     *
     * @throws FerriteException if there is no Throughput line or the table names an operation not known here
     */
    public static DbenchResult parse(String output, String target, double cpus) {
        List<String> lines = output.lines().toList();
        Matcher throughput = null;
        List<DbenchResult.OpRow> rows = new ArrayList<>();
        List<String> complaints = new ArrayList<>();
        long complaintCount = 0;
        boolean inTable = false;
        for (String line : lines) {
            if (COMPLAINT.matcher(line).matches()) {
                complaintCount++;
                if (complaints.size() < 10) {
                    complaints.add(line.strip());
                }
            }
            Matcher m = THROUGHPUT.matcher(line);
            if (m.matches()) {
                throughput = m;
                inTable = false;
            } else if (TABLE_HEAD.matcher(line).matches()) {
                rows.clear();
                inTable = true;
            } else if (inTable && !line.isBlank() && !line.strip().startsWith("---")) {
                Matcher r = TABLE_ROW.matcher(line);
                Kind kind = r.matches() ? Kind.byName(r.group(1)) : null;
                if (kind == null) {
                    throw new FerriteException("dbench's table has a line this parser does not know: '" + line.strip() + "'");
                }
                rows.add(new DbenchResult.OpRow(kind, Long.parseLong(r.group(2)), Double.parseDouble(r.group(3)),
                        Double.parseDouble(r.group(4)), Double.NaN));
            } else if (inTable && line.isBlank() && !rows.isEmpty()) {
                inTable = false;
            }
        }
        if (throughput == null) {
            throw new FerriteException("dbench printed no Throughput line on " + target + ": " + tail(output));
        }
        rows.sort((a, b) -> a.kind().compareTo(b.kind()));
        double maxLatency = Double.parseDouble(throughput.group(3));
        for (DbenchResult.OpRow r : rows) {
            maxLatency = Math.max(maxLatency, r.maxMs());
        }
        return new DbenchResult(target, Integer.parseInt(throughput.group(2)), Double.parseDouble(throughput.group(1)),
                maxLatency, rows, complaintCount, complaints, cpus);
    }

    /** The last few non-blank lines, for an error message. */
    private static String tail(String output) {
        List<String> lines = output.lines().map(String::strip).filter(l -> !l.isEmpty()).toList();
        return lines.isEmpty() ? "no output" : String.join(" | ", lines.subList(Math.max(0, lines.size() - 3), lines.size()));
    }
}
