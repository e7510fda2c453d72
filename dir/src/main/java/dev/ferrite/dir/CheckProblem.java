package dev.ferrite.dir;

import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * One thing a volume check found wrong: the structure it is in, where (a block, an inode, a path, each
 * when known) and what.
 *
 * @param kind   the structure the problem is in
 * @param block  the device block it was found in, when one is named
 * @param inode  the inode it concerns, when one is named
 * @param path   a path to that inode from the root, when the walk knows one
 * @param detail what is wrong, in words
 */
public record CheckProblem(Kind kind, OptionalLong block, OptionalLong inode, Optional<String> path, String detail) {
    /** The structures a check walks, in the order it walks them. */
    public enum Kind {
        /** A superblock or allocation group header (AGF, AGI, free lists, counters). */
        GROUP_HEADER,
        /** Free-space accounting: a block both free and in use, or in use by two owners, or lost. */
        FREE_SPACE,
        /** Inode allocation: the inode chunks and their free masks. */
        INODE_ALLOCATION,
        /** A B-tree's shape or nodes (group trees, directory trees). */
        BTREE,
        /** A directory's contents: entries, counts, reserve, parent link. */
        DIRECTORY,
        /** An inode's own fields: type, link count, size, blocks. */
        INODE,
        /** An inode that is allocated but neither reachable nor an orphan, or an orphan that still has links. */
        ORPHAN
    }

    public CheckProblem {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(block, "block");
        Objects.requireNonNull(inode, "inode");
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(detail, "detail");
    }

    static CheckProblem atBlock(Kind kind, long block, String detail) {
        return new CheckProblem(kind, OptionalLong.of(block), OptionalLong.empty(), Optional.empty(), detail);
    }

    static CheckProblem atInode(Kind kind, long inode, String path, String detail) {
        return new CheckProblem(kind, OptionalLong.empty(), OptionalLong.of(inode), Optional.ofNullable(path), detail);
    }

    static CheckProblem at(Kind kind, long block, long inode, String path, String detail) {
        return new CheckProblem(kind, OptionalLong.of(block), OptionalLong.of(inode), Optional.ofNullable(path), detail);
    }

    static CheckProblem of(Kind kind, String detail) {
        return new CheckProblem(kind, OptionalLong.empty(), OptionalLong.empty(), Optional.empty(), detail);
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder().append(kind);
        block.ifPresent(b -> sb.append(" block ").append(b));
        inode.ifPresent(i -> sb.append(" inode ").append(i));
        path.ifPresent(p -> sb.append(" '").append(p).append('\''));
        return sb.append(": ").append(detail).toString();
    }
}
