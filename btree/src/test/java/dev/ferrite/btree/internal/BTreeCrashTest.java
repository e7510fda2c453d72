package dev.ferrite.btree.internal;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.RecordingDevice.Event;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Crash consistency of the tree: a scripted single-threaded workload (inserts that split up to a root
 * of height three, a third of them above every key so that the tree's right edge splits as appends do,
 * overwrites, deletes that merge back down) runs on a {@link RecordingDevice} with a
 * small cache (so blocks go home mid-run) and a small log (so it wraps), forcing the journal at scripted
 * points. Then sampled crash states (prefixes of the recording, torn writes, subsets and reorderings of
 * the writes after a flush) are materialized and recovered, and each must:
 * <ul>
 *   <li>pass the tree checker;
 *   <li>hold exactly the contents after some prefix of the operations (so no operation is half applied:
 *       every key has its whole value or is absent), a prefix that includes every operation a force had
 *       acknowledged before the crash point;
 *   <li>hold the same contents after a clean close and reopen, and after a second crash, during the
 *       first recovery, and a second recovery.
 * </ul>
 * {@code -Dferrite.seed=N} picks the seed; every failure names it and the crash state.
 */
@ExtendWith(TestSeed.class)
class BTreeCrashTest {
    static final long SEED = TestSeed.get(21);
    static final int BS = 4096;
    static final int LOG_BLOCKS = 256;
    static final int DATA_BLOCKS = 2048;
    static final long CACHE_BYTES = 96L * BS;
    /** Bytes every key starts with: long separators, so interior nodes fill and the tree grows to three levels. */
    static final int KEY_PREFIX = 120;

    /** One operation: put {@code value}, or delete when it is null. */
    record Op(byte[] key, byte[] value) {
    }

    /**
     * The operations, the running content hash after each prefix ({@code hashes[p]}: after the first
     * {@code p}), and the event count when the force acknowledging each operation returned (-1: none did).
     */
    record Run(RecordingDevice rec, List<Op> ops, long[] hashes, int[] ackedAt, String seedInfo) {
        /** Operations up to the last one whose force returned within the first {@code events} events. */
        int acknowledged(int events) {
            int n = 0;
            for (int i = 0; i < ackedAt.length; i++) {
                if (ackedAt[i] >= 0 && ackedAt[i] <= events) {
                    n = i + 1;
                }
            }
            return n;
        }

        TreeMap<byte[], byte[]> model(int prefix) {
            TreeMap<byte[], byte[]> m = Contents.empty();
            for (Op op : ops.subList(0, prefix)) {
                if (op.value() == null) {
                    m.remove(op.key());
                } else {
                    m.put(op.key(), op.value());
                }
            }
            return m;
        }
    }

    @Test
    void sampledCrashPoints() {
        crashAndRecover(SEED, 3000, 16, 12, 10, false);
    }

    /**
     * The same with a third of the values as long as their key leaves room for in a cell ({@link
     * BTreeNodeFormat#MAX_ENTRY}: some 1,850 bytes beside these keys, two cells a leaf) and a sixth over the
     * 960 bytes a value alone may take: splits, merges and in-place replacements of the largest cells.
     */
    @Test
    void sampledCrashPointsWithWideCells() {
        crashAndRecover(SEED, 2000, 16, 12, 10, true);
    }

    @Test
    @Tag("stress")
    void manyCrashPoints() {
        for (long seed = SEED; seed < SEED + 3; seed++) {
            crashAndRecover(seed, 6000, 150, 100, 80, seed % 2 == 0);
        }
    }

    private void crashAndRecover(long seed, int ops, int prefixes, int torn, int reordered, boolean wide) {
        Random rnd = new Random(seed);
        Run run = record(script(rnd, ops, wide), rnd, "seed " + seed + (wide ? ", wide cells" : ""));
        RecordingDevice rec = run.rec();
        try (rec) {
            int events = rec.eventCount();
            long bytes = rec.events().stream().mapToLong(e -> e.data().byteSize()).sum();
            System.out.println(run.seedInfo() + ": " + rec + ", " + bytes + " bytes written");
            assertTrue(rec.flushCount() > 20, run.seedInfo() + ": too few flushes: " + rec);
            List<CrashState> states = new ArrayList<>();
            List<Integer> horizons = new ArrayList<>();
            states.add(new CrashState(events));
            horizons.add(events);
            for (int i = 0; i < prefixes; i++) {
                int n = rnd.nextInt(events);
                states.add(new CrashState(n));
                horizons.add(n);
            }
            List<Event> writes = rec.events().stream().filter(e -> e.kind() == Event.Kind.WRITE).toList();
            for (int i = 0; i < torn; i++) {
                Event e = writes.get(rnd.nextInt(writes.size()));
                states.add(rec.crashTornAt(e.index(), tornMask(rnd, e.sectorCount())));
                horizons.add(e.index());
            }
            for (int i = 0; i < reordered; i++) {
                int k = rnd.nextInt(rec.flushCount());
                List<Integer> chosen = new ArrayList<>();
                for (Event e : rec.epochWrites(k + 1)) {
                    if (rnd.nextBoolean()) {
                        chosen.add(e.index());
                    }
                }
                Collections.shuffle(chosen, rnd);
                CrashState st = rec.crashAfterFlush(k, chosen.stream().mapToInt(Integer::intValue).toArray());
                if (!chosen.isEmpty() && rnd.nextBoolean()) {
                    int last = chosen.getLast();
                    st = new CrashState(st.prefix(), st.extras().subList(0, chosen.size() - 1))
                            .plusTorn(last, tornMask(rnd, rec.event(last).sectorCount()));
                }
                states.add(st);
                horizons.add(rec.flushEvent(k) + 1);
            }
            for (int i = 0; i < states.size(); i++) {
                check(run, states.get(i), horizons.get(i), rnd);
            }
        }
    }

