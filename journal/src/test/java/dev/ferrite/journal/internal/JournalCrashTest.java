package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Crash consistency of the journal: a scripted single-threaded workload of transactions over
 * {@link TestItem} counters runs on a {@link RecordingDevice}; then every crash state (each write and
 * flush point, subsets and reorderings of the writes after a flush, torn writes) is materialized,
 * recovered and checked against a model:
 * <ul>
 *   <li>the recovered items equal the model after exactly some prefix of the transactions (so no
 *       transaction is partially applied; transaction t also bumps a counter in the "count" item, which
 *       tells which prefix);
 *   <li>that prefix includes every transaction whose force had returned before the crash point;
 *   <li>recovering again over the recovered home blocks (a crash during recovery) changes nothing.
 * </ul>
 * Each test prints its seed on failure; -Dferrite.seed reproduces it.
 */
@ExtendWith(TestSeed.class)
class JournalCrashTest {
    static final int BS = 4096;
    static final int ITEMS = 6;          // home blocks 1..ITEMS; block 0 counts transactions
    static final int COUNTERS = 8;
    static final LogGeometry G = new LogGeometry(64, 64);
    static final int DEVICE_BLOCKS = 128;
    /** Items relogged with more than two of their counters' chunks go home early: crash points fall among those writes too. */
    static final int RELOG_LIMIT = 2 * BS / 64;

    /** The script: transaction t adds 1 to counter (t % COUNTERS) of items a[t] and b[t]. */
    record Script(int[] a, int[] b, boolean[] force) {
        static Script random(Random rnd, int n, int forceEvery) {
            int[] a = new int[n], b = new int[n];
            boolean[] f = new boolean[n];
            for (int t = 0; t < n; t++) {
                a[t] = 1 + rnd.nextInt(ITEMS);
                b[t] = 1 + (a[t] + rnd.nextInt(ITEMS - 1)) % ITEMS;
                f[t] = rnd.nextInt(forceEvery) == 0;
            }
            return new Script(a, b, f);
        }

        /** counters[item][c] after the first {@code prefix} transactions. */
        long[][] model(int prefix) {
            long[][] m = new long[ITEMS + 1][COUNTERS];
            for (int t = 0; t < prefix; t++) {
                m[a[t]][t % COUNTERS]++;
                m[b[t]][t % COUNTERS]++;
                m[0][0]++;
            }
            return m;
        }
    }

    /**
     * A recording of the script plus, per transaction, the event count when its force returned (or -1),
     * and every log record it wrote.
     */
    record Run(RecordingDevice rec, Script script, int[] ackedAt, List<WrittenRecord> records) {
    }

    /** A log record as written: its LSN, its checkpoint and whether it commits that checkpoint. */
    record WrittenRecord(long lsn, long checkpointSeq, boolean commit) {
    }

    /**
     * The records a recording wrote, read from its writes to the log area. Checkpoints are written one
     * after another, each from the head onwards (a wrapped one as two writes, end of area first), so
     * those writes laid end to end are the log in LSN order, each record's header followed by its payload.
     */
    static List<WrittenRecord> writtenRecords(RecordingDevice rec) {
        List<MemorySegment> blocks = new ArrayList<>();
        for (RecordingDevice.Event e : rec.events()) {
            if (e.kind() == RecordingDevice.Event.Kind.WRITE && e.block() >= G.areaStart()) {
                for (long k = 0; k < e.blockCount(); k++) {
                    blocks.add(e.data().asSlice(k * BS, BS));
                }
            }
        }
        List<WrittenRecord> out = new ArrayList<>();
        for (int i = 0; i < blocks.size(); i += 1 + LogRecordFormat.payloadBlocks(blocks.get(i))) {
            MemorySegment h = blocks.get(i);
            assertEquals(LogRecordFormat.MAGIC, LogRecordFormat.magic(h), "log write " + i + " does not start a record");
            out.add(new WrittenRecord(LogRecordFormat.lsn(h), LogRecordFormat.seq(h),
                    (LogRecordFormat.flags(h) & LogRecordFormat.FLAG_COMMIT) != 0));
        }
        return out;
    }

