package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.Set;
import java.util.function.LongConsumer;

import dev.ferrite.io.CorruptionException;

/**
 * Every block a tree occupies (its header and each node), for checkers that account for all the blocks
 * of a device region. Reads without locking: run it while nothing changes the tree.
 */
public final class TreeWalk {
    private TreeWalk() {
    }

    /**
     * Calls {@code sink} with the header block and every node block of {@code tree}, parents before children.
     *
     * @throws CorruptionException if an interior node is not one level below its parent, or a node is reached twice
     */
    public static void blocks(BTree tree, LongConsumer sink) {
        sink.accept(tree.headerBlock());
        MemorySegment h = tree.header().data();
        visit(tree, BTreeHeaderFormat.root(h), BTreeHeaderFormat.height(h) - 1, sink, new HashSet<>());
    }

    private static void visit(BTree tree, long block, int level, LongConsumer sink, Set<Long> seen) {
        if (!seen.add(block)) {
            throw new CorruptionException(block, BTree.NODE, "the node is reached twice (a cycle or a shared subtree)");
        }
        sink.accept(block);
        if (level == 0) {
            return; // leaves are not read
        }
        MemorySegment n = tree.node(block).data();
        if (BTreeNodeFormat.level(n) != level) {
            throw new CorruptionException(block, BTree.NODE, "level " + BTreeNodeFormat.level(n) + " where its parent says " + level);
        }
        int c = BTreeNodeFormat.count(n);
        long[] children = new long[c + 1];
        children[0] = BTreeNodeFormat.leftmost(n);
        for (int i = 0; i < c; i++) {
            children[i + 1] = BTreeNodeFormat.child(n, i);
        }
        for (long child : children) {
            visit(tree, child, level - 1, sink, seen);
        }
    }
}
