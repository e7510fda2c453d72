package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.function.Supplier;

import dev.ferrite.io.FerriteException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crafted nodes: a valid tree at rest gets one field of one leaf, interior node or header changed on
 * the device, with the checksum recomputed so that every header check passes, and is then reopened and
 * used: gets, puts, deletes, cursors both ways, the checker and destroy. Only Ferrite exceptions may come out
 * (never an index out of bounds, a null pointer or an endless loop), and when nothing complained and
 * the checker finds the tree sound, every read must give the tree's true contents.
 *
 * <p>{@code -Dferrite.seed=N} picks the seed; each case prints its seed, node and field on failure.
 */
@ExtendWith(TestSeed.class)
class BTreeHostileNodeTest {
    private static final long SEED = TestSeed.get(0x5EED_0BADL);
    private static final int CASES = 240;
    private static final int BS = 4096;
    private static final int LOG_BLOCKS = 512;
    private static final long BLOCKS = 2048;
    private static final long CACHE_BYTES = 1L << 20;

    /** A field of a node, by where it is: a fixed offset, or one found through a slot. */
    enum Field {
        LEVEL, SKIP, COUNT, CELL_START, GARBAGE, LEFT, RIGHT, LEFTMOST, SLOT_BASE, SLOT_OFFSET, KEY_LENGTH, VALUE_LENGTH, CHILD,
        HEADER_ROOT, HEADER_HEIGHT,
        /** Four bytes anywhere in the node's header and slot array (the crafted leaf). */
        FOUR_BYTES
    }

    @Test
    void corruptFieldsOfSoundNodesRaiseOnlyFerriteExceptions() {
        Random setup = new Random(SEED);
        TreeMap<byte[], byte[]> model = new TreeMap<>(Keys::compare);
        Map<Long, Integer> levels;
        long header;
        try (Arena arena = Arena.ofConfined(); MemoryDevice pristine = MemoryDevice.create(BLOCKS, BS)) {
            try (Store s = Store.format(pristine, LOG_BLOCKS, CACHE_BYTES)) {
                for (int i = 0; i < 4000; i++) {
                    // shared leading bytes, so that nodes keep a prefix
                    byte[] k = ("dir/" + (char) ('a' + setup.nextInt(3)) + "/" + Long.toString(setup.nextLong() & 0xFFFFFFFFL, 36)).getBytes();
                    byte[] v = new byte[setup.nextInt(24)];
                    setup.nextBytes(v);
                    s.tree.put(k, v);
                    model.put(k, v);
                }
                levels = s.nodes();
                header = s.tree.headerBlock();
            }
            MemorySegment image = arena.allocate(BLOCKS * BS, BS);
            pristine.read(0, image);
            List<Long> leaves = new ArrayList<>(), interior = new ArrayList<>();
            levels.forEach((b, l) -> (l == 0 ? leaves : interior).add(b));
            if (interior.isEmpty()) {
                fail("the tree must have interior nodes");
            }
            int destroyed = 0;
            for (int c = 0; c < CASES; c++) {
                long seed = SEED * 1_000_003L + c;
                Random rnd = new Random(seed);
                Field field = Field.values()[rnd.nextInt(Field.values().length)];
                long block = switch (field) {
                    case HEADER_ROOT, HEADER_HEIGHT -> header;
                    case LEFTMOST, CHILD -> interior.get(rnd.nextInt(interior.size()));
                    case VALUE_LENGTH, SLOT_BASE -> leaves.get(rnd.nextInt(leaves.size()));
                    default -> rnd.nextBoolean() ? interior.get(rnd.nextInt(interior.size())) : leaves.get(rnd.nextInt(leaves.size()));
                };
                String what = "seed " + seed + " (-Dferrite.seed=" + SEED + ", case " + c + "): " + field + " of "
                        + (block == header ? "header" : levels.get(block) == 0 ? "leaf" : "interior node") + " " + block;
                try (MemoryDevice device = MemoryDevice.create(BLOCKS, BS)) {
                    device.write(0, image);
                    String change = corrupt(device, arena, block, field, rnd, leaves, interior, header);
                    if (assertTimeoutPreemptively(Duration.ofSeconds(20), () -> exercise(device, model, levels.size() + 1, rnd, what + change),
                            () -> what + change + ": did not finish (an endless loop?)")) {
                        destroyed++;
                    }
                }
            }
            // damage the checks cannot see (a garbage count still adding up, a stale sibling of an end leaf) leaves a usable tree
            assertTrue(destroyed > 0, "no case got as far as destroying its tree: the cases test nothing past the first refusal");
        }
    }

