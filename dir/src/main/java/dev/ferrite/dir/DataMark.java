package dev.ferrite.dir;

import java.lang.invoke.VarHandle;

/**
 * The mark a data write leaves for the next sync, and how a sync takes it: a file's for fsync ({@link Inode})
 * and the volume's for {@link Volume#sync} ({@link FileData}). The state stays in the owner's fields, a
 * volatile {@code boolean} mark and a volatile {@code int} count of syncs under way, reached through the
 * owner's VarHandles (no object per inode). A sync {@linkplain #take takes} the mark atomically, so a write
 * marking it meanwhile is not lost, and must make data durable if it found it set, or if another sync is
 * between its take and the end of its flush: the writes that one took the mark for may have returned before
 * this sync began, and are not durable until its flush ends, so this one must not return first. A taker
 * whose flush failed puts the mark back before it {@linkplain #end ends}: the reads after a take see it
 * still there, the mark back, or the next taker counted (its count comes before its take). A record, held
 * in a static final field: the JIT trusts its fields, so the handles fold into constants as the owner's own
 * static ones do.
 *
 * @param mark  the owner's volatile {@code boolean} mark
 * @param syncs the owner's volatile {@code int} count of syncs between their take and their end
 */
record DataMark(VarHandle mark, VarHandle syncs) {

    /** A data write of {@code owner}'s reached the device: the next sync owes it a flush. */
    void set(Object owner) {
        mark.setVolatile(owner, true);
    }

    /**
     * A sync of {@code owner} begins: true if it must make data durable (then call {@link #end} once its
     * flush is done or failed); false, nothing left to end, if no write is owed a flush.
     */
    boolean take(Object owner) {
        syncs.getAndAdd(owner, 1);
        boolean owed = (boolean) mark.getAndSet(owner, false) | (int) syncs.getVolatile(owner) > 1
                | (boolean) mark.getVolatile(owner) | (int) syncs.getVolatile(owner) > 1;
        if (!owed) {
            syncs.getAndAdd(owner, -1);
        }
        return owed;
    }

    /** Ends a sync {@link #take} obliged to flush; {@code flushed} false puts the mark back for the next one. */
    void end(Object owner, boolean flushed) {
        if (!flushed) {
            mark.setVolatile(owner, true);
        }
        syncs.getAndAdd(owner, -1);
    }
}
