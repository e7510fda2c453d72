package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static dev.ferrite.io.internal.OnDisk.U64;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Buffered and direct readers and writers at once, through a cache of 64 frames whose dirty pages
 * expire after 20 ms (so eviction, pressure write-back and the write-back thread all run among them):
 * on one file, each block's writes numbered, with fsyncs among them, no read returns a version older than
 * one acknowledged before it began, or another block's words, or (buffered only) a torn block, and the
 * device ends with each block's last write; appends from several
 * threads, buffered and direct, each record whole and once; and writers on many files, each file
 * ending as its writer's model. The volume checks clean at the end.
 */
@ExtendWith(TestSeed.class)
class BufferedConcurrencyTest extends FileTestBase {
    private static final long SEED = TestSeed.get(36);
    private static final int BLOCKS = 16;
    private static final int ROUNDS = 1500;

    @Override
    VolumeOptions options() {
        return VolumeFixtures.OPTIONS.withDataCacheBytes(64L * BS).withDirtyExpireMillis(20);
    }

    /** A word of block {@code b} at version {@code v}. */
    private static long word(long b, long v) {
        return b << 40 | v;
    }

    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void noReadSeesAVersionOlderThanOneAcknowledgedBeforeIt(boolean direct) throws InterruptedException {
        AtomicLongArray acked = new AtomicLongArray(BLOCKS), issued = new AtomicLongArray(BLOCKS);
        ReentrantLock[] blockLocks = new ReentrantLock[BLOCKS];
        for (int b = 0; b < BLOCKS; b++) {
            blockLocks[b] = new ReentrantLock();
        }
        try (Handle f = ns.create(root, "f", 0644, true)) {
            MemorySegment zero = buffer(BLOCKS);
            for (int b = 0; b < BLOCKS; b++) {
                for (long w = 0; w < BS; w += 8) {
                    zero.set(U64, (long) b * BS + w, word(b, 0));
                }
            }
            ns.write(f, 0, zero);
            runThreads(4, "rw", (me, mine) -> {
                Random rnd = new Random(SEED * 31 + me);
                MemorySegment nat = mine.allocate(2L * BS, BlockDevice.BUFFER_ALIGNMENT);
                MemorySegment heap = MemorySegment.ofArray(new byte[2 * BS]);
                for (int round = 0; round < ROUNDS; round++) {
                    int b = rnd.nextInt(BLOCKS);
                    if (me == 3 && round % 16 == 0) { // write-backs of its own beside the writers', readers' and the thread's
                        ns.fsync(f);
                    }
                    if (me < 2) { // writers
                        boolean viaDirect = direct && rnd.nextBoolean();
                        MemorySegment src = (viaDirect ? nat : heap).asSlice(0, BS);
                        blockLocks[b].lock();
                        try {
                            long v = issued.incrementAndGet(b);
                            for (long w = 0; w < BS; w += 8) {
                                src.set(U64, w, word(b, v));
                            }
                            ns.write(f, (long) b * BS, src);
                            acked.set(b, v);
                        } finally {
                            blockLocks[b].unlock();
                        }
                    }
                    // readers, and each writer after its own write: a block, or an unaligned part of two
                    boolean viaDirect = direct && rnd.nextBoolean();
                    int n = b + 1 < BLOCKS && rnd.nextBoolean() ? 2 : 1;
                    long[] least = new long[n];
                    for (int k = 0; k < n; k++) {
                        least[k] = acked.get(b + k);
                    }
                    long skip = viaDirect ? 0 : 8L * rnd.nextInt(BS / 8);
                    MemorySegment dst = (viaDirect ? nat : heap).asSlice(0, (long) n * BS - skip);
                    assertEquals(dst.byteSize(), ns.read(f, (long) b * BS + skip, dst));
                    long first = -1;
                    for (long w = 0; w < dst.byteSize(); w += 8) {
                        long at = (long) b * BS + skip + w, blk = at / BS;
                        long got = dst.get(U64, w), v = got & ((1L << 40) - 1);
                        int k = (int) (blk - b);
                        if (got >>> 40 != blk || v < least[k] || v > issued.get((int) blk)) {
                            throw new AssertionError("word at " + at + " holds block " + (got >>> 40) + " version " + v
                                    + "; acknowledged before the read: " + least[k] + ", issued: " + issued.get((int) blk) + " (seed " + SEED + ")");
                        }
                        if (!direct) { // buffered only: a block's copy is whole
                            if (at % BS == 0 || w == 0) {
                                first = v;
                            } else if (v != first) {
                                throw new AssertionError("block " + blk + " read torn: versions " + first + " and " + v + " (seed " + SEED + ")");
                            }
                        }
                    }
                }
            });
            // each block as the last write left it, on the device too: a direct read writes its range back
            // first, so a write-back's older copy that landed over a direct write would show here
            for (int b = 0; b < BLOCKS; b++) {
                MemorySegment got = buffer(1);
                ns.read(f, (long) b * BS, got);
                for (long w = 0; w < BS; w += 8) {
                    assertEquals(word(b, acked.get(b)), got.get(U64, w), "block " + b + " word " + w + " (seed " + SEED + ")");
                }
            }
        }
    }

