package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;

/**
 * dbench's NetBench workload on every target in one run, each on its own RAM-backed loop device of the
 * same size, made for it and removed after it:
 * <ul>
 *   <li>{@code ferrite}: a volume formatted with its defaults on the device, the loadfile replayed through
 *       the namespace by {@link FerriteDbench};
 *   <li>{@code fuse}: the same volume mounted through FUSE ({@link FuseVolume}) and the real {@code dbench}
 *       run on it: Ferrite as unmodified programs see it, each call a round trip to the volume's server;
 *   <li>{@code xfs}, {@code ext4}, {@code btrfs}: the file system made with mkfs's defaults and mounted
 *       with the kernel's, and the real {@code dbench} run on it ({@link DbenchBinary}).
 * </ul>
 * Both sides replay the same loadfile with the same clients for the same time after the same warm-up (a
 * fifth of the time, whole seconds: dbench's default), count throughput the same way, and make data
 * durable only where the loadfile says Flush. A target that cannot be made here (not root, a tool
 * missing) is skipped with a note; one that fails is reported beside the others' results.
 */
public final class DbenchBench {
    /** Where the loadfile is replayed. */
    public enum Target implements LoopTargets.Target {
        FERRITE, FUSE, XFS, EXT4, BTRFS;

        @Override
        public String label() {
            return this == FUSE ? "ferrite-fuse" : name().toLowerCase(Locale.ROOT);
        }

        @Override
        public LoopDevice.Kind deviceKind() {
            return switch (this) {
                case FERRITE, FUSE -> LoopDevice.Kind.RAW;
                case XFS -> LoopDevice.Kind.XFS;
                case EXT4 -> LoopDevice.Kind.EXT4;
                case BTRFS -> LoopDevice.Kind.BTRFS;
            };
        }
    }

    /** Room per client: a client.txt tree peaks near 25 MB, and a file system wants space to spare. */
    private static final long BYTES_PER_CLIENT = 128L << 20;
    private static final long MIN_DEVICE = 1L << 30;

    private final Path dir;
    private final DbenchLoadfile load;
    private final Path loadfile;
    private final List<Integer> clients;
    private final int seconds;
    private final List<Target> targets;
    private final DbenchBinary dbench;
    private final VolumeOptions volumeOptions;
    private final int jitWarmup;
    private final List<String> notes = new ArrayList<>();
    private final List<String> configurations = new ArrayList<>();
    /** What Ferrite's threads waited on in each run ({@link Contention}). */
    private final List<String> contention = new ArrayList<>();
    private final List<String> stalls = new ArrayList<>();
    private long stallNanos;

    /**
     * @param dir      a RAM-backed directory for the loop devices' images and mount points
     * @param load     the parsed loadfile, for the Ferrite replay
     * @param loadfile the same file, for dbench
     * @param clients  client counts, one run each per target
     * @param seconds  measured seconds of each run, after a warm-up of a fifth of them
     * @param dbench   the dbench binary, or null to run only {@code ferrite}
     * @param volumeOptions what the Ferrite volume is formatted and mounted with
     * @param jitWarmup seconds of an untimed Ferrite replay with the most clients before the first measured
     *                  one, for the JIT (dbench is native), then a second more at a time while the JIT stays
     *                  busy ({@link JitSettle#whileBusy}); 0 for none
     */
    public DbenchBench(Path dir, DbenchLoadfile load, Path loadfile, List<Integer> clients, int seconds,
                       List<Target> targets, DbenchBinary dbench, VolumeOptions volumeOptions, int jitWarmup) {
        this.dir = dir;
        this.load = load;
        this.loadfile = loadfile;
        this.clients = List.copyOf(clients);
        this.seconds = seconds;
        this.targets = List.copyOf(targets);
        this.dbench = dbench;
        this.volumeOptions = volumeOptions;
        this.jitWarmup = jitWarmup;
    }

    /** Bytes of each target's loop device. */
    public long deviceBytes() {
        int most = clients.stream().mapToInt(Integer::intValue).max().orElse(1);
        return Math.max(MIN_DEVICE, most * BYTES_PER_CLIENT);
    }

    /** dbench's warm-up: a fifth of the time, in whole seconds. */
    public int warmupSeconds() {
        return seconds / 5;
    }

    /** What the run could not do (a target skipped or stopped), one line each. */
    public List<String> notes() {
        return notes;
    }

    /** How each target that ran was set up and what it makes durable, one line each. */
    public List<String> configurations() {
        return configurations;
    }

    /** Watches Ferrite's measured operations of {@code nanos} or more ({@link Stalls}); 0 for none. */
    public void watchStalls(long nanos) {
        stallNanos = nanos;
    }

    /** What Ferrite's slow operations spent their time on in each run, a line each, if watched. */
    public List<String> stalls() {
        return List.copyOf(stalls);
    }

    /** Ferrite's counters over each run (its warm-up included), a line each ({@link Contention}). */
    public List<String> contention() {
        return contention;
    }