    /** Changes {@code field} of {@code block} on the device and recomputes the checksum; says what it did. */
    private static String corrupt(MemoryDevice device, Arena arena, long block, Field field, Random rnd,
                                  List<Long> leaves, List<Long> interior, long header) {
        MemorySegment b = arena.allocate(BS, BS);
        device.read(block, b);
        int count = BTreeNodeFormat.count(b);
        int i = count == 0 ? 0 : rnd.nextInt(count);
        long offset;
        boolean wide;
        switch (field) {
            case LEVEL -> { offset = BTreeNodeFormat.LEVEL; wide = false; }
            case SKIP -> { offset = BTreeNodeFormat.SKIP; wide = false; }
            case COUNT -> { offset = BTreeNodeFormat.COUNT; wide = false; }
            case CELL_START -> { offset = BTreeNodeFormat.CELL_START; wide = false; }
            case GARBAGE -> { offset = BTreeNodeFormat.GARBAGE; wide = false; }
            case LEFT -> { offset = BTreeNodeFormat.LEFT; wide = true; }
            case RIGHT -> { offset = BTreeNodeFormat.RIGHT; wide = true; }
            case LEFTMOST -> { offset = BTreeNodeFormat.LEFTMOST; wide = true; }
            case SLOT_BASE -> { offset = BTreeNodeFormat.BASE; wide = false; }
            case SLOT_OFFSET -> { offset = BTreeNodeFormat.base(b) + (long) BTreeNodeFormat.SLOT * i; wide = false; }
            case KEY_LENGTH -> { offset = BTreeNodeFormat.slot(b, i); wide = false; }
            case VALUE_LENGTH -> { offset = BTreeNodeFormat.slot(b, i) + 2L; wide = false; }
            case CHILD -> { offset = BTreeNodeFormat.slot(b, i) + 2L; wide = true; }
            case HEADER_ROOT -> { offset = BTreeHeaderFormat.ROOT; wide = true; }
            case HEADER_HEIGHT -> { offset = BTreeHeaderFormat.HEIGHT; wide = false; }
            case FOUR_BYTES -> { offset = BTreeNodeFormat.LEVEL + rnd.nextInt(BTreeNodeFormat.slotsEnd(b) - BTreeNodeFormat.LEVEL - 3); wide = false; }
            default -> throw new AssertionError(field);
        }
        long was, now;
        if (field == Field.FOUR_BYTES) {
            was = Integer.toUnsignedLong(b.get(U32, offset));
            now = Integer.toUnsignedLong(rnd.nextInt());
            b.set(U32, offset, (int) now);
        } else if (field == Field.LEVEL || field == Field.SKIP) {
            was = Byte.toUnsignedInt(b.get(JAVA_BYTE, offset));
            now = rnd.nextBoolean() ? was + (rnd.nextBoolean() ? 1 : -1) & 0xFF : rnd.nextInt(256);
            b.set(JAVA_BYTE, offset, (byte) now);
        } else if (wide) {
            was = b.get(U64, offset);
            long[] choices = {0, block, header, BLOCKS, BLOCKS - 1, rnd.nextLong(), was + 1,
                    leaves.get(rnd.nextInt(leaves.size())), interior.get(rnd.nextInt(interior.size()))};
            now = choices[rnd.nextInt(choices.length)];
            b.set(U64, offset, now);
        } else {
            was = Short.toUnsignedInt(b.get(U16, offset));
            int[] choices = {0, 1, 8, BS - 1, BS, BS + 1, 0xFFFF, 40496, rnd.nextInt(0x10000), rnd.nextInt(BS),
                    (int) was + 1, (int) was - 1, (int) was + 8, (int) was - 8};
            now = choices[rnd.nextInt(choices.length)] & 0xFFFF;
            b.set(U16, offset, (short) now);
        }
        BlockHeaderFormat.stamp(b, BlockHeaderFormat.lsn(b));
        device.write(block, b);
        return " (index " + i + ", offset " + offset + ": " + was + " -> " + now + ")";
    }

