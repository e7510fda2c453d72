package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crashes a workload of multi-key transactions over two tables (puts, deletes and deleted ranges of a
 * small key space, the same change to both tables, and the transaction's number under key "last" of the
 * first), committed SYNC, ASYNC or NONE, at sampled points: after a flush with a random subset of the next
 * epoch's writes (reordered, one torn half the time), or torn inside an epoch with every earlier write
 * landed. Every recovered volume checks clean and holds exactly the tables as some transaction left them,
 * one at least as late as the last SYNC commit the crash's flush made durable: transactions are all or
 * nothing across tables, and SYNC commits survive.
 */
@ExtendWith(TestSeed.class)
class TableCrashTest {
    private static final long SEED = TestSeed.get(17);
    private static final int KEYS = 60;
    private static final byte[] LAST = TableTest.b("last");

    @Test
    void transactionsAreAllOrNothingAndSyncCommitsSurvive() {
        recoverSampledCrashes(SEED, 120, 50, false);
    }

    /**
     * As above with one value in five kept out of line, half of them medium (in data extents: the values are
     * written before the commits that name them, ordered by the checkpoint's flush), half blobs: every value
     * is exact, the check (which accounts every extent to one key, and every allocated block to an owner) is
     * clean, every blob a key names is there, and no other, and the overflow tree holds no chunk.
     */
    @Test
    void valuesKeptOutOfLineSurviveWithTheirKeysAndLeaveNoOrphans() {
        recoverSampledCrashes(SEED + 1, 60, 30, true);
    }

    @Test
    @Tag("stress")
    void longerWorkloadsAndManyMoreCrashStates() {
        for (long seed = SEED; seed < SEED + 4; seed++) {
            recoverSampledCrashes(seed, 400, 300, false);
            recoverSampledCrashes(seed, 200, 150, true);
        }
    }

    private static byte[] key(int k) {
        return TableTest.b("key-" + k);
    }

