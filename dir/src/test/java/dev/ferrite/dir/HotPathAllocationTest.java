package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.function.IntConsumer;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The writes of issue 21's list allocate little per call once warm, on the calling thread: a table insert
 * of a new key into a growing table (a split's cell plan is the thread's; what is left is mostly the new
 * buffer of a split, every ~20 inserts), a table put replacing a value (nothing: the stored form's view is the thread's), a table insert of a new key with a
 * delete of an old one (the reserve checks ask the cache about freed blocks without boxing them; what is
 * left is a new buffer per leaf split), and a create and unlink by path (the thread's walk, the last name
 * read in place: a copy of it and a parent record per call were 160 bytes a pair), and a cursor step, forward
 * or in a reverse prefix scan, reading its value's view (the scan's bound was compared through two copies of
 * each key, and a value's view made through an interim one). Generous
 * bounds, best of four rounds after four of warm-up: they fail on a regression of tens of bytes a call, not on
 * a compilation met in a round. A directory listed into a caller's {@link DirBuffer} allocates nothing per entry
 * (a page of {@link DirEntry}s made a string, an entry and a list slot per name: most of dbench's garbage).
 */
class HotPathAllocationTest {
    private static final ValueLayout.OfLong BIG_ENDIAN_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    /** Rounds before those measured: the JIT's, and the insert window's, which reaches its steady state of freed blocks in a few. */
    private static final int WARM_UP = 4;
    private static final int ROUNDS = WARM_UP + 4;
    private static final int CALLS = 4096;
    /** The table's keys: as many as the rounds that fill it insert. */
    private static final int KEYS = ROUNDS * CALLS;
    /** Inserts that split a leaf every ~20: 49.5 B an insert with new cell-plan arrays per split, 35.4 without (what is left: the new buffer, the split's lock list and separator). */
    private static final double BOUND_SPLIT = 44;
    /** A 16 KiB put and delete: 1,408 B (the table's commit, the stub and extent records, the busy entry), 3,488 with the free-space trees' segments. */
    private static final double MEDIUM_PAIR = 2_000;
    /** Room for everything in the cache and the log, as in the JMH benchmarks (no write-back or log-space waits in a round). */
    private static final VolumeOptions OPTIONS = VolumeOptions.defaults().withLogBlocks(8192).withCacheBytes(128L << 20);

    @Test
    void tableInsertsPutsAndDeletesAllocateLittle() {
        try (Volume v = Volume.open(formatted(), OPTIONS); Table t = v.tables().create("t").withDurability(Durability.NONE);
                Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(24);
            MemorySegment value = arena.allocate(64);
            int[] next = {0}; // the table is filled by measured inserts of new keys, a leaf split every ~20
            assertBelow(BOUND_SPLIT, "an insert of a new key into a growing table", n -> t.put(key(key, next[0]++), value));
            assertEquals(KEYS, next[0]);
            assertBelow(8, "a put replacing a value", n -> t.put(key(key, n % KEYS), value));
            int[] oldest = {0};
            assertBelow(96, "an insert of a new key and a delete of the oldest", n -> {
                t.put(key(key, oldest[0] + KEYS), value);
                assertTrue(t.delete(key(key, oldest[0]++)));
            });
            assertEquals(KEYS, t.count());
        }
    }

    /**
     * A medium value's put and delete: the allocation's and the free's changes of the free-space trees make
     * no garbage (their keys and values were about a dozen heap segments a change: 3,488 bytes a pair before, 1,408 after).
     */
    @Test
    void mediumPutsAndDeletesAllocateLittleInTheFreeSpaceTrees() {
        try (Volume v = Volume.open(formatted(), OPTIONS); Table t = v.tables().create("t").withDurability(Durability.NONE);
                Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(24);
            byte[] value = new byte[16384];
            assertBelow(MEDIUM_PAIR, "a put and a delete of a 16 KiB value", n -> {
                t.put(key(key, n).toArray(ValueLayout.JAVA_BYTE), value);
                assertTrue(t.delete(key(key, n)));
            });
        }
    }

    @Test
    void cursorStepsAllocateLittle() {
        try (Volume v = Volume.open(formatted(), OPTIONS); Table t = v.tables().create("t").withDurability(Durability.NONE);
                Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(24);
            MemorySegment value = arena.allocate(64);
            for (int i = 0; i < CALLS; i++) {
                key(key, i).set(ValueLayout.JAVA_BYTE, 0, (byte) 'p'); // every key under the prefix "p"
                t.put(key, value);
            }
            Sum sum = new Sum();
            Steps forward = new Steps(t::cursor);
            assertBelow(8, "a cursor step handing its value in place", n -> sum.add(forward.step().value(sum)));
            Steps prefix = new Steps(() -> t.prefix(new byte[] {'p'}, true));
            assertBelow(8, "a reverse prefix scan's step", n -> sum.add(prefix.step().value(sum))); // its bound compared at every key
            // a view of the value: none made once the call inlines; one 40-byte view where it does not (two, before)
            assertBelow(48, "a cursor step reading its value's view", n -> sum.add(forward.step().valueSegment().byteSize()));
            forward.cursor.close();
            prefix.cursor.close();
            assertEquals(5L * ROUNDS * CALLS * 64, sum.bytes); // by value(Pieces) twice (its pieces, its return), once by the view
        }
    }

    /** Steps a cursor, opening a new one when it runs out. */
    private static final class Steps {
        final java.util.function.Supplier<TableCursor> open;
        TableCursor cursor;

        Steps(java.util.function.Supplier<TableCursor> open) {
            this.open = open;
            this.cursor = open.get();
        }

        TableCursor step() {
            if (!cursor.next()) {
                cursor.close();
                cursor = open.get();
                assertTrue(cursor.next());
            }
            return cursor;
        }
    }

    /** Counts the bytes handed to it, made once (a lambda capturing a counter per call would allocate). */
    private static final class Sum implements TableCursor.Pieces {
        long bytes;

        void add(long n) {
            bytes += n;
        }

        @Override
        public void accept(MemorySegment piece, long offset, long length) {
            bytes += length;
        }
    }

    @Test
    void pathCreatesAndUnlinksAllocateLittle() {
        try (Volume v = Volume.open(formatted(), OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            String[] paths = new String[CALLS];
            for (int i = 0; i < CALLS; i++) {
                paths[i] = "/d/f" + i;
                ns.create(paths[i] + "-kept", 0644, true); // a tree directory
            }
            assertBelow(32, "a create and an unlink by path", n -> {
                ns.create(paths[n], 0644, true);
                ns.unlink(paths[n]);
            });
            assertEquals(CALLS, ns.list("/d").size());
        }
    }

    /**
     * An lstat by handle allocates its {@link InodeStat} and nothing else (96 bytes; a lambda passing the
     * inode number to the record's reader made it 112–120).
     */
    @Test
    void anLstatAllocatesOnlyItsResult() {
        try (Volume v = Volume.open(formatted(), OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            String[] names = new String[CALLS];
            for (int i = 0; i < CALLS; i++) {
                names[i] = "f" + i;
                ns.create("/d/" + names[i], 0644, true);
            }
            long[] sum = {0};
            try (Handle d = ns.open("/d")) {
                assertBelow(104, "an lstat by handle", n -> sum[0] += ns.lstat(d, names[n]).ino());
            }
            assertTrue(sum[0] > 0);
        }
    }

    @Test
    void listingsIntoABufferAllocateNothingPerEntry() {
        try (Volume v = Volume.open(formatted(), OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/inline", 0755);
            ns.mkdir("/tree", 0755);
            for (int i = 0; i < 3; i++) {
                ns.create("/inline/f" + i, 0644, true);
            }
            for (int i = 0; i < 300; i++) {
                ns.create("/tree/file-" + i, 0644, true);
            }
            DirBuffer b = new DirBuffer(64);
            byte[] name = new byte[255];
            long[] sum = {0};
            // nothing per entry: a page of DirEntrys made ~83 B an entry. What is left is a fill's, 56-80 B of a
            // tree directory's (its cursor's reopening, as the JIT's escape analysis leaves it), under 4 B an
            // entry with 64 entries a fill
            for (String dir : new String[] {"/inline", "/tree"}) {
                assertBelow(64 + 4 * ns.list(dir).size(), "a whole listing of " + dir + " through a buffer", n -> {
                    b.rewind();
                    do {
                        ns.readdir(dir, b);
                        for (int i = 0; i < b.size(); i++) {
                            sum[0] += b.copyName(i, name) + b.ino(i);
                        }
                    } while (!b.end());
                });
            }
            assertTrue(sum[0] > 0);
            // a page of a small directory, asked for with room for many (as allEntries asks): room made for what
            // comes, not for the request (a buffer presized to 1,024 entries made 35 KB a call, now about 1 KB)
            assertBelow(2048, "a page readdir of a 3-entry directory asked for 4,096", n -> sum[0] += ns.readdir("/inline", DirCookie.START, 4096).entries().size());
        }
    }

    private static MemoryDevice formatted() {
        MemoryDevice device = MemoryDevice.create(65_536, 4096);
        Volume.format(device, OPTIONS);
        return device;
    }

    /**
     * Key {@code i}: 24 bytes led by a hash of {@code i}, as {@code bench kv}'s, so that new keys land all
     * over the tree: leaves split and merge, and the merges' freed blocks stay busy in the reserve.
     */
    private static MemorySegment key(MemorySegment key, int i) {
        long z = (i + 1) * 0x9E37_79B9_7F4A_7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        key.set(BIG_ENDIAN_LONG, 0, z ^ (z >>> 27));
        return key;
    }

    /** Runs {@code call} {@link #CALLS} times a round; the best round after the warm-up must allocate under {@code bound} bytes a call. */
    private static void assertBelow(double bound, String what, IntConsumer call) {
        double best = Double.MAX_VALUE;
        int n = 0;
        for (int round = 0; round < ROUNDS; round++) {
            long before = FileTestBase.allocatedBytes();
            for (int i = 0; i < CALLS; i++) {
                call.accept(n++ % CALLS);
            }
            if (round >= WARM_UP) {
                best = Math.min(best, (double) (FileTestBase.allocatedBytes() - before) / CALLS);
            }
        }
        System.out.println(what + ": " + best + " bytes allocated per call");
        assertTrue(best < bound, what + ": " + best + " bytes allocated per call, expected under " + bound);
    }
}
