package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crashes at sampled points of a workload of clones between two files (whole ranges and pieces, over
 * fragmented extents, so that a clone takes many transactions) and direct and buffered writes into both
 * (copies on write of shared blocks, in-place writes of blocks no longer shared), truncates and punches,
 * with volume syncs among them: after a flush with a random subset of the next epoch's writes (reordered,
 * the last torn half the time), or anywhere inside an epoch with every earlier event landed. Every
 * recovered volume checks clean (each block mapped by as many extents as its refcount says, no staging
 * block left); every 8-byte word of each file (stamped with its file offset and the operation's number)
 * is zero or a value that file's block held at or after the last sync the crash kept, so a shared block
 * was never written in place under the other file; and once both files are truncated to nothing, free
 * space is exactly what it was with both empty: no block leaked by a copy cut off between its
 * transactions, none freed twice.
 */
@ExtendWith(TestSeed.class)
class FileCloneCrashTest {
    private static final long SEED = TestSeed.get(16);
    private static final int BS = 4096;
    private static final int SPAN = 48;
    private static final int SAMPLES = Integer.getInteger("ferrite.crash.samples", 60);

    @Test
    void clonesAndCopiesOnWriteRecoverToOldOrNewBlocksWithCountsThatMatch() {
        recoverSampledCrashes(SEED, 90, SAMPLES);
    }

    @Test
    @Tag("stress")
    void longerWorkloadsAndManyMoreCrashStates() {
        for (long seed = SEED; seed < SEED + 6; seed++) {
            recoverSampledCrashes(seed, 300, 300);
        }
    }

    private static void recoverSampledCrashes(long seed, int ops, int samples) {
        Random rnd = new Random(seed);
        FileCrashTest.History[][] blocks = new FileCrashTest.History[2][SPAN];
        for (FileCrashTest.History[] file : blocks) {
            for (int b = 0; b < SPAN; b++) {
                file[b] = new FileCrashTest.History();
            }
        }
        List<int[]> syncs = new ArrayList<>(); // {flush index, op}
        int firstFlush, lastFlush, clones = 0, copies = 0;
        long emptyFree;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(4L * BS, BlockDevice.BUFFER_ALIGNMENT);
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                Handle[] f = new Handle[2];
                try (Handle root = ns.openRoot()) {
                    FileCrashTest.fillFreeSpaceWithJunk(ns, root, arena);
                    f[0] = ns.create(root, "a", 0644, true);
                    f[1] = ns.create(root, "b", 0644, true);
                }
                syncs.add(new int[] {SyncPoint.of(rec, v, ns::sync), 0});
                emptyFree = v.statfs().freeBlocks();
                for (int b : shuffled(rnd)) { // a file in many extents: its clones take many transactions
                    write(ns, f[0], b, 1, 1, buf, false);
                    blocks[0][b].values.add(new long[] {1, 1});
                }
                syncs.add(new int[] {SyncPoint.of(rec, v, ns::sync), 1});
                firstFlush = rec.flushCount();
                for (int op = 2; op <= ops; op++) {
                    int r = rnd.nextInt(20), which = rnd.nextInt(2);
                    Handle to = f[which];
                    if (r < 4) { // a clone of a range at the same offset, either way
                        int at = rnd.nextInt(SPAN), n = 1 + rnd.nextInt(SPAN - at);
                        long srcSize = ns.stat(f[1 - which]).size();
                        if ((long) at * BS >= srcSize) {
                            continue;
                        }
                        n = (int) Math.min(n, srcSize / BS - at);
                        ns.cloneRange(f[1 - which], (long) at * BS, to, (long) at * BS, (long) n * BS);
                        for (int b = at; b < at + n; b++) {
                            blocks[which][b].values.add(new long[] {op, blocks[1 - which][b].now()});
                        }
                        clones++;
                    } else if (r < 14) {
                        int at = rnd.nextInt(SPAN), n = 1 + rnd.nextInt(Math.min(4, SPAN - at));
                        write(ns, to, at, n, op, buf, rnd.nextInt(4) == 0);
                        for (int b = at; b < at + n; b++) {
                            blocks[which][b].values.add(new long[] {op, op});
                        }
                        copies++;
                    } else if (r < 16) {
                        int at = rnd.nextInt(SPAN);
                        long size = ns.stat(to).size();
                        ns.truncate(to, (long) at * BS);
                        for (long b = at; b < size / BS; b++) {
                            blocks[which][(int) b].values.add(new long[] {op, 0});
                        }
                    } else if (r < 18) {
                        int at = rnd.nextInt(SPAN), n = 1 + rnd.nextInt(Math.min(6, SPAN - at));
                        ns.fallocate(to, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) at * BS, (long) n * BS);
                        for (int b = at; b < at + n; b++) {
                            blocks[which][b].values.add(new long[] {op, 0});
                        }
                    } else { // the last flush by now: at or after the sync's own (one of data alone when nothing was logged)
                        ns.sync();
                        syncs.add(new int[] {rec.flushCount() - 1, op});
                    }
                }
                lastFlush = rec.flushCount();
                f[0].close();
                f[1].close();
            }
            assertTrue(clones > 5 && copies > 20, "seed " + seed + ": " + clones + " clones, " + copies + " writes");
            for (int sample = 0; sample < samples; sample++) {
                RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, sample, firstFlush, lastFlush);
                int synced = FileCrashTest.lastSynced(syncs, rec, state);
                String where = "crash " + state + " (last sync kept: after op " + synced + "), seed " + seed;
                try (MemoryDevice image = rec.materialize(state); Volume v = Volume.open(image, VolumeFixtures.OPTIONS)) {
                    Namespace ns = v.namespace();
                    CheckReport report = ns.check();
                    assertTrue(report.clean(), where + ":\n" + report);
                    MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                    for (int which = 0; which < 2; which++) {
                        try (Handle h = ns.open(which == 0 ? "/a" : "/b")) {
                            long size = ns.stat(h).size();
                            for (int b = 0; b < SPAN; b++) {
                                block.fill((byte) 0);
                                if ((long) b * BS < size) {
                                    ns.read(h, (long) b * BS, block);
                                }
                                Set<Long> allowed = blocks[which][b].allowedAfter(synced);
                                for (long w = 0; w < BS; w += 8) {
                                    long word = block.get(U64, w), offset = (long) b * BS + w;
                                    long gen = word == 0 ? 0 : (word >>> 16) == offset ? word & 0xFFFF : -1;
                                    if (!allowed.contains(gen)) {
                                        fail(where + ": word at offset " + offset + " of " + (which == 0 ? "a" : "b") + " is 0x"
                                                + Long.toHexString(word) + ", allowed generations " + allowed);
                                    }
                                }
                            }
                            ns.truncate(h, 0);
                        }
                    }
                    assertEquals(emptyFree, v.statfs().freeBlocks(), where + ": free blocks with both files empty");
                    VolumeFixtures.assertChecked(ns);
                }
            }
        }
    }

    /** Writes blocks {@code [at, at + n)} stamped with {@code gen}: direct, or through the page cache. */
    private static void write(Namespace ns, Handle f, int at, int n, int gen, MemorySegment buf, boolean buffered) {
        long offset = (long) at * BS;
        MemorySegment src = buf.asSlice(0, (long) n * BS);
        for (long w = 0; w < src.byteSize(); w += 8) {
            src.set(U64, w, (offset + w) << 16 | gen);
        }
        if (buffered) {
            byte[] copy = src.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            ns.write(f, offset, MemorySegment.ofArray(copy));
        } else {
            ns.write(f, offset, src);
        }
    }

    private static int[] shuffled(Random rnd) {
        List<Integer> order = new ArrayList<>();
        for (int b = 0; b < SPAN; b++) {
            order.add(b);
        }
        java.util.Collections.shuffle(order, rnd);
        return order.stream().mapToInt(Integer::intValue).toArray();
    }
}
