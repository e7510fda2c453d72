/**
 * {@code ferrite fuzz}: the hostile-image fuzzer (docs/crash-safety.md, "Fuzzing hostile images"). A
 * populated volume is built deterministically ({@link dev.ferrite.perf.fuzz.BaseImage}), mutated by a
 * {@link dev.ferrite.perf.fuzz.Recipe} (bit flips with and without a recomputed checksum, hostile field
 * values, zeroed, swapped and grafted blocks, truncation), then mounted, walked, read, written and
 * checked ({@link dev.ferrite.perf.fuzz.Exercise}) in child JVMs ({@link dev.ferrite.perf.fuzz.FuzzWorker})
 * that {@link dev.ferrite.perf.fuzz.FuzzRunner} restarts after a crash or a hang. Only Ferrite's own
 * exceptions and checker reports are acceptable answers; anything else is a failure, kept as a one-line
 * recipe in the corpus the default test suite replays.
 */
package dev.ferrite.perf.fuzz;
