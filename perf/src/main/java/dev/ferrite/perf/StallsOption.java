package dev.ferrite.perf;

import java.util.concurrent.TimeUnit;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** {@code --stalls[=MS]}: split the slow operations of every measured phase by what they waited on (a picocli mixin). */
final class StallsOption {
    @Option(names = "--stalls", paramLabel = "MS", arity = "0..1", fallbackValue = "5",
            description = "after the tables, split each measured phase's operations of MS milliseconds or more"
                    + " (5 if not given) into time every thread was stopped (GC pauses apart), time their thread"
                    + " waited (parked, sleeping, on a monitor; by the engine frame it waited in), CPU time, time"
                    + " runnable but queued for a CPU, and the rest (in the kernel), from a JDK Flight Recorder"
                    + " stream and each worker's schedstat. Costs a system call per operation: rates drop a little")
    Double millis;

    /** The threshold in nanoseconds, 0 if not asked for. */
    long nanos(CommandSpec spec) {
        if (millis == null) {
            return 0;
        }
        if (!(millis > 0) || millis > 60_000) {
            throw new ParameterException(spec.commandLine(), "--stalls " + millis + ": give 0 < MS <= 60000");
        }
        return (long) (millis * TimeUnit.MILLISECONDS.toNanos(1));
    }
}
