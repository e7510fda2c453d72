package dev.ferrite.perf;

import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** Options every time-bounded benchmark command takes (a picocli mixin). */
final class BenchOptions {
    @Option(names = "--seconds", paramLabel = "S", defaultValue = "5",
            description = "length of each phase in seconds, decimals allowed (default: ${DEFAULT-VALUE})")
    double seconds;

    @Mixin
    JsonOption json;

    void validate(CommandSpec spec) {
        if (!(seconds > 0 && seconds <= 86_400)) {
            throw new ParameterException(spec.commandLine(), "--seconds must be above 0 and at most 86400, not " + seconds);
        }
        json.validate(spec);
    }
}
