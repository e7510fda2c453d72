package dev.ferrite.perf.crash;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import dev.ferrite.dir.Durability;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;

/**
 * A crash-test workload: per lane (thread), the ops it runs after the common {@link #SETUP}. A pure
 * function of its id: ids below {@link #EXHAUSTIVE} are the ACE-style enumeration of one and two core
 * ops from {@link #CORE}, each followed by one of three persistence points (fsync or fdatasync of the file
 * it touched, or a volume sync); larger ids seed a random workload of three core ops (ACE's third
 * length, sampled) or of 10 to 40 ops on one or two lanes. An id whose enumerated sequence is invalid
 * (an op on a name an earlier one removed) has no workload.
 *
 * @param id    what generated it ({@link #of})
 * @param lanes each lane's ops
 */
record Workload(long id, List<List<Op>> lanes) {
    /** What every lane holds in the base image: two directories, three files (one empty), two table keys (one a blob). */
    static final List<Op> SETUP = List.of(
            new Op.Mkdir("A"), new Op.Mkdir("B"),
            new Op.Create("foo"), new Op.Write("foo", 0, 12288),
            new Op.Create("A/foo"), new Op.Write("A/foo", 0, 4104),
            new Op.Create("A/bar"),
            new Op.Txn(List.of(new Op.Change("k0", 100), new Op.Change("k1", 2000)), Durability.NONE));

    /** The ACE alphabet: each op valid right after the setup. */
    /** The modification times setattrs give: 2026-01-01, plus nanoseconds, so that the nanoseconds count. */
    static final long MTIME = 1_767_225_600_000_000_000L + 123_456_789L;

    static final List<Op> CORE = List.of(
            new Op.Create("A/new"),
            new Op.Mkdir("A/D"),
            new Op.Write("foo", 4096, 4096),
            new Op.Write("A/bar", 0, 8192),
            new Op.Write("A/foo", 1000, 40),
            new Op.Append("foo", 4104),
            new Op.Truncate("foo", 1000),
            new Op.Truncate("A/foo", 20000),
            new Op.Fallocate("foo", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2048, 4096),
            new Op.Fallocate("A/bar", FALLOC_FL_ZERO_RANGE, 0, 6000),
            new Op.Fallocate("foo", FALLOC_FL_KEEP_SIZE, 12288, 8192),
            new Op.Rename("foo", "A/baz"),
            new Op.Rename("A", "B/A"),
            new Op.Rename("A/foo", "A/bar"),
            new Op.Link("foo", "B/foo2"),
            new Op.Symlink("A/foo", "s"),
            new Op.Unlink("foo"),
            new Op.Rmdir("B"),
            new Op.Setattr("foo", 0600, 1001, 1002, MTIME),
            new Op.Setattr("A", 0700, 1003, 1004, MTIME + 1),
            new Op.Txn(List.of(new Op.Change("k2", 300)), Durability.SYNC),
            new Op.Txn(List.of(new Op.Change("k0", -1), new Op.Change("k3", 3000), new Op.Change("k1", 50)), Durability.ASYNC));

    private static final int POINTS = 3;
    private static final int ONE = CORE.size() * POINTS;
    /** Ids of the enumerated workloads: every single op and every pair, each with each persistence point. */
    static final long EXHAUSTIVE = ONE + (long) ONE * ONE;

