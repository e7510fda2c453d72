package dev.ferrite.perf;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import dev.ferrite.perf.bench.BaselineTools;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;

@Command(name = "bench",
        description = {"Runs benchmark workloads and prints their results side by side.",
                "Each workload runs on Ferrite and, in the same run, on its baselines (fio, the",
                "kernel's file systems on loop devices it makes, RocksDB, LMDB, Xodus, MVStore,",
                "the in-memory ceiling); the tables show rates, their ratio and latency",
                "percentiles.",
                "",
                "Without a workload: the default suite, every workload below (each in a JVM of",
                "its own, as if run alone) at sizes that take a few minutes on 2 cores (--full:",
                "the workloads' own defaults, much longer), then a summary table of Ferrite",
                "beside its best baseline and the ceiling, with the targets of the design and",
                "whether each is met; every result is written to results.json in --out, with",
                "report.html (charts; 'bench report' remakes it).",
                ""},
        subcommands = {DeviceCommand.class, JournalCommand.class, KvCommand.class, MetaCommand.class,
                DirScaleCommand.class, RandWriteCommand.class, AppendsCommand.class, DbenchCommand.class,
                ReportCommand.class})
final class BenchCommand implements Callable<Integer> {
    @Option(names = "--full", description = "the workloads at their own default sizes (1M files, a 10M-entry directory, 8 dbench clients, ...)")
    boolean full;

    @Option(names = "--device", paramLabel = "PATH",
            description = "run the suite on this file or block device: device and journal on all of it, every other"
                    + " target on a loop device over a region of it (root and losetup needed); its contents are"
                    + " destroyed, so --yes-destroy-data must be given too")
    Path device;

    @Option(names = "--yes-destroy-data", description = "confirm that --device's contents may be destroyed")
    boolean destroy;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "bench-results",
            description = "where results.json and each workload's results go (default: ${DEFAULT-VALUE})")
    Path out;

    @Mixin
    FioOption fioOption;

    @Option(names = "--jfr", paramLabel = "FILE", scope = ScopeType.INHERIT,
            description = "also record the run with JDK Flight Recorder (its profile settings) into FILE, for JDK Mission Control;"
                    + " the default suite records each workload's JVM beside its results in --out (NN-workload.jfr)")
    Path jfr;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        if (device != null && !destroy) {
            throw new ParameterException(spec.commandLine(), "--device " + device + " is overwritten by the suite;"
                    + " add --yes-destroy-data to go on");
        }
        PrintWriter print = spec.commandLine().getOut();
        for (String line : BaselineTools.note(BaselineTools.missing(fioOption.noFio), BaselineTools.root())) {
            print.println(line);
        }
        return BenchSuite.run(spec.commandLine(), BenchSuite.steps(full, fioOption.noFio, device), out, jfr, print);
    }
}