    static Run record(Script s) {
        MemoryDevice base = MemoryDevice.create(DEVICE_BLOCKS, BS);
        Journal.format(base, G);
        RecordingDevice rec = RecordingDevice.wrap(base);
        int n = s.a().length;
        int[] acked = new int[n];
        try (Arena arena = Arena.ofShared(); TestReplayer rep = new TestReplayer(rec);
             Journal j = Journal.open(rec, G, JournalOptions.defaults().withAilBatch(4).withRelogLimit(RELOG_LIMIT), rep)) {
            TestItem[] items = new TestItem[ITEMS + 1];
            for (int i = 0; i <= ITEMS; i++) {
                items[i] = new TestItem(i, BS, arena);
            }
            for (int t = 0; t < n; t++) {
                Transaction tx = j.begin(Reservation.items(3));
                TestItem x = items[s.a()[t]], y = items[s.b()[t]], count = items[0];
                count.lock.lock();
                x.lock.lock();
                y.lock.lock();
                long seq;
                try {
                    x.add(tx, t % COUNTERS, 1);
                    y.add(tx, t % COUNTERS, 1);
                    count.add(tx, 0, 1);
                    seq = tx.commit();
                } finally {
                    y.lock.unlock();
                    x.lock.unlock();
                    count.lock.unlock();
                }
                acked[t] = -1;
                if (s.force()[t]) {
                    j.force(seq);
                    acked[t] = rec.eventCount();
                }
            }
            if (n >= 200) {
                // a long script relogs items past the limit: some went home early (asynchronously)
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (j.stats().ailWrittenEarly() == 0 && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                assertTrue(j.stats().ailWrittenEarly() > 0, "no item was written home early: " + j.stats());
            }
        }
        // close() forced and wrote everything home: the tail of the recording is a clean shutdown
        List<WrittenRecord> records = writtenRecords(rec);
        assertTrue(records.size() > 10, "the workload wrote only " + records.size() + " log records");
        return new Run(rec, s, acked, records);
    }

    /** Recovers the state, checks it, and checks a second recovery over its home blocks changes nothing. */
    static void check(Run run, CrashState state, int ackHorizon, String seedInfo) {
        MemoryDevice a = run.rec().materialize(state);
        MemoryDevice b = run.rec().materialize(state);
        try (a; b; Arena arena = Arena.ofConfined()) {
            recover(a, run, state, seedInfo);
            MemorySegment homeA = home(a, arena);
            int prefix = (int) TestItem.blockCounter(homeA.asSlice(0, BS), 0);
            String where = "crash state " + state + " (" + seedInfo + "): recovered " + prefix + " transactions";
            long[][] expected = run.script().model(prefix);
            if (Boolean.getBoolean("ferrite.debug")) {
                StringBuilder sb = new StringBuilder(where).append('\n');
                for (int i = 0; i <= ITEMS; i++) {
                    MemorySegment blk = homeA.asSlice((long) i * BS, BS);
                    sb.append("item ").append(i).append(" lsn ").append(Lsn.toString(TestItem.blockLsn(blk))).append(": ");
                    for (int c = 0; c < COUNTERS; c++) {
                        sb.append(TestItem.blockCounter(blk, c)).append('/').append(expected[i][c]).append(' ');
                    }
                    sb.append('\n');
                }
                System.out.println(sb);
            }
            for (int i = 0; i <= ITEMS; i++) {
                MemorySegment blk = homeA.asSlice((long) i * BS, BS);
                assertTrue(TestItem.blockValid(blk), "item " + i + " checksum, " + where);
                for (int c = 0; c < COUNTERS; c++) {
                    assertEquals(expected[i][c], TestItem.blockCounter(blk, c), "item " + i + " counter " + c + ", " + where);
                }
            }
            for (int t = 0; t < run.ackedAt().length; t++) {
                int ack = run.ackedAt()[t];
                if (ack >= 0 && ack <= ackHorizon) {
                    assertTrue(prefix > t, "transaction " + t + " was forced (at event " + ack + ") but lost; " + where);
                }
            }
            // crash during recovery: home blocks already replayed, log and anchor as at the crash
            writeHome(b, homeA);
            assertEquals(-1, homeA.mismatch(home(b, arena)), "the second device did not take the replayed home blocks; " + where);
            recover(b, run, state, seedInfo);
            assertEquals(-1, homeA.mismatch(home(b, arena)), "second recovery changed home blocks; " + where);
        }
    }

    private static void writeHome(MemoryDevice d, MemorySegment home) {
        d.write(0, home);
    }

    /**
     * Recovers {@code d} and checks the report against the records the run wrote: recovery scanned every
     * record from the anchored tail to the head it found, and replayed every checkpoint committed in
     * between; beyond the head it may only have scanned records of the one checkpoint that starts there
     * and did not commit (torn or unfinished).
     */
    private static void recover(MemoryDevice d, Run run, CrashState state, String seedInfo) {
        RecoveryReport r;
        try (TestReplayer rep = new TestReplayer(d); Journal j = Journal.open(d, G, JournalOptions.defaults(), rep)) {
            r = j.recovery();
        } catch (RuntimeException e) {
            throw new AssertionError("recovery failed for crash state " + state + " (" + seedInfo + ")", e);
        }
        long replayedRecords = 0, committed = 0, beyond = 0;
        long seqAtHead = -1;
        for (WrittenRecord w : run.records()) {
            if (w.lsn() >= r.tailLsn() && w.lsn() < r.headLsn()) {
                replayedRecords++;
                committed += w.commit() ? 1 : 0;
            } else if (w.lsn() >= r.headLsn() && (seqAtHead < 0 || w.checkpointSeq() == seqAtHead)) {
                seqAtHead = w.checkpointSeq();
                beyond++;
            }
        }
        String where = "crash state " + state + " (" + seedInfo + "): " + r;
        assertEquals(committed, r.checkpointsReplayed(), "checkpoints replayed, " + where);
        assertTrue(r.recordsScanned() >= replayedRecords && r.recordsScanned() <= replayedRecords + Math.max(0, beyond - 1),
                replayedRecords + " records written between tail and head, " + beyond + " in the checkpoint at the head; " + where);
    }

    private static MemorySegment home(MemoryDevice d, Arena arena) {
        MemorySegment s = arena.allocate((long) G.start() * BS, BlockDevice.BUFFER_ALIGNMENT);
        d.read(0, s);
        return s;
    }

    /** Small workload, every crash point and every torn last write, exhaustively. */
    @Test
    void everyWriteAndFlushPointOfASmallWorkload() {
        long seed = TestSeed.get(11);
        Run run = record(Script.random(new Random(seed), 40, 3));
        RecordingDevice rec = run.rec();
        try (rec) {
            int events = rec.eventCount();
            if (Boolean.getBoolean("ferrite.debug")) {
                for (RecordingDevice.Event e : rec.events()) {
                    System.out.println(e);
                }
                System.out.println(java.util.Arrays.toString(run.ackedAt()));
            }
            assertTrue(rec.flushCount() > 10, "workload too small: " + rec.flushCount() + " flushes");
            for (int n = 0; n <= events; n++) {
                check(run, new CrashState(n), n, "seed " + seed);
            }
            // each write torn at a few sector masks, everything before it intact
            Random rnd = new Random(seed);
            for (RecordingDevice.Event e : rec.events()) {
                if (e.kind() == RecordingDevice.Event.Kind.WRITE) {
                    BitSet torn = new BitSet();
                    for (int s = 0; s < e.sectorCount(); s++) {
                        if (rnd.nextBoolean()) {
                            torn.set(s);
                        }
                    }
                    check(run, rec.crashTornAt(e.index(), torn), e.index(), "seed " + seed);
                }
            }
        }
    }

    /** Writes between two flushes may land in any subset and any order: sampled for each epoch. */
    @Test
    void subsetsAndReorderingsOfUnflushedWrites() {
        long seed = TestSeed.get(12);
        Random rnd = new Random(seed);
        Run run = record(Script.random(rnd, 60, 4));
        RecordingDevice rec = run.rec();
        try (rec) {
            for (int k = -1; k < rec.flushCount(); k++) {
                List<RecordingDevice.Event> epoch = rec.epochWrites(k + 1);
                if (epoch.isEmpty()) {
                    continue;
                }
                int flushAt = k < 0 ? 0 : rec.flushEvent(k) + 1;
                for (int sample = 0; sample < 6; sample++) {
                    List<Integer> chosen = new ArrayList<>();
                    for (RecordingDevice.Event e : epoch) {
                        if (rnd.nextInt(3) != 0) {
                            chosen.add(e.index());
                        }
                    }
                    Collections.shuffle(chosen, rnd);
                    CrashState st = rec.crashAfterFlush(k, chosen.stream().mapToInt(Integer::intValue).toArray());
                    if (!chosen.isEmpty() && rnd.nextBoolean()) {
                        int last = chosen.getLast();
                        BitSet torn = new BitSet();
                        torn.set(0, 1 + rnd.nextInt(Math.max(1, rec.event(last).sectorCount() - 1)));
                        st = new CrashState(st.prefix(), st.extras().subList(0, st.extras().size() - 1)).plusTorn(last, torn);
                    }
                    check(run, st, flushAt, "seed " + seed);
                }
            }
        }
    }

    /**
     * A workload that goes around the log several times, so that items are relogged with deltas across
     * many checkpoints, asked for whole relogs by the AIL (the count item, changed by every transaction,
     * holds the tail whenever log space runs short) and written home among them: sampled crash points,
     * torn writes and subsets of the writes after each of a sample of flushes.
     */
    @Test
    void deltasAndWholeRelogsAcrossAWrappingLog() {
        long seed = TestSeed.get(14);
        Random rnd = new Random(seed);
        Run run = record(Script.random(rnd, 160, 1));
        try (RecordingDevice rec = run.rec()) {
            assertTrue(run.records().stream().anyMatch(r -> Lsn.cycle(r.lsn()) > 2),
                    "the log did not go around twice: " + run.records().getLast());
            for (int i = 0; i < 300; i++) {
                int n = rnd.nextInt(rec.eventCount() + 1);
                check(run, new CrashState(n), n, "seed " + seed);
            }
            for (int k = 0; k < 40; k++) {
                RecordingDevice.Event e = rec.event(rnd.nextInt(rec.eventCount()));
                if (e.kind() == RecordingDevice.Event.Kind.WRITE) {
                    BitSet torn = new BitSet();
                    torn.set(0, 1 + rnd.nextInt(Math.max(1, e.sectorCount() - 1)));
                    check(run, rec.crashTornAt(e.index(), torn), e.index(), "seed " + seed);
                }
            }
            for (int sample = 0; sample < 60; sample++) {
                int k = rnd.nextInt(rec.flushCount() + 1) - 1;
                List<Integer> chosen = new ArrayList<>();
                for (RecordingDevice.Event e : rec.epochWrites(k + 1)) {
                    if (rnd.nextBoolean()) {
                        chosen.add(e.index());
                    }
                }
                Collections.shuffle(chosen, rnd);
                check(run, rec.crashAfterFlush(k, chosen.stream().mapToInt(Integer::intValue).toArray()),
                        k < 0 ? 0 : rec.flushEvent(k) + 1, "seed " + seed);
            }
        }
    }

    /** A longer workload with sampled crash points; the default suite runs a short one. */
    @Test
    @Tag("stress")
    void sampledCrashPointsOfALongWorkload() {
        long seed = TestSeed.get(13);
        Random rnd = new Random(seed);
        Run run = record(Script.random(rnd, 2000, 5));
        try (RecordingDevice rec = run.rec()) {
            for (int i = 0; i < 2000; i++) {
                int n = rnd.nextInt(rec.eventCount() + 1);
                check(run, new CrashState(n), n, "seed " + seed);
            }
        }
    }
}
