/**
 * perf: the {@code ./ferrite} command line ({@link dev.ferrite.perf.Main}, picocli), the benchmark
 * harness ({@link dev.ferrite.perf.bench}) and the JMH microbenchmarks ({@code dev.ferrite.perf.jmh}).
 *
 * <p>Only this package prints: workloads report through return values and a
 * {@link dev.ferrite.perf.bench.Progress} callback. Exit codes are 0 (success), 1 (the command failed)
 * and 2 (usage error); an error is one line on stderr unless {@code --verbose} asks for the stack trace.
 * perf uses only the public APIs of the engine's modules.
 */
package dev.ferrite.perf;
