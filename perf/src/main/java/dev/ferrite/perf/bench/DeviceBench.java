package dev.ferrite.perf.bench;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.IoEngineKind;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

import org.HdrHistogram.Histogram;

/**
 * The raw device through native-io, phase by phase, each followed by fio's equivalent job on the same
 * file for the same time when fio is given:
 * <ol>
 *   <li>{@code seq-write}: 1 MiB writes in order, one at a time, MB/s. Runs first and at least once over
 *       the whole file, so later phases find written blocks rather than fallocate's unwritten extents
 *       (which cost ext4 and XFS an extent conversion per write);</li>
 *   <li>{@code randwrite-qd1}: 4 KiB writes to uniformly random blocks, one at a time, IOPS;</li>
 *   <li>{@code randwrite-qd32}, {@code randread-qd32}: the same through {@link IoBatch}es of
 *       {@value #BATCH} requests kept {@value #QUEUE_DEPTH} deep, once per I/O engine asked for;</li>
 *   <li>{@code fdatasync}: one 4 KiB write then {@link BlockDevice#flush()}, in order; the latencies are
 *       the flush's, the rate is write+flush pairs per second.</li>
 * </ol>
 * Random offsets come from fixed seeds and fio runs with {@code norandommap}, so both sides pick blocks
 * uniformly with repeats. Write buffers hold random bytes, as fio's do. Every phase, ferrite's and fio's,
 * starts after an untimed flush, so that none pays for the write-back of the one before it.
 */
public final class DeviceBench {
    public static final String WORKLOAD = "device";
    public static final String SEQ_WRITE = "seq-write";
    public static final String RANDWRITE_QD1 = "randwrite-qd1";
    public static final String RANDWRITE_QD32 = "randwrite-qd32";
    public static final String RANDREAD_QD32 = "randread-qd32";
    public static final String FDATASYNC = "fdatasync";
    public static final List<String> PHASES = List.of(SEQ_WRITE, RANDWRITE_QD1, RANDWRITE_QD32, RANDREAD_QD32, FDATASYNC);

    /** Bytes per sequential write, and the unit the device size must be a multiple of. */
    public static final int SEQ_BYTES = 1 << 20;
    static final int BLOCK = DeviceOptions.DEFAULT_BLOCK_SIZE;
    static final int QUEUE_DEPTH = 32;
    /** Requests per batch: large, so the queue drains at batch ends only once per ~1000 requests. */
    static final int BATCH = 1024;

    private static final String FERRITE = "ferrite";
    private static final String FIO = "fio";
    private static final String MB_PER_S = "MB/s", IOPS = "IOPS", SYNCS_PER_S = "syncs/s";
    private static final String READ = "read", WRITE = "write", SYNC = "sync";

    private final Path path;
    private final long size;
    private final double seconds;
    private final List<IoEngineKind> engines;
    private final Fio fio;

    /**
     * @param path    regular file (created or extended to {@code size}) or block device; its contents are lost
     * @param size    bytes to use, a positive multiple of {@link #SEQ_BYTES}
     * @param seconds length of each phase
     * @param engines engines to run the queue-depth phases with, each as its own target
     * @param fio     fio to compare against, or null
     */
    public DeviceBench(Path path, long size, double seconds, List<IoEngineKind> engines, Fio fio) {
        if (size < SEQ_BYTES || size % SEQ_BYTES != 0) {
            throw new IllegalArgumentException("device size " + size + " is not a positive multiple of " + SEQ_BYTES);
        }
        if (!(seconds > 0)) {
            throw new IllegalArgumentException("phase length " + seconds + " s is not positive");
        }
        if (engines.isEmpty()) {
            throw new IllegalArgumentException("no I/O engine to run the queue-depth phases with");
        }
        this.path = path;
        this.size = size;
        this.seconds = seconds;
        this.engines = List.copyOf(engines);
        this.fio = fio;
    }

