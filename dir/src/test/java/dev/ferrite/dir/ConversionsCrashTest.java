package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crashes at sampled points while writers fill one file's unwritten space side by side (their
 * conversions batched, {@link Conversions}), each block once, with fdatasyncs among the writes (or
 * none: then the only flushes are the sync's at the end) and a volume sync after them; the
 * space they write into first held another file's bytes. Every recovered volume checks clean; every
 * block reads zeros or the stamp its write gave it, never anything else (no extent says written before
 * its data is there); every block whose write returned before an fdatasync the crash kept began holds
 * its stamp, inside the size. Besides the sampled crash states, the one that tests the ordering most:
 * after a flush, every log write of the next epoch landed and none of its other writes.
 */
@ExtendWith(TestSeed.class)
class ConversionsCrashTest {
    private static final long SEED = TestSeed.get(16);
    private static final int BS = 4096;
    private static final int WRITERS = ConversionsTest.WRITERS;
    private static final int SAMPLES = Integer.getInteger("ferrite.crash.samples", 60);

    @Test
    void batchedConversionsKeepFdatasyncedBlocksAndShowNoOtherBytes() throws Exception {
        crash(SEED, 384, FALLOC_FL_KEEP_SIZE, 8); // a tree
        crash(SEED + 1, 12, 0, 1); // inline
        crash(SEED + 2, 256, 0, Integer.MAX_VALUE); // inside the size (a tree's lock-free lookup), no flush until the sync at the end
    }

    private static void crash(long seed, int blocks, int mode, int syncEvery) throws Exception {
        Random rnd = new Random(seed);
        List<Integer> order = new ArrayList<>();
        for (int b = 0; b < blocks; b++) {
            order.add(b);
        }
        Collections.shuffle(order, rnd);
        AtomicLong clock = new AtomicLong();
        AtomicLongArray written = new AtomicLongArray(blocks); // tick at which block b's write returned
        List<long[]> syncs = Collections.synchronizedList(new ArrayList<>()); // {tick it began, a flush at or after its own}
        int firstFlush, lastFlush;
        long logStart, logEnd;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena arena = Arena.ofShared()) {
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                Handle f;
                try (Handle root = ns.openRoot()) {
                    FileCrashTest.fillFreeSpaceWithJunk(ns, root, arena);
                    f = ns.create(root, "f", 0644, true);
                }
                ns.sync(); // the junk's free durable: the file's blocks come from the space it held
                ns.fallocate(f, mode, 0, (long) blocks * BS);
                SyncPoint.of(rec, v, ns::sync);
                firstFlush = rec.flushCount();
                ConversionsTest.runWriters("seed " + seed, (id, buf) -> {
                    int n = 0;
                    for (int k = id; k < blocks; k += WRITERS) {
                        int b = order.get(k);
                        ConversionsTest.writeStamped(ns, f, (long) b * BS, id, buf);
                        written.set(b, clock.incrementAndGet());
                        if (++n % syncEvery == 0) {
                            long began = clock.incrementAndGet();
                            ns.fdatasync(f);
                            syncs.add(new long[] {began, rec.flushCount() - 1});
                        }
                    }
                }, arena);
                long began = clock.incrementAndGet();
                syncs.add(new long[] {began, SyncPoint.of(rec, v, ns::sync)});
                lastFlush = rec.flushCount();
                f.close();
                logStart = v.geometry().logStart();
                logEnd = logStart + v.geometry().logBlocks();
            }
            assertTrue(syncs.size() > Math.min(3, blocks / syncEvery), "syncs: " + syncs.size());
            List<RecordingDevice.CrashState> states = new ArrayList<>();
            for (int sample = 0; sample < SAMPLES / 2; sample++) {
                states.add(CrashTest.sampledState(rec, rnd, sample, firstFlush, lastFlush));
            }
            // the adversary of the ordering: after a flush, the next epoch's log writes landed and none of its data writes
            for (int k = firstFlush; k < lastFlush - 1; k += Math.max(1, (lastFlush - firstFlush) / Math.max(1, SAMPLES / 4))) {
                List<Integer> log = new ArrayList<>();
                for (RecordingDevice.Event e : rec.epochWrites(k + 1)) {
                    if (e.block() < logEnd && e.block() + e.blockCount() > logStart) {
                        log.add(e.index());
                    }
                }
                states.add(rec.crashAfterFlush(k, log.stream().mapToInt(Integer::intValue).toArray()));
            }
            for (RecordingDevice.CrashState state : states) {
                long synced = 0; // writes that returned before this tick must have survived
                for (long[] s : syncs) {
                    if (rec.flushEvent((int) s[1]) < state.prefix()) {
                        synced = Math.max(synced, s[0]);
                    }
                }
                String where = "crash " + state + " (fdatasync kept from tick " + synced + "), seed " + seed + ", " + blocks + " blocks";
                try (MemoryDevice image = rec.materialize(state); Volume v = Volume.open(image, VolumeFixtures.OPTIONS)) {
                    Namespace ns = v.namespace();
                    CheckReport report = ns.check();
                    assertTrue(report.clean(), where + ":\n" + report);
                    try (Handle f = ns.open("/f")) {
                        long size = ns.stat(f).size();
                        assertTrue(size <= (long) blocks * BS, where + ": size " + size);
                        MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                        for (int k = 0; k < blocks; k++) {
                            int b = order.get(k);
                            long offset = (long) b * BS;
                            boolean kept = written.get(b) < synced;
                            if (offset >= size) {
                                assertTrue(!kept, where + ": block " + b + ", written before a kept fdatasync, lies past the size " + size);
                                continue;
                            }
                            assertEquals(BS, ns.read(f, offset, block));
                            for (long at = 0; at < BS; at += 8) {
                                long word = block.get(U64, at), stamp = ConversionsTest.stamp(offset + at, k % WRITERS);
                                if (word != stamp && (kept || word != 0)) {
                                    fail(where + ": the word at offset " + (offset + at) + " is 0x" + Long.toHexString(word)
                                            + "; it may hold only 0x" + Long.toHexString(stamp) + (kept ? "" : " or zero"));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
