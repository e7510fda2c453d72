package dev.ferrite.perf.crash;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.RecordingDevice.Event;

/**
 * The crash states of a recording, as a list whose order depends only on the recording's shape and the
 * workload's id (so a state's index names it in a replay): the base image and every flush-epoch prefix
 * (the crash right after each flush, and the whole recording); then per epoch with writes, up to
 * {@code perEpoch} more: a cut inside the epoch with every earlier event landed, the same with the cut
 * write torn at 512-byte sectors, and random subsets of the epoch's writes landed in random order, the
 * last torn one time in three. Duplicates are left out.
 */
final class CrashStates {
    private CrashStates() {
    }

    static List<CrashState> of(Recording r, int perEpoch) {
        return of(r.events, r.flushes, r.workload.id(), perEpoch);
    }

    /** The crash states of {@code events}, whose flushes are at {@code flushes}; {@code id} seeds the random ones. */
    static List<CrashState> of(List<Event> events, int[] flushes, long id, int perEpoch) {
        Set<CrashState> states = new LinkedHashSet<>();
        states.add(new CrashState(0));
        for (int f : flushes) {
            states.add(new CrashState(f + 1));
        }
        states.add(new CrashState(events.size()));
        for (int epoch = 0; epoch <= flushes.length; epoch++) {
            int start = epoch == 0 ? 0 : flushes[epoch - 1] + 1;
            int end = epoch == flushes.length ? events.size() : flushes[epoch];
            List<Event> writes = new ArrayList<>();
            for (int i = start; i < end; i++) {
                if (events.get(i).kind() == Event.Kind.WRITE) {
                    writes.add(events.get(i));
                }
            }
            if (writes.isEmpty()) {
                continue;
            }
            Random rnd = new Random(id * 1_000_003L + epoch);
            for (int i = 0; i < perEpoch; i++) {
                Event cut = writes.get(rnd.nextInt(writes.size()));
                states.add(switch (i) {
                    case 0 -> new CrashState(cut.index());
                    case 1 -> cut.sectorCount() > 1 ? new CrashState(cut.index()).plusTorn(cut.index(), tornMask(rnd, cut.sectorCount()))
                            : new CrashState(cut.index()).plus(cut.index());
                    default -> subset(rnd, start, writes);
                });
            }
        }
        return List.copyOf(states);
    }

    private static CrashState subset(Random rnd, int prefix, List<Event> writes) {
        List<Event> landed = new ArrayList<>();
        for (Event e : writes) {
            if (rnd.nextBoolean()) {
                landed.add(e);
            }
        }
        Collections.shuffle(landed, rnd);
        CrashState s = new CrashState(prefix);
        for (int i = 0; i < landed.size(); i++) {
            Event e = landed.get(i);
            s = i == landed.size() - 1 && e.sectorCount() > 1 && rnd.nextInt(3) == 0
                    ? s.plusTorn(e.index(), tornMask(rnd, e.sectorCount())) : s.plus(e.index());
        }
        return s;
    }

    /** Some sectors of a write, neither none nor all. */
    private static BitSet tornMask(Random rnd, int sectors) {
        BitSet mask = new BitSet();
        while (mask.isEmpty() || mask.cardinality() == sectors) {
            mask.clear();
            for (int s = 0; s < sectors; s++) {
                if (rnd.nextBoolean()) {
                    mask.set(s);
                }
            }
        }
        return mask;
    }

    /**
     * One worker's images, reused from workload to workload: one follows the recording event by event,
     * and each state's image is a copy of it at the state's prefix with the extras applied; a third
     * holds the state as its recovery left it ({@link Oracle}). Ask for a recording's states in order of
     * prefix.
     */
    static final class Images implements AutoCloseable {
        final ImageDevice prefix = new ImageDevice("prefix", Recording.BLOCKS, Recording.BLOCK_SIZE);
        final ImageDevice state = new ImageDevice("state", Recording.BLOCKS, Recording.BLOCK_SIZE);
        final ImageDevice again = new ImageDevice("recovered", Recording.BLOCKS, Recording.BLOCK_SIZE);
        private List<Event> events = List.of();
        private int at;

        /** Starts on {@code r}'s states: the prefix image goes back to the base image. */
        void start(Recording r) {
            start(Recording.base(r.workload.lanes().size()), r.events);
        }

        /** Starts on the states of {@code events}, recorded over {@code base}. */
        void start(BlockDevice base, List<Event> events) {
            prefix.load(base);
            this.events = events;
            at = 0;
        }

        /** {@link #state} made to hold crash state {@code s}. */
        ImageDevice image(CrashState s) {
            if (s.prefix() < at) {
                throw new IllegalArgumentException("state " + s + " comes before the image's prefix " + at);
            }
            for (; at < s.prefix(); at++) {
                prefix.apply(events.get(at), null);
            }
            state.load(prefix);
            for (CrashState.Extra x : s.extras()) {
                state.apply(events.get(x.event()), x.sectors());
            }
            return state;
        }

        @Override
        public void close() {
            prefix.free();
            state.free();
            again.free();
        }
    }
}
