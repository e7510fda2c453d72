/**
 * The benchmark harness: one class per workload ({@link dev.ferrite.perf.bench.DeviceBench}, ...), each
 * running its phases on Ferrite and, in the same run and for the same time, on a reference (fio, a
 * kernel filesystem, RocksDB, LMDB, Xodus, MVStore), and returning {@link dev.ferrite.perf.bench.Result}s.
 *
 * <p>Shared by every workload: the result record with HdrHistogram latencies, the JSON result format
 * and its one writer ({@link dev.ferrite.perf.bench.ResultJson}), the machine description written beside
 * the results ({@link dev.ferrite.perf.bench.Machine}, {@link dev.ferrite.perf.bench.Storage}), the
 * side-by-side table ({@link dev.ferrite.perf.bench.ResultTable}), the phase clock, temporary files that
 * are deleted even on Ctrl-C, and a small JSON reader for tools' reports.
 */
package dev.ferrite.perf.bench;
