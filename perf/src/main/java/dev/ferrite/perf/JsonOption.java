package dev.ferrite.perf;

import java.nio.file.Files;
import java.nio.file.Path;

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
}
