package dev.ferrite.perf;

import java.nio.file.Files;
import java.nio.file.Path;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** Options every benchmark command takes (a picocli mixin). */
final class BenchOptions {
    @Option(names = "--seconds", paramLabel = "S", defaultValue = "5",
            description = "length of each phase in seconds, decimals allowed (default: ${DEFAULT-VALUE})")
    double seconds;

    @Option(names = "--json", paramLabel = "FILE", description = "also write the machine and the results as JSON to FILE")
    Path json;

    void validate(CommandSpec spec) {
        if (!(seconds > 0 && seconds <= 86_400)) {
            throw new ParameterException(spec.commandLine(), "--seconds must be above 0 and at most 86400, not " + seconds);
        }
        // Checked now rather than after minutes of measuring.
        Path dir = json == null ? null : json.toAbsolutePath().getParent();
        if (dir != null && !Files.isDirectory(dir)) {
            throw new ParameterException(spec.commandLine(), "--json " + json + ": directory " + dir + " does not exist");
        }
        if (json != null && Files.isDirectory(json)) {
            throw new ParameterException(spec.commandLine(), "--json " + json + " is a directory; name a file");
        }
    }
}
