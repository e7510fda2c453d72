package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultJson;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** {@code --json FILE}, where every benchmark command writes its machine-readable results (a picocli mixin). */
final class JsonOption {
    @Option(names = "--json", paramLabel = "FILE", description = "also write the machine and the results as JSON to FILE")
    Path file;

    /** Checked before measuring rather than after minutes of it. */
    void validate(CommandSpec spec) {
        Path dir = file == null ? null : file.toAbsolutePath().getParent();
        if (dir != null && !Files.isDirectory(dir)) {
            throw new ParameterException(spec.commandLine(), "--json " + file + ": directory " + dir + " does not exist");
        }
        if (file != null && Files.isDirectory(file)) {
            throw new ParameterException(spec.commandLine(), "--json " + file + " is a directory; name a file");
        }
    }

    /** Writes the results to the file, if one was given, and says where on {@code out}. */
    void write(PrintWriter out, Machine machine, List<Result> results) throws IOException {
        out.flush(); // the table is on screen even if the file cannot be written
        if (file != null) {
            ResultJson.write(file, machine, results);
            out.println();
            out.println("results: " + file);
        }
    }
}