    /** Runs every phase; returns ferrite's and fio's results in phase order. */
    public List<Result> run(Progress progress) {
        List<Result> results = new ArrayList<>();
        List<DirectDevice> devices = new ArrayList<>();
        // Shared: the THREADS engine's workers transfer into these buffers, and a confined segment fails there.
        try (Arena arena = Arena.ofShared()) {
            for (IoEngineKind engine : engines) {
                devices.add(DirectDevice.open(path, DeviceOptions.defaults()
                        .withSize(size).withIoDepth(QUEUE_DEPTH).withEngine(engine)));
            }
            DirectDevice device = devices.getFirst();
            MemorySegment seqBuffer = randomBytes(arena.allocate(SEQ_BYTES, BlockDevice.BUFFER_ALIGNMENT), 1);
            MemorySegment slab = randomBytes(arena.allocate((long) BATCH * BLOCK, BlockDevice.BUFFER_ALIGNMENT), 2);
            MemorySegment[] buffers = new MemorySegment[BATCH];
            for (int i = 0; i < BATCH; i++) {
                buffers[i] = slab.asSlice((long) i * BLOCK, BLOCK);
            }

            results.add(seqWrite(device, seqBuffer, progress));
            fio(results, device, SEQ_WRITE, WRITE, MB_PER_S, progress, "--rw=write", "--bs=1M", "--ioengine=psync");

            results.add(randomWriteQd1(device, buffers[0], progress));
            fio(results, device, RANDWRITE_QD1, WRITE, IOPS, progress,
                    "--rw=randwrite", "--bs=4k", "--ioengine=psync", "--norandommap", "--randrepeat=0");

            for (DirectDevice d : devices) {
                results.add(queueDepth(d, true, buffers, progress));
            }
            fio(results, device, RANDWRITE_QD32, WRITE, IOPS, progress, "--rw=randwrite", "--bs=4k",
                    "--ioengine=io_uring", "--iodepth=" + QUEUE_DEPTH, "--norandommap", "--randrepeat=0");

            for (DirectDevice d : devices) {
                results.add(queueDepth(d, false, buffers, progress));
            }
            fio(results, device, RANDREAD_QD32, READ, IOPS, progress, "--rw=randread", "--bs=4k",
                    "--ioengine=io_uring", "--iodepth=" + QUEUE_DEPTH, "--norandommap", "--randrepeat=0");

            results.add(fdatasync(device, buffers[0], progress));
            fio(results, device, FDATASYNC, SYNC, SYNCS_PER_S, progress,
                    "--rw=write", "--bs=4k", "--ioengine=psync", "--fdatasync=1");
        } finally {
            for (DirectDevice d : devices) {
                d.close();
            }
        }
        return results;
    }

    private Result seqWrite(DirectDevice device, MemorySegment buffer, Progress progress) {
        device.flush();
        long chunks = size / SEQ_BYTES;
        long blocksPerChunk = SEQ_BYTES / device.blockSize();
        Histogram h = Result.newHistogram();
        PhaseTimer timer = new PhaseTimer(SEQ_WRITE, FERRITE, nanos(), progress);
        long now = timer.start(), chunk = 0;
        boolean covered = false;
        // '|', not '||': the progress line keeps moving while a first pass outlasts the deadline.
        do {
            device.write(chunk * blocksPerChunk, buffer);
            long end = System.nanoTime();
            h.recordValue(end - now);
            now = end;
            if (++chunk == chunks) {
                chunk = 0;
                covered = true;
            }
        } while (timer.running(h.getTotalCount(), now) | !covered);
        double mbPerSecond = h.getTotalCount() * (double) SEQ_BYTES / timer.finish(now) * 1e3;
        return Result.of(WORKLOAD, SEQ_WRITE, FERRITE, 1, mbPerSecond, MB_PER_S, h);
    }

