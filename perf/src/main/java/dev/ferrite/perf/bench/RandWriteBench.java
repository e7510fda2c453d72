package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferrite.dir.FileExtent;
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
 * Random overwrites of a file that is already written, the path a database with its own cache takes:
 * {@code bs}-byte writes at uniformly random aligned offsets, with O_DIRECT and no fsync, from 1 or N
 * synchronous writers. Every target runs on its own RAM-backed loop device of the same size, made for
 * it and removed after it:
 * <ul>
 *   <li>{@code ferrite}: a volume formatted on the device; one file written in full through
 *       {@link Namespace#write} (1 MiB at a time) and fsync'd, then overwritten through the direct path by
 *       N threads;
 *   <li>{@code xfs}, {@code ext4}: the file system made with mkfs's defaults and mounted; the file written in
 *       full through the page cache and fsync'd, then fio ({@code ioengine=psync direct=1 numjobs=N});
 *   <li>{@code fuse}: the volume mounted through FUSE ({@link FuseVolume}), and fio in a file on it as on
 *       xfs and ext4;
 *   <li>{@code raw}: fio on the block device itself, the limit; its first {@code fileSize} bytes (fio's
 *       region) written once first, as the other targets' files are, so that no write of a phase is the
 *       first to a page of the RAM-backed image.
 * </ul>
 * N synchronous writers on both sides (threads against fio jobs), the same block size, the same region,
 * and nothing made durable during the phase: the same shape of work and the same durability.
 *
 * <p>With {@code unwritten}, each phase gets a new file preallocated and never written (Ferrite:
 * {@link Namespace#fallocate} mode 0; fio: {@code fallocate=native}, which gives XFS and ext4 unwritten
 * extents) and writes every block once in a random order, so each write converts unwritten space; a
 * phase ends after that one pass or its time, whichever comes first. {@code raw} has nothing to convert
 * and is skipped then.
 */
public final class RandWriteBench {
    public static final String WORKLOAD = "randwrite";
    private static final String UNIT = "IOPS";
    private static final int FILL_CHUNK = 1 << 20;
    private static final long SEED = 0x5EED_2A1DL;

    /** Where a run's file lives. */
    public enum Target implements LoopTargets.Target {
        FERRITE, FUSE, XFS, EXT4, RAW;

        @Override
        public String label() {
            return this == FUSE ? "ferrite-fuse" : name().toLowerCase(Locale.ROOT);
        }

        @Override
        public LoopDevice.Kind deviceKind() {
            return switch (this) {
                case FERRITE, FUSE, RAW -> LoopDevice.Kind.RAW;
                case XFS -> LoopDevice.Kind.XFS;
                case EXT4 -> LoopDevice.Kind.EXT4;
            };
        }
    }

    private final Path dir;
    private final long fileSize;
    private final int blockSize;
    private final List<Integer> queueDepths;
    private final double seconds;
    private final List<Target> targets;
    private final Fio fio;
    private final boolean unwritten;
    private final List<String> notes = new ArrayList<>();
    private final List<String> configurations = new ArrayList<>();
    /** What Ferrite's threads waited on in each phase ({@link Contention}). */
    private final List<String> contention = new ArrayList<>();
    /** Measure Ferrite's own cost per write after each overwrite phase ({@link #ownCost}). */
    private final boolean ownCost;
    private final List<String> ownCosts = new ArrayList<>();

    /**
     * @param dir         a RAM-backed directory for the loop devices' images
     * @param fileSize    bytes of the file overwritten, a multiple of 1 MiB
     * @param blockSize   bytes per write, a multiple of 4 KiB
     * @param queueDepths writer counts, one phase each
     * @param targets     in run order; fio runs those but {@code ferrite}
     * @param fio         fio, or null to run only {@code ferrite}
     * @param unwritten   first writes into preallocated space instead of overwrites (see {@link #run})
     * @param ownCost     after each of Ferrite's overwrite phases, as long again measuring its own cost per
     *                    write against the device's ({@link #ownCost})
     */
    public RandWriteBench(Path dir, long fileSize, int blockSize, List<Integer> queueDepths, double seconds,
                          List<Target> targets, Fio fio, boolean unwritten, boolean ownCost) {
        this.dir = dir;
        this.fileSize = fileSize;
        this.blockSize = blockSize;
        this.queueDepths = List.copyOf(queueDepths);
        this.seconds = seconds;
        this.targets = List.copyOf(targets);
        this.fio = fio;
        this.unwritten = unwritten;
        this.ownCost = ownCost;
    }

    /** Ferrite's file is cloned before each phase ({@link #withClones}). */
    private boolean cloned;
    private final List<String> clones = new ArrayList<>();

    /**
     * Before each of Ferrite's overwrite phases, clones the file ({@link Namespace#cloneFile}) and keeps the
     * clone through the phase, so that every block starts shared and its first write copies it; times the
     * clone, and a copy of the file through the direct path to compare ({@link #clones()}). XFS's file is
     * cloned the same way ({@code cp --reflink=always}); targets without clones (ext4, the raw device) are
     * skipped.
     */
    public RandWriteBench withClones() {
        cloned = true;
        return this;
    }

    /** With {@link #withClones}: per phase, the time to clone the file and to copy it. */
    public List<String> clones() {
        return clones;
    }

    /** Bytes of each target's loop device: the file and room for each file system's metadata and log (three files' with clones). */
    public long deviceBytes() {
        return LoopDevice.bytesFor(cloned ? 3 * fileSize : fileSize); // cloned: the copy, and the blocks copies on write take
    }

    /** What the run could not do (a target skipped), one line each. */
    public List<String> notes() {
        return notes;
    }

    /** How each target that ran was set up, one line each. */
    public List<String> configurations() {
        return configurations;
    }

    /** Ferrite's counters over each phase, a line each ({@link Contention}). */
    public List<String> contention() {
        return contention;
    }

    /** Ferrite's own cost per write in each overwrite phase, a line each, if asked for ({@link #ownCost}). */
    public List<String> ownCosts() {
        return ownCosts;
    }

    public List<Result> run(Progress progress) {
        List<Result> results = new ArrayList<>();
        LoopTargets.run(targets, dir, deviceBytes(), t -> t != Target.FERRITE && fio == null ? Optional.of("fio is not on the PATH")
                : unwritten && t == Target.RAW ? Optional.of("a block device has no unwritten space to convert")
                : cloned && !unwritten && t != Target.FERRITE && t != Target.XFS ? Optional.of("no reflink clones to copy on write")
                : t == Target.FUSE ? FuseVolume.unavailable() : Optional.empty(),
                notes, progress, (t, loop) -> {
                    String job = "fio rw=randwrite bs=" + blockSize + " direct=1 ioengine=psync numjobs=QD"
                            + (unwritten ? " fallocate=native, one pass" : " norandommap")
                            + (cloned && !unwritten ? "; the file cloned first by cp --reflink=always, the clone kept through the phase" : "");
                    configurations.add(switch (t) {
                        case FERRITE -> String.format(Locale.ROOT, "%-7s volume with VolumeOptions.defaults() on the raw loop device"
                                + " (O_DIRECT); Namespace.write of %d-byte native aligned buffers (the direct path), no fsync;"
                                + " the same writes untimed for up to 1 s first (the JIT)", t.label(), blockSize);
                        case RAW -> String.format(Locale.ROOT, "%-7s the loop device itself, fio's region written once first; %s, no fsync", t.label(), job);
                        case FUSE -> String.format(Locale.ROOT, "%-7s volume with VolumeOptions.defaults() on the raw loop device,"
                                + " mounted through FUSE (its defaults: docs/mount.md); %s, no fsync", t.label(), job);
                        default -> String.format(Locale.ROOT, "%-7s %s defaults, mounted %s; %s, no fsync", t.label(), t.deviceKind().mkfs,
                                loop.mountOptions(), job);
                    });
                    runTarget(t, loop, results, progress);
                });
        return results;
    }

    private void runTarget(Target t, LoopDevice loop, List<Result> results, Progress progress) {
        if (t == Target.FERRITE) {
            ferrite(loop.device(), results, progress);
            return;
        }
        if (t == Target.FUSE) {
            try (FuseVolume f = FuseVolume.create(loop.device(), dir, dev -> VolumeOptions.defaults())) {
                fioPhases(t, f.mountPoint(), results, progress);
            }
            return;
        }
        fioPhases(t, t == Target.RAW ? loop.device() : loop.mountPoint(), results, progress);
    }

    /** fio's phases: on the device {@code where} for {@link Target#RAW}, else in a file in the mount {@code where}. */
    private void fioPhases(Target t, Path where, List<Result> results, Progress progress) {
        if (t == Target.RAW) {
            // written once first, as every other target's file is: a RAM-backed image gets its pages on first
            // write (15-20 us a page on a VM), which would otherwise slow the limit's own phase
            fill(where, StandardOpenOption.WRITE);
        }
        for (int qd : queueDepths) {
            Path file = t == Target.RAW ? where : where.resolve("bench-qd" + qd);
            Path clone = cloned && !unwritten && t != Target.RAW ? where.resolve("bench-qd" + qd + "-clone") : null;
            if (t != Target.RAW && !unwritten) {
                fill(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            }
            if (clone != null) { // as Ferrite's file is cloned: every block starts shared, its first write copies it
                LoopDevice.run("cp", "--reflink=always", file.toString(), clone.toString());
            }
            results.add(fio(t, file, qd, progress));
            if (t != Target.RAW) {
                try {
                    if (clone != null) {
                        Files.delete(clone);
                    }
                    Files.delete(file); // room for the next phase's file, as on Ferrite
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot delete " + file + ": " + e.getMessage(), e);
                }
            }
        }
    }

    private String phase(int qd) {
        return (unwritten ? "unwritten-qd" : cloned ? "cloned-qd" : "randwrite-qd") + qd;
    }

    private void ferrite(Path device, List<Result> results, Progress progress) {
        VolumeOptions options = VolumeOptions.defaults();
        try (DirectDevice dev = DirectDevice.open(device, DeviceOptions.defaults())) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options); Arena arena = Arena.ofShared()) {
                Namespace ns = v.namespace();
                try (Handle root = ns.openRoot()) {
                    warmUp(ns, root, arena, progress);
                    for (int qd : queueDepths) {
                        try (Handle file = ns.create(root, "bench-qd" + qd, 0644, true)) {
                            if (unwritten) {
                                ns.fallocate(file, 0, 0, fileSize);
                            } else {
                                fillFerriteFile(ns, file, fileSize, arena, progress);
                            }
                            ns.fsync(file);
                            if (cloned && !unwritten) {
                                cloneAndCopy(ns, root, file, qd, arena);
                            }
                            Contention.Snapshot before = Contention.Snapshot.of(v);
                            Result r = ferritePhase(ns, file, qd, arena, progress);
                            ns.fsync(file); // untimed: the phase's conversions, still in the CIL, reach the log and its counters
                            contention.add("ferrite " + r.phase() + ": " + Contention.between(before, Contention.Snapshot.of(v), r.n()));
                            results.add(r);
                            if (ownCost && !unwritten) {
                                ownCosts.add("ferrite " + r.phase() + ": " + ownCost(ns, file, dev, qd, arena, progress));
                            }
                        }
                        ns.unlink(root, "bench-qd" + qd);
                        if (cloned && !unwritten) {
                            ns.unlink(root, "bench-qd" + qd + "-clone");
                        }
                    }
                }
            }
        }
    }

    /**
     * Clones {@code file} into {@code bench-qdN-clone} (kept through the phase: every block of the file
     * starts shared) and copies it into a file removed after, 1 MiB at a time through the direct path, each
     * timed to its fsync; the line goes to {@link #clones}.
     */
    private void cloneAndCopy(Namespace ns, Handle root, Handle file, int qd, Arena arena) {
        long t0 = System.nanoTime();
        try (Handle clone = ns.create(root, "bench-qd" + qd + "-clone", 0644, true)) {
            ns.cloneFile(file, clone);
            ns.fsync(clone);
        }
        long cloneNs = System.nanoTime() - t0;
        MemorySegment chunk = arena.allocate(FILL_CHUNK, BlockDevice.BUFFER_ALIGNMENT);
        t0 = System.nanoTime();
        try (Handle copy = ns.create(root, "bench-qd" + qd + "-copy", 0644, true)) {
            for (long off = 0; off < fileSize; off += FILL_CHUNK) {
                ns.read(file, off, chunk);
                ns.write(copy, off, chunk);
            }
            ns.fsync(copy);
        }
        long copyNs = System.nanoTime() - t0;
        ns.unlink(root, "bench-qd" + qd + "-copy");
        clones.add(String.format(Locale.ROOT, "ferrite %s: clone of the %d MiB file (%d extents) %.2f ms; copy %.1f ms (%.0fx)",
                phase(qd), fileSize >> 20, ns.extents(file, 0, fileSize).size(), cloneNs / 1e6, copyNs / 1e6, (double) copyNs / cloneNs));
    }

    /**
     * Untimed, before Ferrite's first phase: the phases' own writes (overwrites, or first writes into
     * fallocated space) into a file of up to 64 MiB for up to a second, so that no phase, however short,
     * pays for the JIT compiling the write path; fio is native code.
     */
    private void warmUp(Namespace ns, Handle root, Arena arena, Progress progress) {
        long bytes = Math.min(fileSize, 64L << 20), blocks = bytes / blockSize;
        try (Handle f = ns.create(root, "warm-up", 0644, true)) {
            if (unwritten) {
                ns.fallocate(f, 0, 0, bytes);
            } else {
                fillFerriteFile(ns, f, bytes, arena, progress);
            }
            MemorySegment buf = fillRandom(arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT), new SplittableRandom(SEED));
            SplittableRandom random = new SplittableRandom(SEED);
            long stride = coprimeStride(blocks);
            long end = System.nanoTime() + Math.min(TimeUnit.SECONDS.toNanos(1), Math.round(seconds * 1e9));
            for (long i = 0; System.nanoTime() - end < 0 && (!unwritten || i < blocks); i++) {
                ns.write(f, (unwritten ? Math.floorMod(i * stride, blocks) : random.nextLong(blocks)) * blockSize, buf);
            }
        }
        ns.unlink(root, "warm-up");
    }

    private void fillFerriteFile(Namespace ns, Handle file, long bytes, Arena arena, Progress progress) {
        MemorySegment chunk = arena.allocate(FILL_CHUNK, BlockDevice.BUFFER_ALIGNMENT);
        fillRandom(chunk, new SplittableRandom(SEED));
        for (long off = 0; off < bytes; off += FILL_CHUNK) {
            ns.write(file, off, chunk);
            progress.update("fill", Target.FERRITE.label(), off / FILL_CHUNK, -1);
        }
        progress.done();
    }

    private Result ferritePhase(Namespace ns, Handle file, int threads, Arena arena, Progress progress) {
        String phase = phase(threads);
        long blocks = fileSize / blockSize;
        Histogram[] hs = new Histogram[threads];
        MemorySegment[] buffers = new MemorySegment[threads];
        for (int i = 0; i < threads; i++) {
            hs[i] = Result.newHistogram();
            buffers[i] = fillRandom(arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT), new SplittableRandom(SEED + i));
        }
        ThreadCounts done = new ThreadCounts(threads);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong next = new AtomicLong();
        long stride = coprimeStride(blocks);
        PhaseTimer timer = new PhaseTimer(phase, Target.FERRITE.label(), TimeUnit.MILLISECONDS.toNanos(Math.round(seconds * 1000)), progress);
        CpuMeter.Sample cpu = CpuMeter.sample();
        GcMeter gc = GcMeter.start();
        Throwable failure = Workers.run(threads, "randwrite-ferrite", timer, done::total, stop, id -> {
            SplittableRandom random = new SplittableRandom(SEED * 31 + id);
            Histogram h = hs[id];
            MemorySegment buf = buffers[id];
            long n = 0;
            while (!stop.get()) {
                long off;
                if (unwritten) { // one pass, in a scattered order: each write lands in unwritten space
                    long i = next.getAndIncrement();
                    if (i >= blocks) {
                        break;
                    }
                    off = Math.floorMod(i * stride, blocks) * blockSize;
                } else {
                    off = random.nextLong(blocks) * blockSize;
                }
                long t0 = System.nanoTime();
                ns.write(file, off, buf);
                h.recordValue(System.nanoTime() - t0);
                done.set(id, ++n);
            }
        });
        long elapsed = timer.finish(System.nanoTime());
        if (failure != null) {
            throw new FerriteException(phase + " on ferrite failed: " + failure, failure);
        }
        Histogram all = Result.newHistogram();
        for (Histogram h : hs) {
            all.add(h);
        }
        return Result.of(WORKLOAD, phase, Target.FERRITE.label(), threads, all.getTotalCount() * 1e9 / elapsed, UNIT, all)
                .withCpus(CpuMeter.busyCpusSince(cpu)).withGc(gc.pauses());
    }

    /**
     * Ferrite's own cost per write, apart from the device's drift between phases and runs: for as long as
     * a phase, {@code threads} writers alternate 50 ms slices, in step by the clock, of Ferrite's write at
     * a random offset with this JVM's {@link BlockDevice#write} of the same bytes to the device blocks the
     * file maps that offset to (the same device, the same blocks, the same load, the same downcall), and
     * the line compares the two: p50 and mean latency, thread CPU per write and the rate.
     */
    private String ownCost(Namespace ns, Handle file, BlockDevice dev, int threads, Arena arena, Progress progress) {
        List<FileExtent> extents = ns.extents(file, 0, fileSize);
        long blocks = fileSize / blockSize;
        long slice = TimeUnit.MILLISECONDS.toNanos(50);
        Histogram[][] hs = new Histogram[2][threads];
        long[][] n = new long[2][threads], cpu = new long[2][threads];
        MemorySegment[] buffers = new MemorySegment[threads];
        for (int i = 0; i < threads; i++) {
            hs[0][i] = Result.newHistogram();
            hs[1][i] = Result.newHistogram();
            buffers[i] = fillRandom(arena.allocate(blockSize, BlockDevice.BUFFER_ALIGNMENT), new SplittableRandom(SEED + i));
        }
        ThreadCounts done = new ThreadCounts(threads);
        AtomicBoolean stop = new AtomicBoolean();
        PhaseTimer timer = new PhaseTimer("own cost", Target.FERRITE.label(), TimeUnit.MILLISECONDS.toNanos(Math.round(seconds * 1000)),
                progress);
        long start = System.nanoTime();
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Throwable failure = Workers.run(threads, "randwrite-own-cost", timer, done::total, stop, id -> {
            SplittableRandom random = new SplittableRandom(SEED * 37 + id);
            MemorySegment buf = buffers[id];
            int mode = -1;
            long cpuAt = 0, total = 0;
            while (!stop.get()) {
                long off = random.nextLong(blocks) * blockSize;
                FileExtent x = extentHolding(extents, off);
                if (x == null) {
                    continue; // a write that would span two extents: one device write cannot stand in for it
                }
                long t0 = System.nanoTime();
                int m = (int) ((t0 - start) / slice & 1); // 0: Ferrite, 1: the device
                if (m != mode) {
                    long c = mx.getCurrentThreadCpuTime();
                    if (mode >= 0) {
                        cpu[mode][id] += c - cpuAt;
                    }
                    mode = m;
                    cpuAt = mx.getCurrentThreadCpuTime(); // after the call: its own cost counts for neither
                    t0 = System.nanoTime();
                }
                if (m == 0) {
                    ns.write(file, off, buf);
                } else {
                    dev.write((x.deviceOffset() + off - x.offset()) / dev.blockSize(), buf);
                }
                hs[m][id].recordValue(System.nanoTime() - t0);
                n[m][id]++;
                done.set(id, ++total);
            }
            if (mode >= 0) {
                cpu[mode][id] += mx.getCurrentThreadCpuTime() - cpuAt;
            }
        });
        timer.finish(System.nanoTime());
        if (failure != null) {
            throw new FerriteException("own cost on ferrite failed: " + failure, failure);
        }
        Histogram[] all = {Result.newHistogram(), Result.newHistogram()};
        long[] count = new long[2], cpuNs = new long[2];
        for (int m = 0; m < 2; m++) {
            for (int i = 0; i < threads; i++) {
                all[m].add(hs[m][i]);
                count[m] += n[m][i];
                cpuNs[m] += cpu[m][i];
            }
        }
        if (count[0] == 0 || count[1] == 0) {
            return "too few writes to compare";
        }
        double p50f = all[0].getValueAtPercentile(50) / 1e3, p50d = all[1].getValueAtPercentile(50) / 1e3;
        double cpuF = cpuNs[0] / 1e3 / count[0], cpuD = cpuNs[1] / 1e3 / count[1];
        return String.format(Locale.ROOT, "p50 %.2f vs %.2f µs (%+.2f), mean %.2f vs %.2f µs, thread CPU %.2f vs %.2f µs per write (%+.2f),"
                        + " rate ratio %.3f (%d and %d writes): Ferrite's write against this JVM's device write of the same blocks,"
                        + " 50 ms slices alternating", p50f, p50d, p50f - p50d, all[0].getMean() / 1e3, all[1].getMean() / 1e3,
                cpuF, cpuD, cpuF - cpuD, (double) count[0] / count[1], count[0], count[1]);
    }

    /** The extent of {@code extents} (sorted, written) that holds the whole write at {@code offset}, or null. */
    private FileExtent extentHolding(List<FileExtent> extents, long offset) {
        int lo = 0, hi = extents.size() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            FileExtent x = extents.get(mid);
            if (x.end() <= offset) {
                lo = mid + 1;
            } else if (x.offset() > offset) {
                hi = mid - 1;
            } else {
                return offset + blockSize <= x.end() && !x.unwritten() ? x : null;
            }
        }
        return null;
    }

    /** Writes the whole file through the page cache, then fsyncs it: written extents, as on Ferrite. */
    /** Writes the first {@code fileSize} bytes of {@code file} (a new file, or the raw device) and syncs them. */
    private void fill(Path file, StandardOpenOption... options) {
        try (FileChannel ch = FileChannel.open(file, options)) {
            ByteBuffer chunk = ByteBuffer.allocateDirect(FILL_CHUNK);
            SplittableRandom random = new SplittableRandom(SEED);
            while (chunk.hasRemaining()) {
                chunk.putLong(random.nextLong());
            }
            for (long off = 0; off < fileSize; off += FILL_CHUNK) {
                chunk.clear();
                while (chunk.hasRemaining()) {
                    ch.write(chunk, off + chunk.position());
                }
            }
            ch.force(true);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file + ": " + e.getMessage(), e);
        }
    }

    private Result fio(Target t, Path file, int threads, Progress progress) {
        String phase = phase(threads);
        List<String> args = new ArrayList<>(List.of("--filename=" + Fio.filename(file), "--rw=randwrite",
                "--bs=" + blockSize, "--direct=1", "--ioengine=psync", "--numjobs=" + threads, "--group_reporting",
                "--randrepeat=0"));
        if (unwritten) {
            // one pass in random order (fio's random map: each block once), into space fallocated unwritten;
            // the jobs share one file, each its own slice, so that every block is written once
            long slice = fileSize / threads / blockSize * blockSize;
            args.addAll(List.of("--size=" + slice, "--offset_increment=" + slice, "--fallocate=native"));
        } else {
            args.addAll(List.of("--size=" + fileSize, "--norandommap"));
        }
        CpuMeter.Sample cpu = CpuMeter.sample(); // the machine's, over fio's whole run (its start-up included)
        Fio.Report report = unwritten ? fio.runOnePass(phase + "-" + t.label(), args, seconds, progress)
                : fio.run(phase + "-" + t.label(), args, seconds, progress);
        Fio.Stats s = report.io("write");
        return new Result(WORKLOAD, phase, t.label(), threads, s.n(), s.iops(), UNIT, s.p50Us(), s.p99Us(), s.p999Us(), s.maxUs(), Double.NaN)
                .withCpus(CpuMeter.busyCpusSince(cpu));
    }

    /** A stride coprime to {@code blocks}: i * stride mod blocks visits every block once, scattered. */
    private static long coprimeStride(long blocks) {
        long stride = (long) (blocks * 0.6180339887) | 1;
        while (BigInteger.valueOf(stride).gcd(BigInteger.valueOf(blocks)).longValue() != 1) {
            stride += 2;
        }
        return stride;
    }

    private static MemorySegment fillRandom(MemorySegment m, SplittableRandom random) {
        for (long o = 0; o < m.byteSize(); o += 8) {
            m.set(JAVA_LONG_UNALIGNED, o, random.nextLong());
        }
        return m;
    }
}
