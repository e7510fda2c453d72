package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.FerriteException;

import org.HdrHistogram.Histogram;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * Files written by small appends, several at once: what speculative preallocation is for. Each of W
 * writers appends {@code bs} bytes at a time (O_DIRECT, no fsync until its file is complete, then one)
 * to a file of its own until the W files hold {@code total} bytes between them; the phase reports the
 * rate and append latencies, and the figure it exists for, the extents each file ends in (without
 * preallocation two interleaved appenders would leave about one extent per append). Every target runs on
 * its own RAM-backed loop device, made for it and removed after it:
 * <ul>
 *   <li>{@code ferrite}: a volume on the device; {@link Namespace#append} from W threads; extents counted
 *       by {@link Namespace#extents} after the files are closed (the last close trims the preallocation);
 *   <li>{@code xfs}, {@code ext4}: mkfs's defaults, mounted; fio ({@code rw=write direct=1 ioengine=psync
 *       numjobs=W end_fsync=1}, a file per job); extents counted by {@code filefrag} (FIEMAP).
 * </ul>
 */
public final class AppendBench {
    public static final String WORKLOAD = "appends";
    private static final String UNIT = "MB/s";
    private static final long SEED = 0xA99E_4D5L;
    private static final Pattern FILEFRAG = Pattern.compile(":\\s+(\\d+) extents? found");

    /** Where a run's files live. */
    public enum Target implements LoopTargets.Target {
        FERRITE, XFS, EXT4;

        @Override
        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }

