package dev.ferrite.perf.bench;

/**
 * Where a running workload reports how far a phase has got, about once a second. The CLI draws it on
 * stderr; tests pass {@link #NONE}. Called from the thread running the phase.
 */
public interface Progress {
    Progress NONE = new Progress() {
        @Override
        public void update(String phase, String target, long ops, long elapsedNanos) {
        }

        @Override
        public void done() {
        }
    };

    /**
     * @param ops operations completed so far, or -1 when the phase runs in another tool that does not say
     */
    void update(String phase, String target, long ops, long elapsedNanos);

    /** {@link #update(String, String, long, long)} of a count of something else than operations ({@code unit}: "states"). */
    default void update(String phase, String target, long count, String unit, long elapsedNanos) {
        update(phase, target, count, elapsedNanos);
    }

    /** The phase ended: whatever {@link #update} showed can go. */
    void done();
}
