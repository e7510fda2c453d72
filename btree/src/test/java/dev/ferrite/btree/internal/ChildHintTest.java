package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A descent remembers in each header and interior node the child buffer it went to ({@link BTree#child}),
 * and the next descent takes it from there instead of the cache's hash table, for as long as it is the
 * block's cached buffer: once the child is evicted, the hint is passed over and replaced. The clock hand
 * drops a node's hints as it passes, so that they keep no more evicted buffers than a lap evicts.
 */
class ChildHintTest {
    private static final int BLOCK_SIZE = 4096;
    private static final int LOG_BLOCKS = 1024;
    private static final long SMALL_CACHE = (BufferCache.MIN_FRAMES + 16L) * BLOCK_SIZE;
    private static final int KEYS = 10_000;

    @Test
    void aDescentFollowsTheHintsUntilTheLeafIsEvicted() throws Exception {
        inDaemon(ChildHintTest::evictAndReadAgain);
    }

    @Test
    void hintsKeepNoMoreEvictedBuffersThanTheCacheHasFrames() throws Exception {
        inDaemon(s -> {
            fill(s);
            List<Long> interior = interiorNodes(s);
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < KEYS; i++) {
                    assertArrayEquals(value(i), s.tree.get(key(i)));
                }
            }
            int evicted = 0, hints = 0;
            for (long block : interior) {
                Buffer b = s.cache.lookup(block);
                Buffer[] children = b == null ? null : b.children;
                for (Buffer c : children == null ? new Buffer[0] : children) {
                    hints += c == null ? 0 : 1;
                    evicted += c != null && c.isObsolete() ? 1 : 0;
                }
            }
            assertTrue(evicted <= s.cache.capacity(), evicted + " of " + hints + " hints keep evicted buffers, more than the "
                    + s.cache.capacity() + " frames a lap of the clock evicts at most, in a tree of " + interior.size() + " interior nodes");
        });
    }

    /**
     * A split that puts a new child into a node moves the node's hints right of it up one with their
     * children ({@link BTree#childInserted}): every hint still names the child at its index, so descents
     * right of the split take theirs instead of passing over a neighbour's and looking the block up.
     * Before, each hint right of the new child named its left neighbour until a descent replaced it.
     */
    @Test
    void aSplitMovesTheHintsRightOfItWithTheirChildren() throws Exception {
        withHintedLeavesParent((s, parent) -> {
            int before = BTreeNodeFormat.count(parent.data());
            int added = 0;
            while (BTreeNodeFormat.count(parent.data()) == before) { // until the leftmost leaf splits
                byte[] k = String.format("key-00000000-%06d", added).getBytes(StandardCharsets.US_ASCII);
                s.tree.put(k, value(added++));
                assertTrue(added < 1000, "1000 puts into the leftmost leaf split nothing");
            }
            assertSame(parent, leavesParent(s, key(0)), "the parent split too");
            assertHintsNameTheirChildren(s, parent, "the split", before);
        });
    }

    /**
     * A merge that takes a child out of a node moves the node's hints right of it down one with their
     * children ({@link BTree#childRemoved}), as a split's move up: every hint still names the child at its
     * index. Before, each hint right of the merged-away leaf named its right neighbour until a descent
     * replaced it, and deleting keys in random order looked most of the leaves' blocks up in the hash table.
     */
    @Test
    void aMergeMovesTheHintsRightOfItWithTheirChildren() throws Exception {
        withHintedLeavesParent((s, parent) -> {
            int before = BTreeNodeFormat.count(parent.data());
            mergeAway(s, parent, before / 2);
            assertHintsNameTheirChildren(s, parent, "the merge", before - 1);
        });
    }

    /**
     * A leaf's merge reads its partner (its left neighbour) and the leaf beyond the pair (whose link
     * changes) through their parent's hints, as a descent reads a child, and leaves them hinted there:
     * before, it looked both up in the cache's hash table, which cost it about as much as a level of the
     * descent each, and left the parent's hints as they were.
     */
    @Test
    void aMergeReadsItsPartnerAndTheLeafBeyondThroughTheParentsHints() throws Exception {
        withHintedLeavesParent((s, parent) -> {
            int m = BTreeNodeFormat.count(parent.data()) / 2;
            long partner = BTreeNodeFormat.childAt(parent.data(), m - 1), beyond = BTreeNodeFormat.childAt(parent.data(), m + 1);
            parent.children = null; // no hints: only the deletes' descents and the merge set any
            mergeAway(s, parent, m);
            Buffer[] hints = parent.children;
            assertNotNull(hints, "no hints after the deletes");
            assertSame(s.cache.lookup(partner), hints[m], "the partner's hint (at " + m + ") after the merge");
            assertSame(s.cache.lookup(beyond), hints[m + 1], "the hint of the leaf beyond (now at " + (m + 1) + ") after the merge");
        });
    }

    /**
     * Deletes the keys of child {@code m} of {@code parent} (a leaves' parent), in order, until a merge
     * takes a child out of the parent; checks that it was that leaf, merged into its left neighbour.
     */
    private static void mergeAway(Store s, Buffer parent, int m) {
        int before = BTreeNodeFormat.count(parent.data());
        long leaf = BTreeNodeFormat.childAt(parent.data(), m), left = BTreeNodeFormat.childAt(parent.data(), m - 1);
        MemorySegment n = s.cache.lookup(leaf).data();
        List<byte[]> keys = new ArrayList<>();
        for (int i = 0; i < BTreeNodeFormat.count(n); i++) {
            keys.add(BTreeNodeFormat.key(n, i).toArray(ValueLayout.JAVA_BYTE));
        }
        for (byte[] k : keys) {
            assertTrue(s.tree.delete(k) >= 0, "the delete of a key of block " + leaf);
            if (BTreeNodeFormat.count(parent.data()) < before) {
                break;
            }
        }
        assertTrue(BTreeNodeFormat.count(parent.data()) == before - 1, "deleting the keys of child " + m + " merged nothing away");
        assertTrue(BTreeNodeFormat.childAt(parent.data(), m - 1) == left && BTreeNodeFormat.childAt(parent.data(), m) != leaf,
                "the merge took another child than " + m + " (block " + leaf + ") out of the parent");
    }

    /**
     * Runs {@code work} on a fresh store (a cache that holds the tree) filled, with every key read, which
     * sets every hint on every level, and the leftmost leaves' parent, which has at least nine children.
     */
    private static void withHintedLeavesParent(BiConsumer<Store, Buffer> work) {
        ProbeDevice device = new ProbeDevice(32768, BLOCK_SIZE);
        try (Store s = Store.format(device, LOG_BLOCKS, 4096L * BLOCK_SIZE)) {
            fill(s);
            for (int i = 0; i < KEYS; i++) {
                assertArrayEquals(value(i), s.tree.get(key(i)));
            }
            Buffer parent = leavesParent(s, key(0));
            int children = BTreeNodeFormat.count(parent.data()) + 1;
            assertTrue(children >= 9, "the leftmost leaves' parent has " + children + " children: too few to test");
            work.accept(s, parent);
        } finally {
            device.close();
        }
    }

    /** Every hint of {@code parent} names the cached buffer of the child at its index, and at least {@code least} are set, after {@code change}. */
    private static void assertHintsNameTheirChildren(Store s, Buffer parent, String change, int least) {
        Buffer[] hints = parent.children;
        int children = BTreeNodeFormat.count(parent.data()) + 1, named = 0;
        for (int idx = 0; idx < children; idx++) {
            long child = BTreeNodeFormat.childAt(parent.data(), idx - 1);
            Buffer h = idx < hints.length ? hints[idx] : null;
            if (h != null) {
                assertSame(s.cache.lookup(child), h, "the hint at " + idx + " of " + children + " after " + change + " names block "
                        + h.block() + ", not the child there, " + child);
                named++;
            }
        }
        assertTrue(named >= least, "only " + named + " of " + children + " children hinted after " + change);
    }

    /** The buffer of the interior node just above the leaf of {@code key}. */
    private static Buffer leavesParent(Store s, byte[] key) {
        MemorySegment k = MemorySegment.ofArray(key);
        Buffer cur = s.cache.lookup(BTreeHeaderFormat.root(s.tree.header().data()));
        for (;;) {
            Buffer next = s.cache.lookup(BTreeNodeFormat.childAt(cur.data(), BTreeNodeFormat.childIndexFor(cur.data(), k)));
            if (BTreeNodeFormat.isLeaf(next.data())) {
                return cur;
            }
            cur = next;
        }
    }

    /**
     * Runs {@code work} on a fresh store in a daemon thread: a hint to an evicted buffer would send descents
     * to it again and again, and such a loop must fail the test instead of keeping its JVM alive.
     */
    private static void inDaemon(Consumer<Store> work) throws Exception {
        ProbeDevice device = new ProbeDevice(32768, BLOCK_SIZE);
        try (Store s = Store.format(device, LOG_BLOCKS, SMALL_CACHE)) {
            CompletableFuture<Void> done = new CompletableFuture<>();
            Thread.ofPlatform().daemon().name("hinted-reads").start(() -> {
                try {
                    work.accept(s);
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

    /** The tree's interior node blocks, each node copied as it is read (in a cache this small the next read may take its frame). */
    private static List<Long> interiorNodes(Store s) {
        List<Long> interior = new ArrayList<>();
        ArrayDeque<Long> queue = new ArrayDeque<>(List.of(BTreeHeaderFormat.root(s.tree.header().data())));
        while (!queue.isEmpty()) {
            long block = queue.poll();
            MemorySegment n = MemorySegment.ofArray(s.tree.node(block).data().toArray(ValueLayout.JAVA_BYTE));
            if (!BTreeNodeFormat.isLeaf(n)) {
                interior.add(block);
                for (int i = -1, c = BTreeNodeFormat.count(n); i < c; i++) {
                    queue.add(BTreeNodeFormat.childAt(n, i));
                }
            }
        }
        return interior;
    }

    private static void fill(Store s) {
        for (int i = 0; i < KEYS; i++) {
            s.tree.put(key(i), value(i));
        }
        s.journal.forceAll();
    }

    private static void evictAndReadAgain(Store s) {
        fill(s);
        byte[] k = key(7);
        assertArrayEquals(value(7), s.tree.get(k));
        Buffer leaf = hintedPathAfterGet(s, k);

        for (int round = 0; round < 10 && !leaf.isObsolete(); round++) {
            for (int i = KEYS - 1; i > KEYS / 2; i--) {
                assertArrayEquals(value(i), s.tree.get(key(i)));
            }
        }
        assertTrue(leaf.isObsolete(), "reading the other half of a tree 10 times the cache evicted nothing");

        assertArrayEquals(value(7), s.tree.get(k), "the get after the eviction");
        Buffer again = hintedPathAfterGet(s, k);
        assertNotSame(leaf, again);
        assertSame(again, s.cache.lookup(again.block()));
    }

    /**
     * {@link #hintedPath} after a get of {@code key} from the header down that missed nothing. A get that
     * missed claimed frames, and the clock hand drops the hints of every buffer it passes, the header's too
     * if it passed that frame after the descent left the root's hint there; and a thread's next descent
     * resumes below the deepest node of its last path that is unchanged, so it may not pass the nodes whose
     * hints went. So each try is the first get of a thread of its own, until one claims no frame.
     */
    private static Buffer hintedPathAfterGet(Store s, byte[] key) {
        for (int tries = 0; ; tries++) {
            long misses = s.cache.stats().misses();
            byte[][] got = new byte[1][];
            Thread t = Thread.ofPlatform().start(() -> got[0] = s.tree.get(key));
            try {
                t.join(TimeUnit.SECONDS.toMillis(30));
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertNotNull(got[0], "the get of a fresh thread");
            if (s.cache.stats().misses() == misses) {
                return hintedPath(s, key);
            }
            assertTrue(tries < 10, "10 gets of one key in a row each missed a node");
        }
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