    /** Some sectors of a write, not none and not all (a single-sector write lands whole or not at all). */
    private static BitSet tornMask(Random rnd, int sectors) {
        BitSet mask = new BitSet();
        if (sectors < 2) {
            return mask;
        }
        while (mask.isEmpty() || mask.cardinality() == sectors) {
            mask.clear();
            for (int s = 0; s < sectors; s++) {
                if (rnd.nextBoolean()) {
                    mask.set(s);
                }
            }
        }
        return mask;
    }

    // ------------------------------------------------------------------ the workload

    /** Inserts that split up to three levels, overwrites and deletes mixed with inserts, then deletes down to a few keys. */
    private static List<Op> script(Random rnd, int n, boolean wide) {
        List<Op> ops = new ArrayList<>(n);
        List<byte[]> live = new ArrayList<>();
        int inserts = n * 45 / 100, mixed = n / 4, appended = 0;
        for (int i = 0; i < n; i++) {
            int dice = rnd.nextInt(4);
            boolean insert = i < inserts || i < inserts + mixed && dice == 0 || live.isEmpty();
            boolean overwrite = !insert && i < inserts + mixed && dice == 1;
            byte[] k;
            if (insert) {
                k = rnd.nextInt(3) == 0 ? appendKey(rnd, appended++) : key(rnd);
                live.add(k);
            } else {
                int at = rnd.nextInt(live.size());
                k = overwrite ? live.get(at) : live.set(at, live.getLast());
                if (!overwrite) {
                    live.removeLast();
                }
            }
            ops.add(new Op(k, insert || overwrite ? value(rnd, i, wide ? k.length : -1) : null));
        }
        return ops;
    }

    private static byte[] key(Random rnd) {
        byte[] k = new byte[KEY_PREFIX + 8 + rnd.nextInt(8)];
        java.util.Arrays.fill(k, 0, KEY_PREFIX, (byte) 'p');
        byte[] tail = new byte[k.length - KEY_PREFIX];
        rnd.nextBytes(tail);
        System.arraycopy(tail, 0, k, KEY_PREFIX, tail.length);
        return k;
    }

    /** A key above every {@link #key} and every earlier one of these: the tail starts 0xFFFF, then the counter. */
    private static byte[] appendKey(Random rnd, int counter) {
        byte[] k = key(rnd);
        k[KEY_PREFIX] = (byte) 0xFF;
        k[KEY_PREFIX + 1] = (byte) 0xFF;
        k[KEY_PREFIX + 2] = (byte) (counter >>> 24);
        k[KEY_PREFIX + 3] = (byte) (counter >>> 16);
        k[KEY_PREFIX + 4] = (byte) (counter >>> 8);
        k[KEY_PREFIX + 5] = (byte) counter;
        return k;
    }

    /**
     * Bytes that start with the operation's number, so that no two operations write the same value, then
     * random, or zeros for a third of them: chunks of a node rebuilt by a split then often equal the bytes
     * they overwrite, which a split leaves out of the log ({@code BTree.logUsedChanged}), so recovery must
     * find them already in place; beside a key of {@code wideKey} bytes (-1: short values only), a third as
     * long as a cell takes and a sixth of 960 bytes up to that.
     */
    private static byte[] value(Random rnd, int op, int wideKey) {
        int dice = rnd.nextInt(6);
        int largest = BTreeNodeFormat.MAX_ENTRY - wideKey;
        byte[] v = new byte[wideKey < 0 || dice > 2 ? 4 + rnd.nextInt(150)
                : dice < 2 ? largest : BTreeNodeFormat.MAX_VALUE + rnd.nextInt(largest - BTreeNodeFormat.MAX_VALUE)];
        if (rnd.nextInt(3) != 0) {
            rnd.nextBytes(v);
        }
        v[0] = (byte) (op >>> 24);
        v[1] = (byte) (op >>> 16);
        v[2] = (byte) (op >>> 8);
        v[3] = (byte) op;
        return v;
    }

