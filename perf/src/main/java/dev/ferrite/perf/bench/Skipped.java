package dev.ferrite.perf.bench;

/**
 * A phase a target did not run, and why (the load was cut short): a row of the table beside the
 * {@link Result}s, with the reason where the rate would be.
 */
public record Skipped(String workload, String phase, String target, int threads, String reason) {
    /** Whether this is the row {@code r} would have been on another target. */
    boolean sameRow(Result r, String target) {
        return this.target.equals(target) && workload.equals(r.workload()) && phase.equals(r.phase()) && threads == r.threads();
    }
}
