package dev.ferrite.perf;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultTable;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/** The directory a multi-target workload runs in, and how its results print: what kv, meta and dirscale share. */
final class RunDir {
    private static final Path SHM = Path.of("/dev/shm");

    private RunDir() {
    }

    /** /dev/shm (RAM-backed) if it is there and writable, else java.io.tmpdir. */
    static Path defaultDir() {
        return Files.isDirectory(SHM) && Files.isWritable(SHM) ? SHM : Path.of(System.getProperty("java.io.tmpdir"));
    }

    static Path check(CommandSpec spec, Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new ParameterException(spec.commandLine(), "--dir " + dir + " is not a directory");
        }
        return dir;
    }

    /** One table per other target, each beside the first target's rows: the ratio is first over other. */
    static void printTables(PrintWriter out, List<Result> results, List<String> targets) {
        String first = targets.getFirst();
        if (targets.size() == 1) {
            out.println();
            out.print(ResultTable.render(results, ""));
            return;
        }
        for (String other : targets.subList(1, targets.size())) {
            out.println();
            out.println(first + " vs " + other);
            out.print(ResultTable.render(results.stream()
                    .filter(r -> r.target().equals(first) || r.target().equals(other)).toList(), other));
        }
    }
}
