package dev.ferrite.perf;

import java.util.List;
import java.util.stream.Collectors;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** {@code --threads N,N,...}, the thread counts a workload runs each phase with (a picocli mixin). */
final class ThreadsOption {
    @Option(names = "--threads", paramLabel = "N", split = ",", defaultValue = "1,2",
            description = "thread counts to run each phase with (default: ${DEFAULT-VALUE})")
    List<Integer> counts;

    /** Each count is 1..{@code max} and no more than the items the threads split ({@code items}, given by {@code itemsOption}). */
    void validate(CommandSpec spec, int max, long items, String itemsOption) {
        for (int t : counts) {
            if (t < 1 || t > max || t > items) {
                throw new ParameterException(spec.commandLine(), "--threads " + counts + ": each count must be 1.."
                        + max + " and at most " + itemsOption);
            }
        }
    }

    @Override
    public String toString() {
        return counts.stream().map(String::valueOf).collect(Collectors.joining(","));
    }
}
