package dev.ferrite.btree.internal;

import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;

/**
 * The cache's stale buffers of freed blocks whose free is not yet in a checkpoint in the AIL (see
 * {@link BufferCache#isBusy}), found by block number without boxing it: allocators ask about the blocks of
 * a reserve on every table write and directory change, and a {@code ConcurrentHashMap<Long, Buffer>} made
 * a {@code Long} per question (about 180 bytes per table insert and delete).
 *
 * <p>Hash chains through {@link Buffer#freeingNext}. Lookups walk them lock-free (an empty slot, the
 * usual answer, is one read); changes take their slot's stripe lock. A removed buffer keeps its link, so
 * a lookup standing on it goes on through the rest of its chain; a buffer is only ever put back into its
 * own chain (its block does not change), at the head, from where it again reaches every entry.
 */
final class FreeingBuffers {
    private static final int SLOTS = 1 << 14;
    private static final int STRIPES = 64;

    private final AtomicReferenceArray<Buffer> heads = new AtomicReferenceArray<>(SLOTS);
    /** Stripe {@code s} orders the changes to slots {@code s}, {@code s + STRIPES}, ... */
    private final Object[] stripes = new Object[STRIPES];

    FreeingBuffers() {
        for (int i = 0; i < STRIPES; i++) {
            stripes[i] = new Object();
        }
    }

    /** The entry of {@code block}, or null. Lock-free; allocates nothing. */
    Buffer get(long block) {
        for (Buffer b = heads.get(slot(block)); b != null; b = b.freeingNext) {
            if (b.block() == block) {
                return b;
            }
        }
        return null;
    }

    /**
     * Makes {@code b} its block's entry; returns the entry it replaced, or null. The new entry goes in
     * before the old one goes out, so that a lookup meanwhile finds one of them: the block stays busy.
     */
    Buffer put(Buffer b) {
        int slot = slot(b.block());
        synchronized (stripes[slot & (STRIPES - 1)]) {
            Buffer was = get(b.block());
            if (was == b) {
                return b;
            }
            b.freeingNext = heads.get(slot);
            heads.set(slot, b); // volatile: publishes the link before the entry
            if (was != null) {
                unlink(slot, was);
            }
            return was;
        }
    }

    /** Removes {@code b} if it is its block's entry; true if it was. */
    boolean remove(Buffer b) {
        int slot = slot(b.block());
        synchronized (stripes[slot & (STRIPES - 1)]) {
            return unlink(slot, b);
        }
    }

    /** Calls {@code action} with each entry (those added or removed meanwhile may be seen or not). */
    void forEach(Consumer<Buffer> action) {
        for (int slot = 0; slot < SLOTS; slot++) {
            for (Buffer b = heads.get(slot); b != null; b = b.freeingNext) {
                action.accept(b);
            }
        }
    }

    /** Unlinks {@code b} from chain {@code slot}, under its stripe's lock. */
    private boolean unlink(int slot, Buffer b) {
        Buffer prev = null;
        for (Buffer e = heads.get(slot); e != null; prev = e, e = e.freeingNext) {
            if (e == b) {
                if (prev == null) {
                    heads.set(slot, b.freeingNext);
                } else {
                    prev.freeingNext = b.freeingNext;
                }
                return true;
            }
        }
        return false;
    }

    /**
     * The block's low bits: neighbouring blocks in neighbouring slots, so that an allocator asking about a
     * run of blocks ({@code FreeSpace}'s look for 256 blocks that are not busy, for a 1 MiB table blob)
     * reads a few cache lines of {@link #heads} where a hashed slot read a line a block.
     */
    private static int slot(long block) {
        return (int) block & (SLOTS - 1);
    }
}