    public List<DbenchResult> run(Progress progress) {
        List<DbenchResult> results = new ArrayList<>();
        LoopTargets.run(targets, dir, deviceBytes(), t -> t != Target.FERRITE && dbench == null
                ? Optional.of("dbench is not on the PATH (Debian/Ubuntu: apt-get install dbench)")
                : t == Target.FUSE ? FuseVolume.unavailable() : Optional.empty(),
                notes, progress, (t, loop) -> {
                    if (t == Target.FERRITE) {
                        ferrite(loop.device(), results, progress);
                        return;
                    }
                    if (t == Target.FUSE) {
                        fuse(loop.device(), results, progress);
                        return;
                    }
                    configurations.add(String.format(Locale.ROOT, "%-7s mkfs.%s defaults, mounted %s; %s -c %s -t %d -D <mount> N"
                                    + " (fileio backend: page cache, no O_SYNC, no -F/-S: fsync on Flush only)",
                            t.label(), t.label(), loop.mountOptions(), dbench.executable(), loadfile, seconds));
                    for (int c : clients) {
                        results.add(dbench.run(loadfile, loop.mountPoint(), c, seconds, t.label(), progress));
                    }
                });
        return results;
    }

    /** dbench on the volume mounted through FUSE, the volume made as {@link #ferrite}'s is. */
    private void fuse(Path device, List<DbenchResult> results, Progress progress) {
        try (FuseVolume f = FuseVolume.create(device, dir, dev -> volumeOptions)) {
            configurations.add(String.format(Locale.ROOT, "%-7s %s; %s -c %s -t %d -D <mount> N (fsync on Flush only)",
                    Target.FUSE.label(), f.describe(), dbench.executable(), loadfile, seconds));
            for (int c : clients) {
                Contention.Snapshot before = f.counters();
                DbenchResult r = dbench.run(loadfile, f.mountPoint(), c, seconds, Target.FUSE.label(), progress);
                contention.add(Target.FUSE.label() + " x" + c + ": " + Contention.between(before, f.counters(), r.totalOps()));
                results.add(r);
            }
        }
    }

    private void ferrite(Path device, List<DbenchResult> results, Progress progress) {
        VolumeOptions options = volumeOptions;
        configurations.add(String.format(Locale.ROOT, "%-7s volume with %s on the raw loop device"
                + " (O_DIRECT); loadfile replayed through Namespace by path, %d s after a %d s warm-up (and once, before"
                + " the first run, %d s untimed for the JIT and a second at a time more while it stays busy); files opened"
                + " O_RDWR; ReadX/WriteX from a buffer 16 bytes into a page, as dbench's calloc gives it, so all"
                + " through the data page cache (%s; dirty pages written back at fsync, within 1 s of the last close, age or"
                + " pressure); no O_SYNC: fsync on Flush only; LockX/UnlockX in an in-process table",
                "ferrite", "VolumeOptions.defaults()" + (options.dataCacheBytes() == 0 ? ""
                        : ".withDataCacheBytes(" + options.dataCacheBytes() + ")"), seconds, warmupSeconds(), jitWarmup,
                options.dataCacheBytes() == 0 ? "its default budget" : options.dataCacheBytes() + " bytes"));
        try (DirectDevice dev = DirectDevice.open(device, DeviceOptions.defaults())) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                FerriteDbench replay = new FerriteDbench(v, load);
                if (jitWarmup > 0) {
                    int most = clients.stream().mapToInt(Integer::intValue).max().orElse(1);
                    long warmUpStart = System.nanoTime();
                    // with a warm-up of its own: the JIT sees the replay's loop both before and in its measured time
                    // (measured from its first operation, the loop was thrown out and compiled again in the first run)
                    replay.run(most, 0.8 * jitWarmup, 0.2 * jitWarmup, progress);
                    long first = System.nanoTime() - warmUpStart;
                    // again, briefly, with fresh clients: see JitSettle; then a second at a time, one client and
                    // then the most in turn as the measured runs go, while the JIT is busy through one
                    replay.run(most, Math.max(1, 0.1 * jitWarmup), 0.02 * jitWarmup, progress);
                    int[] turn = {0};
                    int repeats = JitSettle.whileBusy(() -> replay.run(turn[0]++ % 2 == 0 ? 1 : most, 1, 0, progress), first);
                    double warmed = (System.nanoTime() - warmUpStart) / 1e9;
                    String jit = JitSettle.await(progress, System.nanoTime() - warmUpStart);
                    notes.add(String.format(Locale.ROOT, "note:    ferrite: a JIT warm-up of %.1f s, %d s of it while the JIT was busy%s",
                            warmed, repeats, jit.isEmpty() ? "" : "; " + jit));
                }
                for (int c : clients) {
                    Contention.Snapshot before = Contention.Snapshot.of(v);
                    Stalls watch = stallNanos > 0 ? Stalls.watch(stallNanos, FerriteDbench.WORKERS + "-") : null;
                    DbenchResult r = replay.run(c, seconds, warmupSeconds(), progress, watch);
                    contention.add("ferrite x" + c + ": " + Contention.between(before, Contention.Snapshot.of(v), r.totalOps()));
                    if (watch != null) {
                        stalls.add("ferrite x" + c + ": " + watch.summary(r.totalOps()));
                    }
                    results.add(r);
                }
            }
        }
    }
}
