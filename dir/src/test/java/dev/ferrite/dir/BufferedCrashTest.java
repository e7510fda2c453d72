package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crashes at sampled points (after a flush with a random subset of the next epoch's writes, or anywhere
 * in an epoch, torn writes among them) of a workload of buffered writes at any offset and length, some
 * direct writes, truncates to any size, fsyncs and fdatasyncs on one file, with another file's fsyncs
 * forcing the log between. Write-back comes from the fsyncs, from pressure (the cache holds 16 frames)
 * and from the last close. Every recovered volume checks clean; every byte of the file below its size
 * holds what it held at the last fsync the crash kept, or else it was changed after that fsync and
 * holds zero or the byte of a write after it that covered it (every write fills its range with its
 * op's number): fsync'd bytes are intact, and no byte shows data the file never wrote there (the free
 * space the file allocates from first held another file's 0xA5 bytes).
 */
@ExtendWith(TestSeed.class)
class BufferedCrashTest {
    private static final long SEED = TestSeed.get(26);
    private static final int BS = 4096;
    private static final int SPAN = 20 * BS;
    private static final int OPS = 120; // op numbers are the bytes written: below 0xA5, the foreign bytes
    private static final int SAMPLES = Integer.getInteger("ferrite.crash.samples", 40);
    private static final VolumeOptions OPTIONS = VolumeFixtures.OPTIONS.withDataCacheBytes((long) PageCache.MIN_FRAMES * BS);

    @Test
    void everyFsyncedByteSurvivesAndNoByteShowsForeignData() {
        recoverSampledCrashes(SEED, OPS, SAMPLES);
    }

    @Test
    @Tag("stress")
    void manyMoreCrashStates() {
        for (long seed = SEED; seed < SEED + 6; seed++) {
            recoverSampledCrashes(seed, OPS, 300);
        }
    }

    /** The file at an fsync: the flush that made it durable, the op it followed, its size and bytes. */
    private record Synced(int flush, int op, long size, byte[] image) {
    }

    private static void recoverSampledCrashes(long seed, int ops, int samples) {
        Random rnd = new Random(seed);
        byte[] image = new byte[SPAN + 8 * BS];
        int[] lastTouch = new int[image.length];
        long[][] written = new long[ops + 1][]; // op -> {offset, length} of a write
        List<long[]> sizes = new ArrayList<>(); // {op, size}
        List<Synced> fsyncs = new ArrayList<>();
        int firstFlush, lastFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena arena = Arena.ofConfined()) {
            try (Volume v = Volume.open(rec, OPTIONS)) {
                Namespace ns = v.namespace();
                Handle f, g;
                try (Handle root = ns.openRoot()) {
                    FileCrashTest.fillFreeSpaceWithJunk(ns, root, arena);
                    f = ns.create(root, "f", 0644, true);
                    g = ns.create(root, "g", 0644, true);
                }
                fsyncs.add(new Synced(SyncPoint.of(rec, v, ns::sync), 0, 0, image.clone()));
                firstFlush = rec.flushCount();
                MemorySegment aligned = arena.allocate(4L * BS, BlockDevice.BUFFER_ALIGNMENT);
                long size = 0;
                for (int op = 1; op <= ops; op++) {
                    int r = rnd.nextInt(20);
                    if (r < 12) {
                        boolean direct = r < 2;
                        long offset = direct ? (long) rnd.nextInt(SPAN / BS) * BS : rnd.nextInt(SPAN);
                        int len = direct ? (1 + rnd.nextInt(4)) * BS : 1 + rnd.nextInt(rnd.nextBoolean() ? 100 : 3 * BS);
                        MemorySegment src = direct ? aligned.asSlice(0, len) : MemorySegment.ofArray(new byte[len]);
                        src.fill((byte) op);
                        ns.write(f, offset, src);
                        Arrays.fill(image, (int) offset, (int) offset + len, (byte) op);
                        Arrays.fill(lastTouch, (int) offset, (int) offset + len, op);
                        written[op] = new long[] {offset, len};
                        size = Math.max(size, offset + len);
                    } else if (r < 15) {
                        long to = rnd.nextInt(SPAN);
                        ns.truncate(f, to);
                        if (to < size) {
                            Arrays.fill(image, (int) to, (int) size, (byte) 0);
                            Arrays.fill(lastTouch, (int) to, (int) size, op);
                        }
                        size = to;
                    } else if (r < 18) {
                        if (rnd.nextBoolean()) {
                            ns.fsync(f);
                        } else {
                            ns.fdatasync(f);
                        }
                        fsyncs.add(new Synced(rec.flushCount() - 1, op, size, image.clone()));
                        continue;
                    } else { // another file's fsync: f's changes so far reach the log, its cached pages not written
                        ns.truncate(g, rnd.nextInt(SPAN));
                        ns.fsync(g);
                        continue;
                    }
                    sizes.add(new long[] {op, size});
                }
                lastFlush = rec.flushCount();
                f.close();
                g.close();
            }
            assertTrue(fsyncs.size() > 5, "fsyncs: " + fsyncs.size());
            for (int sample = 0; sample < samples; sample++) {
                RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, sample, firstFlush, lastFlush);
                Synced synced = fsyncs.getFirst();
                for (Synced s : fsyncs) {
                    if (s.flush() >= 0 && rec.flushEvent(s.flush()) < state.prefix()) {
                        synced = s;
                    }
                }
                long least = synced.size();
                for (long[] s : sizes) {
                    if (s[0] > synced.op()) {
                        least = Math.min(least, s[1]);
                    }
                }
                String where = "crash " + state + " (last fsync kept: after op " + synced.op() + "), seed " + seed;
                try (MemoryDevice image2 = rec.materialize(state); Volume v = Volume.open(image2, OPTIONS)) {
                    Namespace ns = v.namespace();
                    CheckReport report = ns.check();
                    assertTrue(report.clean(), where + ":\n" + report);
                    try (Handle f = ns.open("/f")) {
                        long size = ns.stat(f).size();
                        assertTrue(size >= least && size <= image.length, where + ": size " + size + ", at least " + least);
                        byte[] got = new byte[(int) size];
                        assertTrue(ns.read(f, 0, MemorySegment.ofArray(got)) == size, where + ": short read");
                        for (int x = 0; x < size; x++) {
                            if (got[x] == synced.image()[x]) {
                                continue;
                            }
                            int j = got[x];
                            boolean later = lastTouch[x] > synced.op() && (j == 0 || j > synced.op() && j <= ops && written[j] != null
                                    && written[j][0] <= x && x < written[j][0] + written[j][1]);
                            if (!later) {
                                fail(where + ": byte " + x + " is " + got[x] + "; at the fsync it was " + synced.image()[x]
                                        + (lastTouch[x] > synced.op() ? ", and no later write put that there" : ", and nothing changed it since"));
                            }
                        }
                    }
                }
            }
        }
    }
}