    private static void recoverSampledCrashes(long seed, int txns, int samples, boolean large) {
        Random rnd = new Random(seed);
        List<TreeMap<byte[], byte[]>> states = new ArrayList<>(); // the tables' contents after transaction i
        List<int[]> syncs = new ArrayList<>(); // {flush index that made it durable, transaction}
        TreeMap<byte[], byte[]> model = new TreeMap<>(Arrays::compareUnsigned);
        states.add(new TreeMap<>(model));
        int firstFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Table a = v.tables().create("a"), b = v.tables().create("b");
                v.sync();
                firstFlush = rec.flushCount();
                for (int i = 1; i <= txns; i++) {
                    Durability d = Durability.values()[rnd.nextInt(3)];
                    WriteTransaction tx = v.begin(d);
                    int changes = 1 + rnd.nextInt(12);
                    for (int c = 0; c < changes; c++) {
                        int r = rnd.nextInt(10);
                        byte[] k = key(rnd.nextInt(KEYS));
                        if (r < 6) {
                            byte[] val = new byte[!large || rnd.nextInt(5) != 0 ? 8 + rnd.nextInt(300)
                                    : rnd.nextBoolean() ? TableExtentTest.SHORTEST_MEDIUM + rnd.nextInt(12_000) : Table.MAX_MEDIUM + 1 + rnd.nextInt(4000)];
                            rnd.nextBytes(val);
                            tx.put(a, k, val);
                            tx.put(b, k, val);
                            model.put(k, val);
                        } else if (r < 9) {
                            tx.delete(a, k);
                            tx.delete(b, k);
                            model.remove(k);
                        } else {
                            byte[] to = key(rnd.nextInt(KEYS));
                            tx.deleteRange(a, k, to);
                            tx.deleteRange(b, k, to);
                            if (Arrays.compareUnsigned(k, to) < 0) {
                                model.subMap(k, to).clear();
                            }
                        }
                    }
                    byte[] last = TableTest.b(Integer.toString(i));
                    tx.put(a, LAST, last);
                    if (d == Durability.SYNC) {
                        syncs.add(new int[] {SyncPoint.of(rec, v, tx::commit), i});
                    } else {
                        tx.commit();
                    }
                    states.add(new TreeMap<>(model));
                }
                a.close();
                b.close();
            }
            int flushes = rec.flushCount();
            for (int s = 0; s < samples; s++) {
                int k = firstFlush - 1 + rnd.nextInt(flushes - firstFlush + 1);
                RecordingDevice.CrashState state = sampleAfter(rec, k, rnd);
                int acked = acked(syncs, k);
                check(rec, state, states, acked, seed);
            }
        }
    }

    /**
     * A crash after flush {@code k}: with a random subset of the next epoch's writes landed, reordered, or
     * (half the time) with one of them torn and every earlier one landed.
     */
    static RecordingDevice.CrashState sampleAfter(RecordingDevice rec, int k, Random rnd) {
        List<RecordingDevice.Event> next = k + 1 <= rec.flushCount() ? rec.epochWrites(k + 1) : List.of();
        if (rnd.nextBoolean() || next.isEmpty()) {
            List<Integer> picked = new ArrayList<>();
            for (RecordingDevice.Event e : next) {
                if (rnd.nextInt(3) == 0) {
                    picked.add(e.index());
                }
            }
            java.util.Collections.shuffle(picked, rnd);
            return rec.crashAfterFlush(k, picked.stream().mapToInt(Integer::intValue).toArray());
        }
        RecordingDevice.Event torn = next.get(rnd.nextInt(next.size()));
        BitSet sectors = new BitSet();
        for (int i = 0; i < torn.sectorCount(); i++) {
            if (rnd.nextBoolean()) {
                sectors.set(i);
            }
        }
        return rec.crashTornAt(torn.index(), sectors);
    }

    /** The last transaction of {@code syncs} ({flush that made it durable, transaction}) durable by flush {@code k}. */
    static int acked(List<int[]> syncs, int k) {
        int acked = 0;
        for (int[] sy : syncs) {
            if (sy[0] >= 0 && sy[0] <= k) {
                acked = Math.max(acked, sy[1]);
            }
        }
        return acked;
    }

    private static void check(RecordingDevice rec, RecordingDevice.CrashState state, List<TreeMap<byte[], byte[]>> states,
                              int acked, long seed) {
        try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
            String where = "seed " + seed + ", crash " + state;
            CheckReport report = v.namespace().check();
            assertTrue(report.clean(), where + ": " + report);
            try (Table a = v.tables().open("a"); Table b = v.tables().open("b")) {
                byte[] lastBytes = a.get(LAST);
                int last = lastBytes == null ? 0 : Integer.parseInt(new String(lastBytes, java.nio.charset.StandardCharsets.UTF_8));
                assertTrue(last >= acked, where + ": transaction " + acked + " was committed SYNC before the crash's flush,"
                        + " but the tables are as transaction " + last + " left them");
                TreeMap<byte[], byte[]> expected = states.get(last);
                assertTables(expected, a, true, where + ", table a after transaction " + last);
                assertTables(expected, b, false, where + ", table b after transaction " + last);
                long blobs = 2 * expected.values().stream().filter(x -> x.length > Table.MAX_MEDIUM).count();
                assertEquals(0, TableMediumTest.chunks(v), where + ": chunks in the overflow tree");
                for (var e : expected.entrySet()) { // each medium value in an extent of its own (the check: allocated, owned once)
                    if (TableValueFormat.isMedium(e.getValue().length)) {
                        assertEquals(TableValueFormat.EXTENT, a.storedValue(e.getKey())[0], where + ": the stored kind of a medium value");
                        assertEquals(TableValueFormat.EXTENT, b.storedValue(e.getKey())[0], where + ": the stored kind of a medium value");
                    }
                }
                long dir = v.tables().blobs.directory();
                List<String> files = dir == 0 ? List.of() : v.namespace().dirs.allEntries(dir).stream().map(DirEntry::name).toList();
                assertEquals(blobs, files.size(), where + ": blob files " + files);
                assertTrue(files.stream().allMatch(n -> n.startsWith("l")), where + ": blob files " + files);
            }
        }
    }

    private static void assertTables(TreeMap<byte[], byte[]> expected, Table t, boolean withLast, String where) {
        TableCursor c = t.cursor();
        List<String> got = new ArrayList<>();
        TreeMap<byte[], byte[]> actual = new TreeMap<>(Arrays::compareUnsigned);
        while (c.next()) {
            if (withLast && Arrays.equals(c.key(), LAST)) {
                continue;
            }
            actual.put(c.key(), c.value());
            got.add(new String(c.key(), java.nio.charset.StandardCharsets.UTF_8));
        }
        if (!actual.keySet().equals(expected.keySet())) {
            fail(where + ": keys " + got + ", expected " + expected.keySet().stream()
                    .map(k -> new String(k, java.nio.charset.StandardCharsets.UTF_8)).toList());
        }
        for (var e : expected.entrySet()) {
            assertArrayEquals(e.getValue(), actual.get(e.getKey()), where + ": the value of " + new String(e.getKey(),
                    java.nio.charset.StandardCharsets.UTF_8));
        }
        assertEquals(expected.size(), actual.size());
    }
}
