package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

/**
 * The direct path's {@link OverwriteHint}: after a direct overwrite has made a file's hint, every change
 * of its mapping or size (a punched hole, a zeroed range, a truncate and an extension, a tree taking the
 * extents) sends the next direct write where the record now says, never to the block the hint knew; and
 * direct overwriters, readers, a thread punching and zeroing blocks and a thread writing other files into
 * the freed space, all at once, leave every block as its last acknowledged operation made it.
 */
@ExtendWith(TestSeed.class)
class OverwriteHintTest extends FileTestBase {
    private static final long SEED = TestSeed.get(16);
    private static final int BLOCKS = 16;

    /** Writes {@code f} whole at generation 1, then overwrites block 3 directly (making its hint) and checks it. */
    private Handle hinted(String name) {
        Handle f = written(name, 8, 1);
        ns.write(f, 3L * BS, stamped(3L * BS, 1, 2));
        assertNotNull(f.inode.overwriteHint);
        MemorySegment got = buffer(1);
        ns.read(f, 3L * BS, got);
        assertStamped(got, 3L * BS, 2);
        return f;
    }

    /** A direct write of block {@code b} at {@code gen}, then a direct and a buffered read of it. */
    private void overwriteAndRead(Handle f, long b, int gen) {
        ns.write(f, b * BS, stamped(b * BS, 1, gen));
        MemorySegment got = buffer(1);
        assertEquals(BS, ns.read(f, b * BS, got));
        assertStamped(got, b * BS, gen);
        MemorySegment heap = MemorySegment.ofArray(new byte[BS + 8]).asSlice(8, BS); // unaligned: the buffered path
        assertEquals(BS, ns.read(f, b * BS, heap));
        assertStamped(heap, b * BS, gen);
    }

    @Test
    void aWriteAfterAPunchFillsTheHoleAndLeavesTheFreedBlockAlone() {
        try (Handle f = hinted("f")) {
            ns.fallocate(f, Namespace.FALLOC_FL_PUNCH_HOLE | Namespace.FALLOC_FL_KEEP_SIZE, 3L * BS, BS);
            ns.fsync(f); // the freed block may go to the next allocation
            try (Handle g = ns.create(root, "g", 0644, true)) {
                ns.write(g, 0, stamped(0, 4, 7));
                overwriteAndRead(f, 3, 3);
                MemorySegment got = buffer(4);
                ns.read(g, 0, got);
                assertStamped(got, 0, 7);
            }
        }
    }

    @Test
    void aWriteAfterAZeroedRangeIsReadBack() {
        try (Handle f = hinted("f")) {
            ns.fallocate(f, Namespace.FALLOC_FL_ZERO_RANGE | Namespace.FALLOC_FL_KEEP_SIZE, 2L * BS, 3L * BS);
            MemorySegment got = buffer(1);
            ns.read(f, 3L * BS, got);
            assertStamped(got, 3L * BS, 0);
            overwriteAndRead(f, 3, 3); // the extent is unwritten now: the write converts it
        }
    }

    @Test
    void aWriteAfterATruncateAndAnExtensionIsReadBack() {
        try (Handle f = hinted("f")) {
            ns.truncate(f, 2L * BS);
            ns.truncate(f, 8L * BS);
            MemorySegment got = buffer(1);
            ns.read(f, 5L * BS, got);
            assertStamped(got, 5L * BS, 0);
            overwriteAndRead(f, 5, 3);
            overwriteAndRead(f, 3, 4);
        }
    }

    @Test
    void aWriteAfterTheExtentsMoveToATreeIsReadBack() {
        try (Handle f = hinted("f")) {
            MemorySegment one = buffer(1);
            for (long b = 8; b < 8 + 2 * 40; b += 2) { // a hole between each: more extents than the record holds inline
                ns.write(f, b * BS, stamped(b * BS, 1, 5));
            }
            assertEquals(InodeFormat.FORK_TREE, ns.records.readLong(f.inode.ino, InodeFormat::fork));
            for (long b = 0; b < 8; b++) {
                overwriteAndRead(f, b, 6);
            }
            ns.read(f, 40L * BS, one);
            assertStamped(one, 40L * BS, 5);
        }
    }

    /** A word of block {@code b} at version {@code v}; version 0 is a block of zeros. */
    private static long word(long b, long v) {
        return b << 40 | v;
    }