    /** Reads, checks and writes the damaged tree; fails on anything but a Ferrite exception, or on a wrong answer from a tree that looked sound. */
    private static boolean exercise(MemoryDevice device, TreeMap<byte[], byte[]> model, int treeBlocks, Random rnd, String what) {
        Store s;
        try {
            s = Store.open(device, LOG_BLOCKS, CACHE_BYTES);
        } catch (FerriteException e) {
            return false; // the header itself was refused
        } catch (RuntimeException e) {
            throw new AssertionError(what + ": opening threw " + e, e);
        }
        try {
            // A tree the checker finds sound must answer truly: damage it cannot see must not be acted on.
            Object check = attempt(what, "check", s.tree::check);
            boolean sound = check instanceof TreeCheck t && t.ok();
            List<byte[]> keys = new ArrayList<>(model.keySet());
            for (int k = 0; k < 50; k++) {
                byte[] key = keys.get(rnd.nextInt(keys.size()));
                Object v = attempt(what, "get", () -> s.tree.get(key));
                if (sound && v != FAILED) {
                    assertArrayEquals(model.get(key), (byte[]) v, what + ": get from a tree that checked sound");
                }
            }
            for (boolean reverse : new boolean[] {false, true}) {
                Object seen = attempt(what, reverse ? "reverse cursor" : "cursor", () -> {
                    List<byte[]> out = new ArrayList<>();
                    Cursor cur = s.tree.cursor(null, reverse);
                    while (cur.next()) {
                        out.add(cur.key());
                        if (out.size() > model.size()) {
                            throw new AssertionError(what + ": the cursor returned more keys than the tree has");
                        }
                    }
                    return out;
                });
                if (sound && seen != FAILED) {
                    List<byte[]> expected = new ArrayList<>(reverse ? model.descendingKeySet() : model.keySet());
                    @SuppressWarnings("unchecked")
                    List<byte[]> got = (List<byte[]>) seen;
                    assertEquals(expected.size(), got.size(), what + ": keys of a tree that checked sound");
                    for (int k = 0; k < got.size(); k++) {
                        assertArrayEquals(expected.get(k), got.get(k), what + ": key " + k + " of a tree that checked sound");
                    }
                }
            }
            for (int k = 0; k < 30; k++) {
                byte[] key = rnd.nextBoolean() ? keys.get(rnd.nextInt(keys.size())) : ("dir/b/" + rnd.nextInt()).getBytes();
                byte[] value = new byte[rnd.nextInt(200)];
                switch (rnd.nextInt(3)) {
                    case 0, 1 -> attempt(what, "put", () -> s.tree.put(key, value));
                    default -> attempt(what, "delete", () -> s.tree.delete(key));
                }
            }
            attempt(what, "check after writes", s.tree::check);
            // the writes may have grown the tree by a few blocks
            return attempt(what, "destroy", () -> {
                try (Txn txn = Txn.begin(s.cache, treeBlocks + 16)) {
                    s.tree.destroy(txn);
                    return txn.commit();
                }
            }) != FAILED;
        } finally {
            try {
                s.journal.close();
            } catch (FerriteException e) {
                // shut down by a write that met the damage
            } finally {
                s.cache.close();
            }
        }
    }

    /** What {@link #attempt} returns when the operation threw a Ferrite exception. */
    private static final Object FAILED = new Object();

    /** Runs {@code op}; {@link #FAILED} if it threw a Ferrite exception, a failure naming the case if anything else. */
    private static Object attempt(String what, String op, Supplier<?> run) {
        try {
            return run.get();
        } catch (FerriteException e) {
            return FAILED;
        } catch (AssertionError e) {
            throw e;
        } catch (RuntimeException | StackOverflowError e) {
            throw new AssertionError(what + ": " + op + " threw " + e, e);
        }
    }
}
