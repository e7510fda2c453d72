package dev.ferrite.dir;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The volume-wide counts statfs reports, striped so that allocations in different groups never share a
 * cache line (XFS's per-CPU superblock counters). Each group header holds its own exact, journaled
 * counts; these sums are folded into the superblock at unmount and rebuilt from the group headers at
 * mount after an unclean shutdown.
 */
final class Counters {
    final LongAdder freeBlocks = new LongAdder();
    final LongAdder freeInodes = new LongAdder();
    final LongAdder inodes = new LongAdder();
    /**
     * Of {@link #freeBlocks}, those the groups hold back for their refcount trees' growth
     * ({@link Refcounts#reserve}): kept by the groups as their trees grow and shrink, never folded into the
     * superblock (the mount computes each group's from its tree).
     */
    final LongAdder reservedBlocks = new LongAdder();
    /**
     * Of {@link #freeBlocks}, those the groups hold back for their free lists: what each list lacks of
     * {@link AllocationGroup#LIST_MOST} entries, kept by the lists as their counts move ({@link FreeList}).
     * The lists' blocks are free blocks the spare count does not offer: a refill moving blocks from free
     * space to a list, or a spill moving them back, leaves {@link #spare} alone (XFS counts its AGFL blocks
     * free); only a node a tree takes off a list lowers it.
     */
    final LongAdder listsLack = new LongAdder();
    /**
     * Free blocks promised to allocations not made yet, all out of one limit, {@link #spare} (XFS's in-core
     * free count, which delayed-allocation and transactions' block reservations both come out of): dirty
     * pages' blocks and their files' extent maps ({@link PageCache#reserve}), and what a direct write,
     * fallocate, a copy on write or a namespace or table allocation is about to take ({@link #claim}). Moved
     * by CAS within that limit only, so what all of them may take never exceeds it; in memory only.
     */
    private final AtomicLong promised = new AtomicLong();
    /** What promises may hold in all: {@link Volume#spareBlocks}, a sum read without a lock (tests lift it). */
    private volatile LongSupplier spare = () -> Long.MAX_VALUE;
    /**
     * The set-aside pool (XFS's reserved blocks, {@code m_resblks}): blocks the spare count leaves out, so
     * that the tree nodes no claim covers (a free's or a refill's growth of the free-space trees, the inode,
     * orphan and refcount trees' between refills) come out of it ({@link #draw}) instead of out of blocks
     * promised. Frees top it up again ({@link #repay}) before they add to the spare count.
     */
    private volatile long setAside;
    /** Blocks drawn from {@link #setAside} and not repaid yet: at most {@link #setAside}. */
    private final AtomicLong drawn = new AtomicLong();

    void set(long freeBlocks, long freeInodes, long inodes) {
        this.freeBlocks.reset();
        this.freeBlocks.add(freeBlocks);
        this.freeInodes.reset();
        this.freeInodes.add(freeInodes);
        this.inodes.reset();
        this.inodes.add(inodes);
    }

    void setSpare(LongSupplier spare) {
        this.spare = spare;
    }

    void setAside(long blocks) {
        setAside = blocks;
    }

    /** Blocks of the set-aside pool not drawn: the spare count leaves them out. */
    long setAsideLeft() {
        return setAside - drawn.get();
    }

    /**
     * A tree took {@code n} blocks no claim covers: they come out of the set-aside pool, as far as it
     * holds them, so the spare count stays (past that, it drops: the pool is sized for what frees and
     * refills take between two refills, not for growth without end).
     */
    void draw(long n) {
        for (long d = drawn.get(), seen; d < setAside; d = seen) {
            if ((seen = drawn.compareAndExchange(d, Math.min(setAside, d + n))) == d) {
                return;
            }
        }
    }

    /** {@code n} blocks were freed: what the set-aside pool lacks is topped up from them first. One read when it lacks nothing. */
    void repay(long n) {
        for (long d = drawn.get(), seen; d > 0; d = seen) {
            if ((seen = drawn.compareAndExchange(d, Math.max(0, d - n))) == d) {
                return;
            }
        }
    }

    /**
     * Promises {@code n} blocks if the spare ones not promised yet hold them: false, promising nothing, if
     * not. Lock-free, allocation-free: one CAS (again only if another promise moved the count meanwhile),
     * against the spare read once. Give them back with {@link #release} once the allocation took them (its
     * free count moved: until then both count them) or will not.
     */
    boolean claim(long n) {
        long limit = spare.getAsLong();
        for (long r = promised.get(), seen; r + n <= limit; r = seen) {
            if ((seen = promised.compareAndExchange(r, r + n)) == r) {
                return true;
            }
        }
        return false;
    }

    /** Gives back {@code n} blocks {@link #claim} promised. */
    void release(long n) {
        if (n != 0) {
            promised.addAndGet(-n);
        }
    }

    /** Blocks promised now (a hint while anything allocates; exact with nothing in flight). */
    long promised() {
        return promised.get();
    }
}
