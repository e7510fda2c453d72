package dev.ferrite.perf;

import picocli.CommandLine.Option;

/** The fio switch of the workloads that run fio beside Ferrite (a picocli mixin). */
final class FioOption {
    @Option(names = "--no-fio", description = "skip fio's equivalent jobs even if fio is on the PATH")
    boolean noFio;
}
