package dev.ferrite.perf;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/**
 * {@code --rounds N}: the whole run N times, each round on fresh stores or devices, then a table over all
 * of them (a picocli mixin). One run's figures are as much the host's as the targets'.
 */
final class RoundsOption {
    @Option(names = "--rounds", paramLabel = "N", defaultValue = "1",
            description = "run everything N times, in the same order each round, each round on fresh stores or devices;"
                    + " after the rounds' tables, one over all of them (dbench: each target's median throughput, median"
                    + " and worst max latency, and the rounds its max latency was the lowest; kv: each phase's median"
                    + " same-round ratio of the first target to each other, its lowest and highest, and the rounds it"
                    + " was ahead): one run's figures move with the host (1 to 100; default: ${DEFAULT-VALUE})")
    int count;

    /** The count, refused unless 1 to 100. */
    int count(CommandSpec spec) {
        if (count < 1 || count > 100) {
            throw new ParameterException(spec.commandLine(), "--rounds " + count + ": give 1 to 100");
        }
        return count;
    }
}
