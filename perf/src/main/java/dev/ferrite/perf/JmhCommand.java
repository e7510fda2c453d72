package dev.ferrite.perf;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/** Hands every argument to JMH untouched: JMH's own -h, -l, -prof ... are not ours to parse. */
@Command(name = "jmh",
        description = {"Runs the JMH microbenchmarks (org.openjdk.jmh.Main with ARGS).",
                "Examples: 'ferrite jmh -l' lists them, 'ferrite jmh Crc32c -prof gc' runs one with allocation"
                        + " figures, 'ferrite jmh -h' shows JMH's options."})
final class JmhCommand implements Callable<Integer> {
    @Parameters(paramLabel = "ARGS", description = "arguments for JMH")
    List<String> args = new ArrayList<>();

    @Override
    public Integer call() throws Exception {
        // JMH exits the JVM itself (status 1) on bad options or failed benchmarks.
        org.openjdk.jmh.Main.main(args.toArray(String[]::new));
        return 0;
    }
}
