package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;

/**
 * A log item's place in the CIL contexts of one parity (contexts alternate, so an item has two): what
 * the checkpoint of the context it was last committed into will write for it. Made when the item is
 * first committed into a context of that parity, so an item that is only ever read (most cached blocks)
 * carries none. Written under the item owner's lock; read by the push once the context has drained.
 */
final class CilSlot {
    /** Sequence of the context this slot last held the item for. */
    long ctxSeq;
    /**
     * Chunks the shadow holds, as of the item's last commit into that context: the chunks changed in the
     * context (its delta), or, if {@link #whole}, every chunk changed since the item was last home.
     */
    long shadowMap, shadowMapHigh;
    /** The context logs the item whole ({@link LogItem}): its checkpoint becomes the item's place in the AIL. */
    boolean whole;
    /** The whole copy is of a block allocated since last home ({@link Transaction#logZeroed}): zeros plus the ranges. */
    boolean zeroed;
    /** Bytes the item's op takes in that context's checkpoint. */
    int opBytes;
    /**
     * Chunks the shadow has room for, in chunk order: {@code shadowMap}'s, or every chunk of the block
     * ({@link DirtyMap#ALL}) once the delta outgrew {@link DirtyMap#spreadBytes}, so that a commit with new
     * chunks copies only those instead of moving every chunk above them.
     */
    long layout, layoutHigh;
    /**
     * The shadow: the chunks of {@code shadowMap} at their places in {@code layout}, in the {@code
     * capacity} bytes at {@code at} of {@code slab}, a buffer of the shadow pool ({@link ShadowPool#acquire});
     * dropped once the op is formatted.
     */
    MemorySegment slab;
    long at;
    int capacity;
    /** Next item first logged in that context on the same stripe. */
    LogItem next;
}
