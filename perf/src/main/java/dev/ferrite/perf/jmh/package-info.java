/**
 * JMH microbenchmarks, one class per subject, all extending {@link dev.ferrite.perf.jmh.JmhDefaults}
 * (fork, JVM flags, iterations, units). Run them with {@code ./ferrite jmh [JMH args]}, e.g.
 * {@code ./ferrite jmh Crc32c -prof gc}.
 */
package dev.ferrite.perf.jmh;