        @Override
        public LoopDevice.Kind deviceKind() {
            return switch (this) {
                case FERRITE -> LoopDevice.Kind.RAW;
                case XFS -> LoopDevice.Kind.XFS;
                case EXT4 -> LoopDevice.Kind.EXT4;
            };
        }
    }

    private final Path dir;
    private final long total;
    private final int blockSize;
    private final int writers;
    private final double seconds;
    private final List<Target> targets;
    private final Fio fio;
    private final List<String> notes = new ArrayList<>();
    private final List<String> configurations = new ArrayList<>();

    /**
     * @param dir       a RAM-backed directory for the loop devices' images
     * @param total     bytes the files hold between them, a multiple of {@code writers} MiB
     * @param blockSize bytes per append, a multiple of 4 KiB
     * @param writers   concurrent appenders, a file each
     * @param seconds   the most a target may take; a target that runs out of time reports what it wrote
     * @param targets   in run order
     * @param fio       fio, or null to run only {@code ferrite}
     */
    public AppendBench(Path dir, long total, int blockSize, int writers, double seconds, List<Target> targets, Fio fio) {
        this.dir = dir;
        this.total = total;
        this.blockSize = blockSize;
        this.writers = writers;
        this.seconds = seconds;
        this.targets = List.copyOf(targets);
        this.fio = fio;
    }

    /** Bytes of each target's loop device: the files and room for each file system's metadata and log. */
    public long deviceBytes() {
        return LoopDevice.bytesFor(total);
    }

    /** The extents each file ended in, per target, and what the run could not do; one line each. */
    public List<String> notes() {
        return notes;
    }

    /** How each target that ran was set up and what it makes durable, one line each. */
    public List<String> configurations() {
        return configurations;
    }

    public List<Result> run(Progress progress) {
        List<Result> results = new ArrayList<>();
        LoopTargets.run(targets, dir, deviceBytes(), t -> t == Target.FERRITE ? Optional.empty()
                : fio == null ? Optional.of("fio is not on the PATH")
                : !LoopDevice.onPath("filefrag") ? Optional.of("filefrag (e2fsprogs) is not on the PATH to count its extents")
                : Optional.empty(), notes, progress, (t, loop) -> {
                    configurations.add(t == Target.FERRITE
                            ? String.format(Locale.ROOT, "%-7s volume with VolumeOptions.defaults() on the raw loop device (O_DIRECT);"
                                    + " Namespace.append of %d-byte native aligned buffers (the direct path), one fsync per file at its end",
                                    t.label(), blockSize)
                            : String.format(Locale.ROOT, "%-7s mkfs.%s defaults, mounted %s; fio rw=write bs=%d direct=1 ioengine=psync"
                                    + " numjobs=%d end_fsync=1 (one fsync per file at its end)", t.label(), t.label(), loop.mountOptions(),
                                    blockSize, writers));
                    results.add(t == Target.FERRITE ? ferrite(loop.device(), progress) : host(t, loop.mountPoint(), progress));
                });
        return results;
    }

    private String phase() {
        return "append-w" + writers;
    }

    private long perFile() {
        return total / writers;
    }

    private void extentsNote(Target t, long[] extents) {
        notes.add(String.format(Locale.ROOT, "%s: extents per file %s (%d MiB files of %d KiB appends)", t.label(),
                Arrays.stream(extents).mapToObj(String::valueOf).collect(Collectors.joining(", ")),
                perFile() >> 20, blockSize >> 10));
    }

    private Result ferrite(Path device, Progress progress) {
        VolumeOptions options = VolumeOptions.defaults();
        try (DirectDevice dev = DirectDevice.open(device, DeviceOptions.defaults())) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options); Arena arena = Arena.ofShared()) {
                Namespace ns = v.namespace();
                Handle[] files = new Handle[writers];
                MemorySegment[] buffers = new MemorySegment[writers];
                Histogram[] hs = new Histogram[writers];
                try (Handle root = ns.openRoot()) {
                    for (int i = 0; i < writers; i++) {
                        files[i] = ns.create(root, "append-" + i, 0644, true);
                        buffers[i] = fillRandom(arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT), new SplittableRandom(SEED + i));
                        hs[i] = Result.newHistogram();
                    }
                    ThreadCounts done = new ThreadCounts(writers);
                    AtomicBoolean stop = new AtomicBoolean();
                    long appends = perFile() / blockSize;
                    PhaseTimer timer = new PhaseTimer(phase(), Target.FERRITE.label(),
                            TimeUnit.MILLISECONDS.toNanos(Math.round(seconds * 1000)), progress);
                    CpuMeter.Sample cpu = CpuMeter.sample();
                    GcMeter gc = GcMeter.start();
                    Throwable failure = Workers.run(writers, "append-ferrite", timer, done::total, stop, id -> {
                        Histogram h = hs[id];
                        for (long n = 0; n < appends && !stop.get(); ) {
                            long t0 = System.nanoTime();
                            ns.append(files[id], buffers[id]);
                            h.recordValue(System.nanoTime() - t0);
                            done.set(id, ++n);
                        }
                        ns.fsync(files[id]);
                    });
                    long elapsed = timer.finish(System.nanoTime());
                    double cpus = CpuMeter.busyCpusSince(cpu);
                    GcMeter.Pauses pauses = gc.pauses();
                    if (failure != null) {
                        throw new FerriteException(phase() + " on ferrite failed: " + failure, failure);
                    }
                    long[] extents = new long[writers];
                    for (int i = 0; i < writers; i++) {
                        files[i].close();
                        try (Handle f = ns.open(root, "append-" + i)) {
                            extents[i] = ns.extents(f, 0, Long.MAX_VALUE).size();
                        }
                    }
                    extentsNote(Target.FERRITE, extents);
                    Histogram all = Result.newHistogram();
                    Arrays.stream(hs).forEach(all::add);
                    return Result.of(WORKLOAD, phase(), Target.FERRITE.label(), writers,
                            all.getTotalCount() * (double) blockSize / elapsed * 1e3, UNIT, all).withCpus(cpus).withGc(pauses);
                } finally {
                    for (Handle f : files) {
                        if (f != null) {
                            f.close();
                        }
                    }
                }
            }
        }
    }

    private Result host(Target t, Path mount, Progress progress) {
        List<String> args = List.of("--directory=" + Fio.filename(mount), "--filename_format=append-$jobnum", "--rw=write",
                "--bs=" + blockSize, "--direct=1", "--ioengine=psync", "--numjobs=" + writers, "--size=" + perFile(),
                "--end_fsync=1", "--group_reporting");
        CpuMeter.Sample cpu = CpuMeter.sample();
        Fio.Report report = fio.runOnePass(phase() + "-" + t.label(), args, seconds, progress);
        double cpus = CpuMeter.busyCpusSince(cpu);
        Fio.Stats s = report.io("write");
        long[] extents = new long[writers];
        for (int i = 0; i < writers; i++) {
            extents[i] = filefrag(mount.resolve("append-" + i));
        }
        extentsNote(t, extents);
        return new Result(WORKLOAD, phase(), t.label(), writers, s.n(), s.bytesPerSecond() / 1e6, UNIT, s.p50Us(), s.p99Us(),
                s.p999Us(), s.maxUs(), Double.NaN).withCpus(cpus);
    }

    /** The extents {@code filefrag} (FIEMAP) finds in {@code file}. */
    static long filefrag(Path file) {
        return parseFilefrag(LoopDevice.run("filefrag", file.toString()), file);
    }

    /** The count in filefrag's {@code "FILE: N extents found"}. */
    static long parseFilefrag(String out, Path file) {
        Matcher m = FILEFRAG.matcher(out);
        if (!m.find()) {
            throw new FerriteException("filefrag " + file + " printed no extent count: " + out.strip());
        }
        return Long.parseLong(m.group(1));
    }

    private static MemorySegment fillRandom(MemorySegment m, SplittableRandom random) {
        for (long o = 0; o < m.byteSize(); o += 8) {
            m.set(JAVA_LONG_UNALIGNED, o, random.nextLong());
        }
        return m;
    }
}
