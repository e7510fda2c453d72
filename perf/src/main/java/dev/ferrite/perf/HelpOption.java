package dev.ferrite.perf;

import picocli.CommandLine.Option;

/** {@code -h/--help} for subcommands (a picocli mixin); {@code jmh} leaves it out so that JMH gets its own -h. */
final class HelpOption {
    @Option(names = {"-h", "--help"}, usageHelp = true, description = "show this help and exit")
    boolean help;
}
