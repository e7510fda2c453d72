package dev.ferrite.btree;

import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;

/**
 * Every block a tree occupies (its header and each node), for checkers that account for all the blocks
 * of a device region. Reads without locking: run it while nothing changes the tree.
 */
public final class TreeWalk {
    private TreeWalk() {
    }

    /** Calls {@code sink} with the header block and every node block of {@code tree}, parents before children. */
    public static void blocks(BTree tree, LongConsumer sink) {
        sink.accept(tree.headerBlock());
        MemorySegment h = tree.headerBuffer().data();
        visit(tree, BTreeHeaderFormat.root(h), BTreeHeaderFormat.height(h) - 1, sink);
    }

    private static void visit(BTree tree, long block, int level, LongConsumer sink) {
        sink.accept(block);
        if (level == 0) {
            return;
        }
        MemorySegment n = tree.nodeBuffer(block).data();
        int c = BTreeNodeFormat.count(n);
        long[] children = new long[c + 1];
        children[0] = BTreeNodeFormat.leftmost(n);
        for (int i = 0; i < c; i++) {
            children[i + 1] = BTreeNodeFormat.child(n, i);
        }
        for (long child : children) {
            visit(tree, child, level - 1, sink);
        }
    }
}
