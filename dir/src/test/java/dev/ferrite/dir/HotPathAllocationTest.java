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
 * The writes of issue 21's list allocate little per call once warm, on the calling thread: a table put
 * replacing a value (nothing: the stored form's view is the thread's), a table insert of a new key with a
 * delete of an old one (the reserve checks ask the cache about freed blocks without boxing them; what is
 * left is a new buffer per leaf split), and a create and unlink by path (the thread's walk). Generous
 * bounds, best of four rounds after a warm-up: they fail on a regression of tens of bytes a call, not on
 * a compilation met in a round.
 */
class HotPathAllocationTest {
    private static final int KEYS = 4096;
    private static final ValueLayout.OfLong BIG_ENDIAN_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final int ROUNDS = 5;
    private static final int CALLS = 4096;
    /** Room for everything in the cache and the log, as in the JMH benchmarks (no write-back or log-space waits in a round). */
    private static final VolumeOptions OPTIONS = VolumeOptions.defaults().withLogBlocks(8192).withCacheBytes(128L << 20);

    @Test
    void tablePutsAndDeletesAllocateLittle() {
        try (Volume v = Volume.open(formatted(), OPTIONS); Table t = v.tables().create("t").withDurability(Durability.NONE);
                Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(8);
            MemorySegment value = arena.allocate(64);
            for (int i = 0; i < KEYS; i++) {
                t.put(key(key, i), value);
            }
            assertBelow(8, "a put replacing a value", n -> t.put(key(key, n % KEYS), value));
            int[] oldest = {0};
            assertBelow(96, "an insert of a new key and a delete of the oldest", n -> {
                t.put(key(key, oldest[0] + KEYS), value);
                assertTrue(t.delete(key(key, oldest[0]++)));
            });
            assertEquals(KEYS, t.count());
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
            assertBelow(224, "a create and an unlink by path", n -> {
                ns.create(paths[n], 0644, true);
                ns.unlink(paths[n]);
            });
            assertEquals(CALLS, ns.list("/d").size());
        }
    }

    private static MemoryDevice formatted() {
        MemoryDevice device = MemoryDevice.create(65_536, 4096);
        Volume.format(device, OPTIONS);
        return device;
    }

    /** Key {@code i}: its 8 bytes big-endian, so that new keys spread over the leaves as hashed keys do. */
    private static MemorySegment key(MemorySegment key, int i) {
        key.set(BIG_ENDIAN_LONG, 0, Long.reverse(i));
        return key;
    }

    /** Runs {@code call} {@link #CALLS} times a round; the best round after the first must allocate under {@code bound} bytes a call. */
    private static void assertBelow(double bound, String what, IntConsumer call) {
        double best = Double.MAX_VALUE;
        int n = 0;
        for (int round = 0; round < ROUNDS; round++) {
            long before = FileTestBase.allocatedBytes();
            for (int i = 0; i < CALLS; i++) {
                call.accept(n++ % CALLS);
            }
            if (round > 0) {
                best = Math.min(best, (double) (FileTestBase.allocatedBytes() - before) / CALLS);
            }
        }
        System.out.println(what + ": " + best + " bytes allocated per call");
        assertTrue(best < bound, what + ": " + best + " bytes allocated per call, expected under " + bound);
    }
}
