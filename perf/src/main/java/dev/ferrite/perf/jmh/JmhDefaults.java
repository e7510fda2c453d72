package dev.ferrite.perf.jmh;

import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The one place that sets how every Ferrite microbenchmark forks and measures: JMH's annotations are
 * inherited, so each benchmark class extends this. The forked JVM needs native access for FFM downcalls,
 * and JMH 1.37 itself calls {@code sun.misc.Unsafe}, which JDK 25 would warn about in every fork. Forks run
 * generational ZGC, the collector Ferrite recommends (docs/benchmarks.md, "Which collector"); to measure
 * under another, give {@code -jvmArgsAppend} with these flags and that collector's.
 */
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-XX:+UseZGC"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public abstract class JmhDefaults {
}
