package dev.ferrite.perf.bench;

import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

import dev.ferrite.io.FerriteException;

/**
 * The run of the workloads whose targets each get a RAM-backed loop device of their own (randwrite,
 * appends, dbench): per target, in order, a reason to skip it (a tool missing) or the device made, the
 * target run on it, the device removed; a skip or a failure becomes a note beside the other targets'
 * results, not instead of them.
 */
final class LoopTargets {
    /** A target of such a workload. */
    interface Target {
        String label();

        /** What goes on its loop device: nothing for Ferrite's (it formats the raw device itself). */
        LoopDevice.Kind deviceKind();
    }

    /** What runs on one target's device. */
    interface Body<T extends Target> {
        void run(T target, LoopDevice loop);
    }

    private LoopTargets() {
    }

    /**
     * Runs {@code body} for each target on a new loop device of {@code bytes} in {@code dir}, unless
     * {@code skip} gives a reason (empty: none) or this process cannot make the device.
     */
    static <T extends Target> void run(List<T> targets, Path dir, long bytes, Function<T, Optional<String>> skip,
                                       List<String> notes, Progress progress, Body<T> body) {
        for (T t : targets) {
            Optional<String> why = skip.apply(t).or(() -> LoopDevice.unavailable(t.deviceKind()));
            if (why.isPresent()) {
                notes.add(t.label() + ": skipped, " + why.get());
                continue;
            }
            try (LoopDevice loop = LoopDevice.create(dir, bytes, t.deviceKind())) {
                body.run(t, loop);
            } catch (FerriteException | UncheckedIOException e) {
                progress.done();
                notes.add(t.label() + ": stopped: " + e.getMessage());
            }
        }
    }
}
