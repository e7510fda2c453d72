/**
 * Microbenchmarks of the journal's package-private mechanisms (grant heads, the CIL, the AIL), compiled
 * into the journal's package from the perf module so that JMH can reach them without widening the
 * journal's public API. Whole-journal workloads use only the public API, in {@code dev.ferrite.perf}.
 */
package dev.ferrite.journal;