    private Result randomWriteQd1(DirectDevice device, MemorySegment buffer, Progress progress) {
        device.flush();
        SplittableRandom random = new SplittableRandom(RANDWRITE_QD1.hashCode());
        long blocks = device.blockCount();
        Histogram h = Result.newHistogram();
        PhaseTimer timer = new PhaseTimer(RANDWRITE_QD1, FERRITE, nanos(), progress);
        long now = timer.start();
        do {
            device.write(random.nextLong(blocks), buffer);
            long end = System.nanoTime();
            h.recordValue(end - now);
            now = end;
        } while (timer.running(h.getTotalCount(), now));
        return Result.of(WORKLOAD, RANDWRITE_QD1, FERRITE, 1, perSecond(h, timer.finish(now)), IOPS, h);
    }

    private Result queueDepth(DirectDevice device, boolean write, MemorySegment[] buffers, Progress progress) {
        device.flush();
        String phase = write ? RANDWRITE_QD32 : RANDREAD_QD32;
        String target = FERRITE + "/" + device.engine().name().toLowerCase(Locale.ROOT);
        SplittableRandom random = new SplittableRandom(phase.hashCode());
        long blocks = device.blockCount();
        IoBatch batch = new IoBatch(BATCH).timed(true);
        Histogram h = Result.newHistogram();
        PhaseTimer timer = new PhaseTimer(phase, target, nanos(), progress);
        long now;
        do {
            batch.clear();
            for (int i = 0; i < BATCH; i++) {
                if (write) {
                    batch.write(random.nextLong(blocks), buffers[i]);
                } else {
                    batch.read(random.nextLong(blocks), buffers[i]);
                }
            }
            device.submit(batch);
            for (int i = 0; i < BATCH; i++) {
                h.recordValue(batch.latencyNanos(i));
            }
            now = System.nanoTime();
        } while (timer.running(h.getTotalCount(), now));
        return Result.of(WORKLOAD, phase, target, 1, perSecond(h, timer.finish(now)), IOPS, h);
    }

    private Result fdatasync(DirectDevice device, MemorySegment buffer, Progress progress) {
        device.flush();
        long blocks = device.blockCount(), block = 0;
        Histogram h = Result.newHistogram();
        PhaseTimer timer = new PhaseTimer(FDATASYNC, FERRITE, nanos(), progress);
        long now;
        do {
            device.write(block, buffer);
            long flushStart = System.nanoTime();
            device.flush();
            now = System.nanoTime();
            h.recordValue(now - flushStart);
            block = block + 1 == blocks ? 0 : block + 1;
        } while (timer.running(h.getTotalCount(), now));
        return Result.of(WORKLOAD, FDATASYNC, FERRITE, 1, perSecond(h, timer.finish(now)), SYNCS_PER_S, h);
    }

    /** Runs fio's equivalent of {@code phase} if fio is there; {@code section} holds the figures in its report. */
    private void fio(List<Result> results, DirectDevice device, String phase, String section, String unit,
                     Progress progress, String... job) {
        if (fio == null) {
            return;
        }
        device.flush();
        List<String> args = new ArrayList<>(List.of("--filename=" + Fio.filename(path), "--size=" + size, "--direct=1"));
        args.addAll(List.of(job));
        Fio.Report report = fio.run(phase, args, seconds, progress);
        Fio.Stats s = section.equals(SYNC) ? report.sync() : report.io(section);
        double rate = unit.equals(MB_PER_S) ? s.bytesPerSecond() / 1e6 : s.iops();
        results.add(new Result(WORKLOAD, phase, FIO, 1, s.n(), rate, unit, s.p50Us(), s.p99Us(), s.p999Us(), s.maxUs(), Double.NaN));
    }

    private long nanos() {
        return Math.round(seconds * 1e9);
    }

    private static double perSecond(Histogram h, long elapsedNanos) {
        return h.getTotalCount() * 1e9 / elapsedNanos;
    }

    private static MemorySegment randomBytes(MemorySegment segment, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        for (long off = 0; off < segment.byteSize(); off += Long.BYTES) {
            segment.set(ValueLayout.JAVA_LONG_UNALIGNED, off, random.nextLong());
        }
        return segment;
    }
}