    /** Runs the script on a recorder over a freshly formatted store, forcing at random points, and closes it. */
    private static Run record(List<Op> ops, Random rnd, String seedInfo) {
        MemoryDevice base = MemoryDevice.create(1 + LOG_BLOCKS + 1 + DATA_BLOCKS, BS);
        Store.format(base, LOG_BLOCKS, CACHE_BYTES).close();
        RecordingDevice rec = RecordingDevice.wrap(base);
        long[] hashes = new long[ops.size() + 1];
        int[] ackedAt = new int[ops.size()];
        TreeMap<byte[], byte[]> model = Contents.empty();
        try (Store s = Store.open(rec, LOG_BLOCKS, CACHE_BYTES)) {
            int maxHeight = 0;
            for (int i = 0; i < ops.size(); i++) {
                Op op = ops.get(i);
                long seq;
                byte[] old;
                if (op.value() == null) {
                    seq = s.tree.delete(op.key());
                    old = model.remove(op.key());
                    assertTrue(seq >= 0 && old != null, seedInfo + ": operation " + i + " deletes a key it does not find");
                } else {
                    seq = s.tree.put(op.key(), op.value());
                    old = model.put(op.key(), op.value());
                }
                hashes[i + 1] = hashes[i] - (old == null ? 0 : entryHash(op.key(), old))
                        + (op.value() == null ? 0 : entryHash(op.key(), op.value()));
                ackedAt[i] = -1;
                if (rnd.nextInt(40) == 0) {
                    s.journal.force(seq);
                    ackedAt[i] = rec.eventCount();
                } else if (rnd.nextInt(400) == 0) {
                    s.journal.quiesce(); // everything home, the log tail up to the head
                }
                maxHeight = Math.max(maxHeight, s.tree.height());
            }
            assertTrue(maxHeight >= 3, seedInfo + ": the workload grew the tree to height " + maxHeight + " only");
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), seedInfo + ", before any crash: " + c);
            Contents.assertEqual(model, s.contents(), seedInfo + ", before any crash");
        }
        return new Run(rec, ops, hashes, ackedAt, seedInfo);
    }

    static long entryHash(byte[] k, byte[] v) {
        long h = Contents.hash(k) * 0x9E37_79B9_7F4A_7C15L + Contents.hash(v);
        return h ^ h >>> 31;
    }

    // ------------------------------------------------------------------ recovery and its checks

    private static void check(Run run, CrashState state, int horizon, Random rnd) {
        int acked = run.acknowledged(horizon);
        String where = run.seedInfo() + ", crash state " + state + " (" + acked + " operations acknowledged)";
        TreeMap<byte[], byte[]> recovered;
        try (MemoryDevice image = run.rec().materialize(state)) {
            recovered = recover(image, where + ", first recovery");
            int prefix = matchingPrefix(run, recovered, acked, where);
            Contents.assertEqual(run.model(prefix), recovered, where + ", against the first " + prefix + " operations");
            // closed cleanly without changes, reopened: the same
            Contents.assertEqual(recovered, recover(image, where + ", reopened"), where + ", reopened");
        }
        // a crash during the first recovery (or the close after it), then a second recovery: the same
        try (RecordingDevice again = RecordingDevice.wrap(run.rec().materialize(state))) {
            recover(again, where + ", recorded recovery");
            int events = again.eventCount();
            int at = rnd.nextInt(events + 1);
            Event e = at < events ? again.event(at) : null;
            CrashState second = e != null && e.kind() == Event.Kind.WRITE && rnd.nextBoolean()
                    ? again.crashTornAt(at, tornMask(rnd, e.sectorCount())) : new CrashState(at);
            try (MemoryDevice image = again.materialize(second)) {
                String w = where + ", crash during recovery at " + second;
                Contents.assertEqual(recovered, recover(image, w), w);
            }
        }
    }

    /** Opens (recovering), checks the tree, reads everything, closes cleanly. */
    private static TreeMap<byte[], byte[]> recover(dev.ferrite.io.BlockDevice device, String where) {
        try (Store s = Store.open(device, LOG_BLOCKS, CACHE_BYTES)) {
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), () -> where + ": " + c);
            TreeMap<byte[], byte[]> contents = s.contents();
            assertEquals(c.keys(), contents.size(), where + ": the cursor and the checker count different keys");
            return contents;
        } catch (RuntimeException e) {
            throw new AssertionError(where + ": " + e, e);
        }
    }

    /** The number of operations, at least {@code acked}, after which the model holds {@code contents}. */
    private static int matchingPrefix(Run run, TreeMap<byte[], byte[]> contents, int acked, String where) {
        long h = 0;
        for (Map.Entry<byte[], byte[]> e : contents.entrySet()) {
            h += entryHash(e.getKey(), e.getValue());
        }
        long[] hashes = run.hashes();
        for (int p = hashes.length - 1; p >= acked; p--) {
            if (hashes[p] == h) {
                return p;
            }
        }
        // no prefix fits: say how the contents differ from the least that must be there
        TreeMap<byte[], byte[]> least = run.model(acked);
        Contents.assertEqual(least, contents, where + ", against the first " + acked + " (acknowledged) operations");
        throw new AssertionError(where + ": the contents match no prefix of the operations from " + acked + " on");
    }
}
