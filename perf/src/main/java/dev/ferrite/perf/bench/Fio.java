package dev.ferrite.perf.bench;

import dev.ferrite.io.FerriteException;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * fio, the yardstick for the device phases: found on the PATH, run as a child process one job at a time,
 * its {@code --output-format=json} report read back with {@link JsonReader}. Latencies are fio's total
 * latency ({@code lat_ns}: submission to completion, what {@link dev.ferrite.io.IoBatch#timed timed}
 * batches measure), with {@code lat_percentiles} on so that fio computes percentiles for it.
 */
public final class Fio {
    private final Path executable;

    private Fio(Path executable) {
        this.executable = executable;
    }

    /** fio from the PATH, if it is there. */
    public static Optional<Fio> find() {
        String path = System.getenv("PATH");
        if (path == null) {
            return Optional.empty();
        }
        for (String dir : path.split(File.pathSeparator)) {
            if (dir.isEmpty()) {
                continue;
            }
            Path candidate = Path.of(dir, "fio");
            if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
                return Optional.of(new Fio(candidate));
            }
        }
        return Optional.empty();
    }

    /** What {@code fio --version} says, e.g. {@code fio-3.33}. */
    public String version() {
        try {
            Process p = new ProcessBuilder(executable.toString(), "--version").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes()).strip();
            p.waitFor();
            return out.isEmpty() ? "fio" : out.lines().findFirst().orElse("fio");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + executable + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FerriteException("interrupted while asking fio for its version", e);
        }
    }

    /**
     * Runs one time-based job and returns its report.
     *
     * @param phase   the job's name, and the phase named in progress updates and errors
     * @param jobArgs fio options for the job, e.g. {@code --rw=randwrite}
     * @param seconds the job's {@code runtime}; progress is reported while it runs
     */
    public Report run(String phase, List<String> jobArgs, double seconds, Progress progress) {
        return run(phase, jobArgs, seconds, true, progress);
    }

    /**
     * Runs one job that ends after one pass over its region or after {@code seconds}, whichever comes
     * first ({@code runtime} without {@code time_based}): for phases that must not wrap around, such as
     * first writes into preallocated space.
     */
    public Report runOnePass(String phase, List<String> jobArgs, double seconds, Progress progress) {
        return run(phase, jobArgs, seconds, false, progress);
    }

    private Report run(String phase, List<String> jobArgs, double seconds, boolean timeBased, Progress progress) {
        Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
        try (ScratchFile out = ScratchFile.create(tmp, "ferrite-fio-", ".json");
             ScratchFile log = ScratchFile.create(tmp, "ferrite-fio-", ".log")) {
            List<String> cmd = new ArrayList<>();
            cmd.add(executable.toString());
            cmd.add("--name=" + phase);
            cmd.addAll(jobArgs);
            if (timeBased) {
                cmd.add("--time_based");
            }
            cmd.add("--runtime=" + Math.max(1, Math.round(seconds * 1000)) + "ms");
            cmd.add("--lat_percentiles=1");
            cmd.add("--percentile_list=50:99:99.9");
            cmd.add("--output-format=json");
            cmd.add("--output=" + out.path());
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.path().toFile()).start();
            int exit = await(p, phase, seconds, progress);
            if (exit != 0) {
                throw new FerriteException("fio failed on " + phase + " (exit " + exit + "): " + lastLine(log.path())
                        + "; rerun with --no-fio to skip it");
            }
            return Report.parse(Files.readString(out.path()), phase);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run fio for " + phase + ": " + e.getMessage(), e);
        }
    }

    private static int await(Process p, String phase, double seconds, Progress progress) {
        // Killed with us on Ctrl-C or SIGTERM, so it never outlives the file it writes to.
        Thread killer = new Thread(p::destroyForcibly, "ferrite-fio-killer");
        Runtime.getRuntime().addShutdownHook(killer);
        long start = System.nanoTime();
        // Layout checks and process start cost fio a little beyond its runtime; minutes beyond means a hang.
        long limit = start + TimeUnit.MILLISECONDS.toNanos(Math.round(seconds * 3000)) + TimeUnit.SECONDS.toNanos(60);
        try {
            while (!p.waitFor(1, TimeUnit.SECONDS)) {
                long now = System.nanoTime();
                if (now - limit > 0) {
                    p.destroyForcibly();
                    throw new FerriteException("fio did not finish " + phase + " within "
                            + TimeUnit.NANOSECONDS.toSeconds(now - start) + " s");
                }
                progress.update(phase, "fio", -1, now - start);
            }
            return p.exitValue();
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new FerriteException("interrupted while fio ran " + phase, e);
        } finally {
            progress.done();
            try {
                Runtime.getRuntime().removeShutdownHook(killer);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running already
            }
        }
    }

    private static String lastLine(Path log) throws IOException {
        List<String> lines = Files.readAllLines(log).stream().map(String::strip).filter(l -> !l.isEmpty()).toList();
        return lines.isEmpty() ? "no output" : lines.getLast();
    }

    /** Escapes a path for fio's {@code filename=}, where ':' separates several files. */
    public static String filename(Path path) {
        return path.toAbsolutePath().toString().replace(":", "\\:");
    }

    /** Figures from one section of a job's report, latencies in microseconds. */
    public record Stats(long n, double iops, double bytesPerSecond, double p50Us, double p99Us, double p999Us, double maxUs) {
    }

    /** The report of a single-job run. */
    public static final class Report {
        private final Object job;

        private Report(Object job) {
            this.job = job;
        }

        /** Parses fio's JSON output; {@code phase} names the job in errors. */
        public static Report parse(String json, String phase) {
            // Some fio versions print notes ahead of the JSON document even with --output.
            int start = json.indexOf('{');
            if (start < 0) {
                throw new FerriteException("fio wrote no JSON report for " + phase);
            }
            Object job = JsonReader.at(JsonReader.parse(json.substring(start)), "jobs", 0);
            long error = (long) JsonReader.number(job, "error");
            if (error != 0) {
                throw new FerriteException("fio reported error " + error + " for " + phase);
            }
            return new Report(job);
        }

        /** The {@code read} or {@code write} section. */
        public Stats io(String direction) {
            long n = (long) JsonReader.number(job, direction, "total_ios");
            if (n == 0) {
                throw new FerriteException("fio did no " + direction + "s in job " + JsonReader.at(job, "jobname"));
            }
            return new Stats(n, JsonReader.number(job, direction, "iops"), JsonReader.number(job, direction, "bw_bytes"),
                    percentile(direction, "50"), percentile(direction, "99"), percentile(direction, "99.9"),
                    JsonReader.number(job, direction, "lat_ns", "max") / 1e3);
        }

        /** The {@code sync} section (fsync/fdatasync latencies); its rate is syncs per second of job runtime. */
        public Stats sync() {
            long n = (long) JsonReader.number(job, "sync", "lat_ns", "N");
            double seconds = JsonReader.number(job, "job_runtime") / 1e3;
            if (n == 0 || seconds <= 0) {
                throw new FerriteException("fio did no syncs in job " + JsonReader.at(job, "jobname"));
            }
            return new Stats(n, n / seconds, 0, percentile("sync", "50"), percentile("sync", "99"), percentile("sync", "99.9"),
                    JsonReader.number(job, "sync", "lat_ns", "max") / 1e3);
        }

        /** A latency percentile in µs; NaN if the report has none for {@code p} (one made with another percentile list). */
        private double percentile(String section, String p) {
            // fio prints percentile keys with printf("%f").
            String key = String.format(java.util.Locale.ROOT, "%f", Double.parseDouble(p));
            return JsonReader.at(job, section, "lat_ns", "percentile") instanceof java.util.Map<?, ?> m && m.containsKey(key)
                    ? JsonReader.number(job, section, "lat_ns", "percentile", key) / 1e3 : Double.NaN;
        }
    }
}