    private static final String[] DIRS = {"", "A", "B", "A/C"};
    private static final String[] NAMES = {"foo", "bar", "baz", "C", "D"};
    private static final int[] FALLOC_MODES = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
        FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};

    public Workload {
        lanes = lanes.stream().map(List::copyOf).toList();
    }

    /** The workload with id {@code id}, or null if it is an invalid enumerated sequence. */
    static Workload of(long id) {
        if (id < 0) {
            throw new IllegalArgumentException("workload id " + id + " is negative");
        }
        if (id < EXHAUSTIVE) {
            List<Integer> picks = new ArrayList<>();
            if (id < ONE) {
                picks.add((int) id);
            } else {
                picks.add((int) ((id - ONE) / ONE));
                picks.add((int) ((id - ONE) % ONE));
            }
            return enumerated(id, picks);
        }
        Random rnd = new Random(id);
        if (rnd.nextInt(4) == 0) {
            List<Integer> picks = List.of(rnd.nextInt(ONE), rnd.nextInt(ONE), rnd.nextInt(ONE));
            Workload w = enumerated(id, picks);
            if (w != null) {
                return w;
            }
        }
        int laneCount = rnd.nextInt(3) == 0 ? 2 : 1;
        boolean wide = rnd.nextInt(3) == 0;
        List<List<Op>> lanes = new ArrayList<>();
        for (int l = 0; l < laneCount; l++) {
            lanes.add(random(rnd, wide ? 40 + rnd.nextInt(41) : 10 + rnd.nextInt(31), wide));
        }
        return new Workload(id, lanes);
    }

    /** Core ops {@code pick / POINTS}, each followed by persistence point {@code pick % POINTS}; null if one is invalid. */
    private static Workload enumerated(long id, List<Integer> picks) {
        Lane model = setUp();
        List<Op> ops = new ArrayList<>();
        for (int pick : picks) {
            Op core = CORE.get(pick / POINTS);
            if (!add(model, ops, core)) {
                return null;
            }
            String target = target(core);
            Op point = switch (pick % POINTS) {
                case 0 -> model.file(target) != null ? new Op.Fsync(target) : new Op.Sync();
                case 1 -> model.file(target) != null ? new Op.Fdatasync(target) : new Op.Sync();
                default -> new Op.Sync();
            };
            add(model, ops, point);
        }
        return new Workload(id, List.of(ops));
    }

    /** The name an op leaves changed, whose fsync is the natural persistence point after it. */
    private static String target(Op op) {
        return switch (op) {
            case Op.Create c -> c.path();
            case Op.Write w -> w.path();
            case Op.Append a -> a.path();
            case Op.Truncate t -> t.path();
            case Op.Fallocate f -> f.path();
            case Op.Rename r -> r.to();
            case Op.Link l -> l.path();
            case Op.Setattr c -> c.path();
            default -> "";
        };
    }

    private static boolean add(Lane model, List<Op> ops, Op op) {
        if (!model.valid(op)) {
            return false;
        }
        ops.add(op);
        model.apply(op, ops.size());
        return true;
    }

    /** A lane's model after the setup. */
    static Lane setUp() {
        Lane model = new Lane(0);
        for (Op op : SETUP) {
            model.apply(op, 0);
        }
        model.start();
        return model;
    }

    /**
     * {@code count} random valid ops, about one in five a persistence point. A {@code wide} workload
     * draws from many more names and keys, writes single blocks scattered over the whole file and commits
     * larger transactions: directories, extent maps and table trees grow past their first block, and
     * crash states fall inside those conversions and splits.
     */
    private static List<Op> random(Random rnd, int count, boolean wide) {
        Lane model = setUp();
        List<Op> ops = new ArrayList<>();
        while (ops.size() < count) {
            Op op = randomOp(rnd, model, wide);
            if (op != null) {
                add(model, ops, op);
            }
        }
        return ops;
    }

    /** A random op, or null if the one drawn is not valid now (the caller draws again). */
    private static Op randomOp(Random rnd, Lane model, boolean wide) {
        String any = randomPath(rnd, wide);
        List<String> existing = model.paths();
        String some = existing.isEmpty() ? any : existing.get(rnd.nextInt(existing.size()));
        boolean block = wide && rnd.nextBoolean();
        long offset = block ? 4096L * rnd.nextInt(Lane.MAX_FILE / 4096) : 8L * rnd.nextInt(Lane.MAX_FILE / 32);
        int length = block ? 4096 : 8 * (1 + rnd.nextInt(rnd.nextBoolean() ? 64 : 2048));
        Op op = switch (rnd.nextInt(22)) {
            case 0 -> new Op.Mkdir(any);
            case 1, 2 -> new Op.Create(wide ? randomPath(rnd, true) + "-" + rnd.nextInt(1000) : any);
            case 3, 4, 5 -> new Op.Write(some, offset, length);
            case 6 -> new Op.Append(some, length);
            case 7 -> new Op.Truncate(some, 8L * rnd.nextInt(Lane.MAX_FILE / 16));
            case 8 -> new Op.Fallocate(some, FALLOC_MODES[rnd.nextInt(FALLOC_MODES.length)], offset, length);
            case 9 -> new Op.Rename(some, rnd.nextBoolean() || existing.isEmpty() ? any : existing.get(rnd.nextInt(existing.size())));
            case 10 -> new Op.Link(some, any);
            case 11 -> new Op.Symlink(some, any);
            case 12 -> new Op.Unlink(some);
            case 13 -> new Op.Rmdir(some);
            case 14 -> new Op.Setattr(some, new int[] {0600, 0644, 0700, 0755}[rnd.nextInt(4)], 1000 + rnd.nextInt(3),
                    1000 + rnd.nextInt(3), MTIME + rnd.nextInt(1_000_000) * 1_000_001L);
            case 15, 16 -> randomTxn(rnd, wide);
            case 17, 18 -> new Op.Fsync(some);
            case 19 -> new Op.Fdatasync(some);
            default -> new Op.Sync();
        };
        return model.valid(op) ? op : null;
    }

    private static String randomPath(Random rnd, boolean wide) {
        String dir = DIRS[rnd.nextInt(DIRS.length)];
        String name = NAMES[rnd.nextInt(NAMES.length)] + (wide && rnd.nextBoolean() ? "-with-a-longer-name-" + rnd.nextInt(20) : "");
        return dir.isEmpty() ? name : dir + "/" + name;
    }

    private static Op.Txn randomTxn(Random rnd, boolean wide) {
        List<Op.Change> changes = new ArrayList<>();
        for (int i = 0, n = 1 + rnd.nextInt(wide ? 24 : 4); i < n; i++) {
            String key = "k" + rnd.nextInt(wide ? 400 : 8);
            int length = rnd.nextInt(3) == 0 ? -1 : rnd.nextInt(10) == 0 ? 1000 + rnd.nextInt(4000) : 1 + rnd.nextInt(300);
            changes.add(new Op.Change(key, length));
        }
        return new Op.Txn(changes, Durability.values()[rnd.nextInt(Durability.values().length)]);
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder();
        for (int l = 0; l < lanes.size(); l++) {
            s.append(lanes.size() > 1 ? "lane " + l + ": " : "").append(String.join("; ", lanes.get(l).stream().map(Op::toString).toList()));
            if (l + 1 < lanes.size()) {
                s.append('\n');
            }
        }
        return s.toString();
    }
}
