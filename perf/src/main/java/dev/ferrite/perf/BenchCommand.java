package dev.ferrite.perf;

import java.io.IOException;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

@Command(name = "bench",
        description = {"Runs benchmark workloads and prints their results side by side.",
                "Each workload runs on Ferrite and, in the same run, on a reference where one",
                "exists; the table shows rates, their ratio and latency percentiles.",
                "Without a subcommand: the default suite, for now 'device' on a 1 GiB",
                "temporary file.",
                ""},
        subcommands = {DeviceCommand.class, JournalCommand.class, KvCommand.class, MetaCommand.class,
                DirScaleCommand.class, RandWriteCommand.class, AppendsCommand.class, DbenchCommand.class})
final class BenchCommand implements Callable<Integer> {
    @Mixin
    BenchOptions options;

    @Mixin
    FioOption fioOption;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        // Parsing no arguments gives the device command its defaults, declared once on its options.
        CommandLine device = spec.subcommands().get("device");
        device.parseArgs();
        return device.<DeviceCommand>getCommand().run(spec, options, fioOption.noFio);
    }
}
