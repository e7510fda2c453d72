package dev.ferrite.dir;

import java.util.List;

/**
 * What a full check of a volume found: every problem, and how much it walked. A volume is sound when
 * {@link #problems()} is empty. Produced by {@link Namespace#check()} (and {@code ferrite check}); the check
 * reads only, so run it while nothing changes the volume.
 *
 * @param problems    each problem with what kind of structure it is in and where, in the order found
 * @param directories directories walked from the root
 * @param inodes      allocated inodes seen
 * @param trees       B-trees walked (group trees, directory, file and table trees)
 * @param tables      tables the catalog names ({@link Tables}), each with its inode and tree checked
 */
public record CheckReport(List<CheckProblem> problems, long directories, long inodes, long trees, long tables) {
    public CheckReport {
        problems = List.copyOf(problems);
    }

    public boolean clean() {
        return problems.isEmpty();
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder().append("checked ").append(directories).append(" directories, ")
                .append(inodes).append(" inodes, ").append(trees).append(" trees, ").append(tables).append(" tables: ");
        if (problems.isEmpty()) {
            return sb.append("no problems").toString();
        }
        sb.append(problems.size()).append(problems.size() == 1 ? " problem" : " problems");
        for (CheckProblem p : problems) {
            sb.append("\n  ").append(p);
        }
        return sb.toString();
    }
}
