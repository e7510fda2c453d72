package dev.ferrite.dir;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The blocks of directory tree reserves that spills running beside the directories' writers are freeing
 * ({@code DirContents#spill}), by directory: a tree split skips them ({@link DirAllocator}) and the
 * room a writer enters with leaves them out. Kept here rather than in each {@link Inode}, which every
 * inode-cache miss makes: while no spill runs, one volatile read answers.
 *
 * <p>A directory's entry changes only under its inode's lock, which the spiller holds. {@link #running}
 * is raised before an entry is put and lowered after it is removed, so a reader that finds it 0 read it
 * before the publication began (the spiller's fence and record read then see that reader's record lock).
 */
final class SpillingBlocks {
    private final ConcurrentHashMap<Inode, long[]> byDir = new ConcurrentHashMap<>();
    /** Directories with an entry, or about to have one. */
    private final AtomicInteger running = new AtomicInteger();

    /** The blocks a spill beside {@code dir}'s writers is freeing, or null. */
    long[] of(Inode dir) {
        return running.get() == 0 ? null : byDir.get(dir);
    }

    /** Holding {@code dir}'s lock: publishes {@code blocks} (not changed afterwards) as {@code dir}'s, or none (null). */
    void set(Inode dir, long[] blocks) {
        if (blocks == null) {
            if (byDir.remove(dir) != null) {
                running.decrementAndGet();
            }
            return;
        }
        if (!byDir.containsKey(dir)) {
            running.incrementAndGet();
        }
        byDir.put(dir, blocks);
    }

    /** Whether {@code block} is one of {@code blocks} (none: null). */
    static boolean contains(long[] blocks, long block) {
        if (blocks != null) {
            for (long b : blocks) {
                if (b == block) {
                    return true;
                }
            }
        }
        return false;
    }
}
