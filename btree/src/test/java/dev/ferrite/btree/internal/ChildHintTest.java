package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A descent remembers in each header and interior node the child buffer it went to ({@link BTree#child}),
 * and the next descent takes it from there instead of the cache's hash table, for as long as it is the
 * block's cached buffer: once the child is evicted, the hint is passed over and replaced.
 */
class ChildHintTest {
    private static final int BLOCK_SIZE = 4096;
    private static final int LOG_BLOCKS = 1024;
    private static final long SMALL_CACHE = (BufferCache.MIN_FRAMES + 16L) * BLOCK_SIZE;
    private static final int KEYS = 10_000;

    @Test
    void aDescentFollowsTheHintsUntilTheLeafIsEvicted() throws Exception {
        ProbeDevice device = new ProbeDevice(32768, BLOCK_SIZE);
        try (Store s = Store.format(device, LOG_BLOCKS, SMALL_CACHE)) {
            // a hint to an evicted buffer would send descents to it again and again: the reads run in a
            // daemon thread, so that such a loop fails the test instead of keeping its JVM alive
            CompletableFuture<Void> done = new CompletableFuture<>();
            Thread.ofPlatform().daemon().name("hinted-reads").start(() -> {
                try {
                    evictAndReadAgain(s);
                    done.complete(null);
                } catch (Throwable t) {
                    done.completeExceptionally(t);
                }
            });
            try {
                done.get(60, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof AssertionError a) {
                    throw a;
                }
                throw e;
            }
        } finally {
            device.close();
        }
    }

    private static void evictAndReadAgain(Store s) {
        for (int i = 0; i < KEYS; i++) {
            s.tree.put(key(i), value(i));
        }
        s.journal.forceAll();
        byte[] k = key(7);
        assertArrayEquals(value(7), s.tree.get(k));
        Buffer leaf = hintedPath(s, k);

        for (int round = 0; round < 10 && !leaf.isObsolete(); round++) {
            for (int i = KEYS - 1; i > KEYS / 2; i--) {
                assertArrayEquals(value(i), s.tree.get(key(i)));
            }
        }
        assertTrue(leaf.isObsolete(), "reading the other half of a tree 10 times the cache evicted nothing");

        assertArrayEquals(value(7), s.tree.get(k), "the get after the eviction");
        Buffer again = hintedPath(s, k);
        assertNotSame(leaf, again);
        assertSame(again, s.cache.lookup(again.block()));
    }

    /** Follows the hints from the header down to {@code key}'s leaf, checking each is the cached buffer of its child. */
    private static Buffer hintedPath(Store s, byte[] key) {
        Buffer h = s.tree.header();
        long root = BTreeHeaderFormat.root(h.data());
        Buffer cur = hint(h, 0, root, s.cache);
        MemorySegment k = MemorySegment.ofArray(key);
        int levels = 0;
        while (!BTreeNodeFormat.isLeaf(cur.data())) {
            int idx = BTreeNodeFormat.childIndexFor(cur.data(), k);
            cur = hint(cur, idx + 1, BTreeNodeFormat.childAt(cur.data(), idx), s.cache);
            levels++;
        }
        assertTrue(levels >= 2, "the tree has " + levels + " interior levels: too small to test");
        return cur;
    }

    private static Buffer hint(Buffer parent, int idx, long block, BufferCache cache) {
        Buffer[] hints = parent.children;
        assertTrue(hints != null && idx < hints.length, "no hint at " + idx + " in " + parent + ": "
                + (hints == null ? null : Arrays.toString(hints)));
        assertSame(cache.lookup(block), hints[idx], "the hint at " + idx + " of " + parent);
        return hints[idx];
    }

    private static byte[] key(int i) {
        return String.format("key-%08d", i).getBytes(StandardCharsets.US_ASCII);
    }

    private static byte[] value(int i) {
        byte[] v = new byte[200];
        Arrays.fill(v, (byte) i);
        return v;
    }
}
