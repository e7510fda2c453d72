/**
 * {@code ferrite crashtest}: the crash-recovery suite as a tool. {@link dev.ferrite.perf.crash.Crashtest}
 * generates workloads from a seed, records each on native-io's test-kit {@code RecordingDevice}, builds
 * its crash states incrementally from the base image, and judges each against a model of what the
 * workload was acknowledged to have made durable. Every workload and crash state is named by numbers
 * that repeat it alone.
 */
package dev.ferrite.perf.crash;
