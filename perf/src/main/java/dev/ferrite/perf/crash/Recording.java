package dev.ferrite.perf.crash;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Level;
import java.util.logging.Logger;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.RecordingDevice.Event;

/**
 * A workload run on a {@link RecordingDevice} over a copy of its base image: the events it made, where
 * each flush is, and the lanes' models with what each persistence point acknowledged and from which
 * crash states on (a state holds an acknowledgement once its prefix holds the last flush before the
 * op returned: that flush, or an earlier one, made the op durable).
 */
final class Recording {
    /**
     * A small volume keeps images cheap to copy and mounts cheap: 16 MiB, two groups, the smallest log,
     * small caches (so write-back under cache pressure is exercised too).
     */
    static final int BLOCKS = 4096;
    static final int BLOCK_SIZE = 4096;
    static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(2).withLogBlocks(1024)
            .withCacheBytes(2L << 20).withDataCacheBytes(256L << 10);

    /**
     * Every crash state mounts a volume that was not unmounted cleanly, which the volume notes as a
     * warning: hundreds a second here. Held so that the level set stays set.
     */
    private static final Logger QUIET = Logger.getLogger("dev.ferrite.dir");

    static {
        QUIET.setLevel(Level.SEVERE);
    }

    private static final Map<Integer, MemoryDevice> BASES = new ConcurrentHashMap<>();

    final Workload workload;
    final List<Event> events;
    final int[] flushes;
    final List<Lane> lanes;
    /** Per lane, per acknowledgement: the smallest crash-state prefix that holds it. */
    final List<int[]> durableFrom = new ArrayList<>();

    private Recording(Workload workload, List<Event> events, int[] flushes, List<Lane> lanes, List<List<Integer>> ackEvents) {
        this.workload = workload;
        this.events = events;
        this.flushes = flushes;
        this.lanes = lanes;
        for (List<Integer> lane : ackEvents) {
            int[] from = new int[lane.size()];
            for (int i = 0; i < from.length; i++) {
                from[i] = durableFrom(flushes, lane.get(i));
            }
            durableFrom.add(from);
        }
    }

    /** The smallest crash-state prefix holding the last of {@code flushes} before event {@code ack}: the one that made it durable. */
    static int durableFrom(int[] flushes, int ack) {
        int last = -1;
        for (int f : flushes) {
            if (f < ack) {
                last = f;
            }
        }
        return last + 1;
    }

    /**
     * The base image for {@code lanes} lanes, formatted and set up once per process and shared (read
     * only): free space first filled with bytes no workload writes (0xA5), so that an exposed unwritten
     * block shows them; table {@link Lane#TABLE}; each lane's directory with {@link Workload#SETUP}; synced
     * and cleanly unmounted.
     */
    static MemoryDevice base(int lanes) {
        return BASES.computeIfAbsent(lanes, Recording::makeBase);
    }

    private static MemoryDevice makeBase(int lanes) {
        MemoryDevice dev = MemoryDevice.create("base", BLOCKS, BLOCK_SIZE);
        Volume.format(dev, OPTIONS);
        try (Volume v = Volume.open(dev, OPTIONS); Table t = v.tables().create(Lane.TABLE)) {
            Namespace ns = v.namespace();
            ns.create("/junk", 0644, true);
            try (Handle junk = ns.open("/junk"); Arena arena = Arena.ofConfined()) {
                MemorySegment j = arena.allocate(1 << 20, BlockDevice.BUFFER_ALIGNMENT);
                j.fill((byte) 0xA5);
                for (int k = 0; k < 6; k++) {
                    ns.write(junk, (long) k << 20, j);
                }
                ns.fsync(junk);
            }
            ns.unlink("/junk");
            for (int l = 0; l < lanes; l++) {
                Lane lane = new Lane(l);
                ns.mkdir(lane.root, 0755);
                for (Op op : Workload.SETUP) {
                    lane.run(v, t, op, () -> 0);
                }
            }
            v.sync();
        }
        return dev;
    }

    /** Runs {@code w} over a copy of its base image; throws what an op threw, with the op named. */
    static Recording record(Workload w) {
        int laneCount = w.lanes().size();
        MemoryDevice base = base(laneCount);
        List<Lane> lanes = new ArrayList<>();
        for (int l = 0; l < laneCount; l++) {
            Lane lane = new Lane(l);
            for (Op op : Workload.SETUP) {
                lane.apply(op, 0);
            }
            lane.start();
            lanes.add(lane);
        }
        try (RecordingDevice rec = RecordingDevice.wrap(base.copy("recorded"))) {
            try (Volume v = Volume.open(rec, OPTIONS); Table t = v.tables().open(Lane.TABLE)) {
                List<Thread> threads = new ArrayList<>();
                RuntimeException[] failed = new RuntimeException[laneCount];
                for (int l = 0; l < laneCount; l++) {
                    Lane lane = lanes.get(l);
                    List<Op> ops = w.lanes().get(l);
                    int at = l;
                    Runnable run = () -> {
                        for (Op op : ops) {
                            try {
                                lane.run(v, t, op, rec::eventCount);
                            } catch (RuntimeException e) {
                                failed[at] = new IllegalStateException("lane " + at + ", op " + (lane.opCount() + 1) + " (" + op + ") failed: " + e, e);
                                return;
                            }
                        }
                    };
                    if (laneCount == 1) {
                        run.run();
                    } else {
                        threads.add(Thread.ofPlatform().name("crashtest-lane-" + l).start(run));
                    }
                }
                for (Thread th : threads) {
                    try {
                        th.join();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while lanes ran", e);
                    }
                }
                for (RuntimeException e : failed) {
                    if (e != null) {
                        throw e;
                    }
                }
            }
            int[] flushes = new int[rec.flushCount()];
            for (int k = 0; k < flushes.length; k++) {
                flushes[k] = rec.flushEvent(k);
            }
            return new Recording(w, rec.events(), flushes, lanes, lanes.stream().map(Lane::ackEvents).toList());
        }
    }

    /** The events' shape (kind, block, length) as 8 hex digits: recordings of one workload may differ by background timing. */
    String fingerprint() {
        int h = 1;
        for (Event e : events) {
            h = h * 31 + e.kind().ordinal();
            h = h * 31 + Long.hashCode(e.block());
            h = h * 31 + Long.hashCode(e.blockCount());
        }
        return String.format("%08x", h);
    }
}