    @Test
    void overwritesPunchesAndOtherFilesAtOnceLeaveEveryBlockAsAcknowledged() throws InterruptedException {
        ReentrantLock[] locks = new ReentrantLock[BLOCKS];
        long[] model = new long[BLOCKS]; // guarded by locks[b]: the version block b holds, 0 for zeros
        long[] issued = new long[BLOCKS];
        for (int b = 0; b < BLOCKS; b++) {
            locks[b] = new ReentrantLock();
        }
        AtomicBoolean done = new AtomicBoolean();
        try (Handle f = ns.create(root, "f", 0644, true)) {
            MemorySegment all = buffer(BLOCKS);
            for (int b = 0; b < BLOCKS; b++) {
                issued[b] = model[b] = 1;
                for (long w = 0; w < BS; w += 8) {
                    all.set(U64, (long) b * BS + w, word(b, 1));
                }
            }
            ns.write(f, 0, all);
            ns.fsync(f);
            runThreads(4, "hint", (me, mine) -> {
                Random rnd = new Random(SEED * 31 + me);
                MemorySegment nat = mine.allocate(2L * BS, BlockDevice.BUFFER_ALIGNMENT);
                if (me == 3) { // other files, written into whatever the punches free, each checked before it goes
                    Deque<String> names = new ArrayDeque<>();
                    MemorySegment page = nat.asSlice(0, BS);
                    for (int k = 0; !done.get() || k < 50; k++) {
                        String name = "g" + k;
                        try (Handle g = ns.create(root, name, 0644, true)) {
                            for (long w = 0; w < BS; w += 8) {
                                page.set(U64, w, word(1_000_000 + k, w));
                            }
                            ns.write(g, 0, page);
                            ns.fsync(g);
                        }
                        names.add(name);
                        if (names.size() > 4) {
                            String old = names.poll();
                            int j = Integer.parseInt(old.substring(1));
                            try (Handle g = ns.open(root, old)) {
                                assertEquals(BS, ns.read(g, 0, page));
                                for (long w = 0; w < BS; w += 8) {
                                    assertEquals(word(1_000_000 + j, w), page.get(U64, w), "file " + old + " word " + w + " (seed " + SEED + ")");
                                }
                            }
                            ns.unlink(root, old);
                        }
                    }
                    return;
                }
                try {
                    overwriteReadAndPunch(me, rnd, nat, f, locks, model, issued);
                } finally {
                    if (me == 2) {
                        done.set(true); // even if it failed: the other files' thread stops
                    }
                }
            });
            MemorySegment got = buffer(BLOCKS);
            ns.read(f, 0, got);
            for (int b = 0; b < BLOCKS; b++) {
                long want = model[b] == 0 ? 0 : word(b, model[b]);
                for (long w = 0; w < BS; w += 8) {
                    assertEquals(want, got.get(U64, (long) b * BS + w), "block " + b + " (seed " + SEED + ")");
                }
            }
        }
    }

    /**
     * Rounds of thread {@code me} on random blocks of {@code f}, each under its block's lock: writers (0
     * and 1) overwrite it, thread 2 punches or zeroes it or overwrites it; each then reads it back.
     */
    private void overwriteReadAndPunch(int me, Random rnd, MemorySegment nat, Handle f, ReentrantLock[] locks, long[] model,
                                       long[] issued) {
        for (int round = 0; round < 3000; round++) {
            int b = rnd.nextInt(BLOCKS);
            locks[b].lock();
            try {
                MemorySegment one = nat.asSlice(0, BS);
                if (me == 2 && rnd.nextInt(4) == 0) { // a hole or an unwritten extent where the block was
                    int mode = rnd.nextBoolean() ? Namespace.FALLOC_FL_PUNCH_HOLE : Namespace.FALLOC_FL_ZERO_RANGE;
                    ns.fallocate(f, mode | Namespace.FALLOC_FL_KEEP_SIZE, (long) b * BS, BS);
                    model[b] = 0;
                } else if (me < 2 || rnd.nextBoolean()) {
                    long v = ++issued[b];
                    for (long w = 0; w < BS; w += 8) {
                        one.set(U64, w, word(b, v));
                    }
                    ns.write(f, (long) b * BS, one);
                    model[b] = v;
                }
                assertEquals(BS, ns.read(f, (long) b * BS, one));
                for (long w = 0; w < BS; w += 8) {
                    long want = model[b] == 0 ? 0 : word(b, model[b]);
                    if (one.get(U64, w) != want) {
                        throw new AssertionError("block " + b + " word " + w + " holds 0x" + Long.toHexString(one.get(U64, w))
                                + ", acknowledged 0x" + Long.toHexString(want) + " (seed " + SEED + ")");
                    }
                }
            } finally {
                locks[b].unlock();
            }
        }
    }
}