    @Test
    void concurrentAppendsStayWholeAndInOrder() throws InterruptedException {
        int threads = 3, each = 300;
        try (Handle f = ns.create(root, "log", 0644, true);
             Handle appending = ns.open(root, "log", Namespace.O_WRONLY | Namespace.O_APPEND)) {
            runThreads(threads, "append", (me, mine) -> {
                Random rnd = new Random(SEED * 7 + me);
                MemorySegment nat = mine.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                for (int seq = 0; seq < each; seq++) {
                    boolean whole = rnd.nextInt(8) == 0; // a block from a native buffer: direct when the end is aligned
                    int len = whole ? BS : 16 + rnd.nextInt(300);
                    MemorySegment rec = whole ? nat : MemorySegment.ofArray(new byte[len]);
                    rec.fill((byte) (me * 16 + seq % 16));
                    rec.set(JAVA_BYTE, 0, (byte) me);
                    rec.set(JAVA_BYTE, 1, (byte) seq);
                    rec.set(JAVA_BYTE, 2, (byte) (seq >> 8));
                    rec.set(JAVA_BYTE, 3, (byte) (len >> 8));
                    rec.set(JAVA_BYTE, 4, (byte) len);
                    if (rnd.nextBoolean()) {
                        ns.append(f, rec);
                    } else {
                        ns.write(appending, rnd.nextInt(1000), ByteBuffer.wrap(rec.toArray(JAVA_BYTE)));
                    }
                }
            });
            long size = ns.stat(f).size();
            byte[] all = new byte[(int) size];
            assertEquals(size, ns.read(f, 0, MemorySegment.ofArray(all)));
            int[] next = new int[threads];
            for (int at = 0; at < size; ) {
                int me = all[at], seq = (all[at + 1] & 0xFF) | (all[at + 2] & 0xFF) << 8;
                int len = (all[at + 3] & 0xFF) << 8 | all[at + 4] & 0xFF;
                assertTrue(me >= 0 && me < threads && seq == next[me], "record at " + at + ": thread " + me + " seq " + seq);
                for (int k = 5; k < len; k++) {
                    assertEquals((byte) (me * 16 + seq % 16), all[at + k], "byte " + k + " of the record at " + at);
                }
                next[me]++;
                at += len;
            }
            for (int t = 0; t < threads; t++) {
                assertEquals(each, next[t], "records of appender " + t);
            }
        }
    }

    @Test
    void writersOnManyFilesEndWithTheirModels() throws InterruptedException {
        int threads = 4, span = 24 * BS;
        runThreads(threads, "files", (me, mine) -> {
            Random rnd = new Random(SEED * 13 + me);
            byte[] model = new byte[span];
            long size = 0;
            MemorySegment nat = mine.allocate(4L * BS, BlockDevice.BUFFER_ALIGNMENT);
            try (Handle f = ns.create(root, "f" + me, 0644, true)) {
                for (int round = 0; round < 400; round++) {
                    boolean direct = rnd.nextInt(4) == 0;
                    long offset = direct ? (long) rnd.nextInt(span / BS - 4) * BS : rnd.nextInt(span - 3 * BS);
                    int len = direct ? (1 + rnd.nextInt(4)) * BS : 1 + rnd.nextInt(3 * BS);
                    MemorySegment src = direct ? nat.asSlice(0, len) : MemorySegment.ofArray(new byte[len]);
                    for (int k = 0; k < len; k++) {
                        src.set(JAVA_BYTE, k, (byte) (round + k));
                        model[(int) offset + k] = (byte) (round + k);
                    }
                    ns.write(f, offset, src);
                    size = Math.max(size, offset + len);
                    if (rnd.nextInt(50) == 0) {
                        ns.fsync(f);
                    }
                }
                assertEquals(size, ns.stat(f).size());
                byte[] got = new byte[(int) size];
                assertEquals(size, ns.read(f, 0, MemorySegment.ofArray(got)));
                assertEquals(-1, MemorySegment.ofArray(got).mismatch(MemorySegment.ofArray(model).asSlice(0, size)), "f" + me);
            }
            try (Handle f = ns.open(root, "f" + me, Namespace.O_RDONLY | Namespace.O_DIRECT)) { // after write-back at close
                MemorySegment got = mine.allocate((size + BS - 1) / BS * BS, BlockDevice.BUFFER_ALIGNMENT);
                assertEquals(size, ns.read(f, 0, got));
                assertEquals(-1, got.asSlice(0, size).mismatch(MemorySegment.ofArray(model).asSlice(0, size)), "f" + me + " on the device");
            }
        });
    }
}
