package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.RecordingDevice.Event;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Transaction#orderAfterData}: the checkpoint holding such a transaction is written only after a
 * flush, so a data write that completed before the commit is stable before the change pointing at it;
 * other checkpoints pay for no such flush, and all such transactions in one checkpoint share one.
 */
class OrderAfterDataTest {
    static final int BS = 4096;
    static final long DATA = 1500, HOME = 100;
    static final LogGeometry G = new LogGeometry(1000, 64);

    private static List<Event> record(boolean afterData, int commits) {
        return record(afterData, commits, false);
    }

    /**
     * The recorded events from a data write at {@link #DATA} to the force of {@code commits} transactions after
     * it; if {@code deferred}, the write is left to the log ({@link Journal#deferData}), registered before the commits.
     */
    private static List<Event> record(boolean afterData, int commits, boolean deferred) {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            RecordingDevice rec = RecordingDevice.wrap(base);
            try (rec; TestReplayer rep = new TestReplayer(rec); Journal j = Journal.open(rec, G, JournalOptions.defaults(), rep)) {
                int from = rec.eventCount();
                MemorySegment data = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                data.fill((byte) 0x42);
                if (deferred) {
                    AtomicBoolean pending = new AtomicBoolean(true);
                    j.deferData(() -> {
                        if (pending.getAndSet(false)) {
                            rec.write(DATA, data);
                            return true;
                        }
                        return false;
                    });
                } else {
                    rec.write(DATA, data);
                }
                TestItem it = new TestItem(HOME, BS, arena);
                long seq = 0;
                it.lock.lock();
                try {
                    for (int c = 0; c < commits; c++) {
                        Transaction tx = j.begin(Reservation.items(1));
                        it.add(tx, c, c + 1);
                        if (afterData) {
                            tx.orderAfterData();
                        }
                        seq = tx.commit();
                    }
                } finally {
                    it.lock.unlock();
                }
                j.force(seq);
                return rec.events().subList(from, rec.eventCount());
            }
        }
    }

    private static int firstLogWrite(List<Event> events) {
        for (int i = 0; i < events.size(); i++) {
            Event e = events.get(i);
            if (e.kind() == Event.Kind.WRITE && e.block() < G.areaStart() + G.areaBlocks() && e.block() >= G.areaStart()) {
                return i;
            }
        }
        throw new AssertionError("no checkpoint written: " + events);
    }

    private static long flushesBetween(List<Event> events, int from, int to) {
        return events.subList(from, to).stream().filter(e -> e.kind() == Event.Kind.FLUSH).count();
    }

    @Test
    void aCheckpointOrderedAfterDataIsWrittenAfterAFlush() {
        List<Event> events = record(true, 1);
        assertEquals(DATA, events.getFirst().block(), events.toString());
        int log = firstLogWrite(events);
        assertEquals(1, flushesBetween(events, 1, log), "one flush between the data write and the checkpoint: " + events);
        assertTrue(events.getLast().kind() == Event.Kind.FLUSH, "and the checkpoint flushed after: " + events);
    }

    @Test
    void otherCheckpointsPayForNoPreflush() {
        List<Event> events = record(false, 1);
        assertEquals(0, flushesBetween(events, 1, firstLogWrite(events)), events.toString());
    }

    @Test
    void transactionsInOneCheckpointShareItsPreflush() {
        List<Event> events = record(true, 5);
        int log = firstLogWrite(events);
        assertEquals(1, flushesBetween(events, 1, log), events.toString());
        assertEquals(2, flushesBetween(events, 1, events.size()), "a preflush and the checkpoint's own flush: " + events);
    }

    /**
     * A transaction ordered after data committed while the previous checkpoint was being written, before
     * that checkpoint's own flush began: that flush makes the data stable, so its checkpoint needs no
     * preflush of its own. One committed after that flush began does.
     */
    @Test
    void aFlushBegunAfterTheCommitServesAsItsPreflush() throws Exception {
        assertEquals(1, flushesBetweenCheckpoints(true), "the first checkpoint's flush serves the second");
        assertEquals(2, flushesBetweenCheckpoints(false), "the first checkpoint's flush and a preflush");
    }

    /**
     * Flushes between two checkpoints, the second ordered after a data write: the data is written and the
     * second transaction committed while the first checkpoint's preflush is held ({@code early}), or
     * after the first checkpoint is durable.
     */
    private static long flushesBetweenCheckpoints(boolean early) throws Exception {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            RecordingDevice rec = RecordingDevice.wrap(base);
            try (rec; TestReplayer rep = new TestReplayer(rec); Journal j = Journal.open(rec, G, JournalOptions.defaults(), rep)) {
                MemorySegment data = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                TestItem a = new TestItem(HOME, BS, arena), b = new TestItem(HOME + 1, BS, arena);
                int from = rec.eventCount();
                long first = commitAfter(j, a, rec, data);
                rec.stall(RecordingDevice.Op.FLUSH);
                Thread forcer = new Thread(() -> j.force(first));
                forcer.start();
                while (forcer.getState() != Thread.State.WAITING && forcer.getState() != Thread.State.TIMED_WAITING) {
                    Thread.onSpinWait(); // until its preflush is held (or it waits for the push thread, which holds it)
                }
                long second = early ? commitAfter(j, b, rec, data) : -1;
                rec.resume(RecordingDevice.Op.FLUSH);
                forcer.join();
                if (!early) {
                    second = commitAfter(j, b, rec, data);
                }
                j.force(second);
                List<Event> events = rec.events().subList(from, rec.eventCount());
                int firstLog = firstLogWrite(events);
                int secondLog = firstLog + 1 + firstLogWrite(events.subList(firstLog + 1, events.size()));
                return flushesBetween(events, firstLog, secondLog);
            }
        }
    }

    /**
     * Data left to the log ({@link Journal#deferData}) is written before the checkpoint, and before its
     * preflush when it holds a transaction ordered after data; a checkpoint without one writes it too (a
     * free committed after the data was registered must not be durable before it lands), with no preflush.
     */
    @Test
    void dataLeftToTheLogIsWrittenBeforeTheCheckpointAndItsPreflush() {
        for (boolean afterData : new boolean[] {true, false}) {
            List<Event> events = record(afterData, 1, true);
            assertEquals(DATA, events.getFirst().block(), events.toString());
            assertEquals(afterData ? 1 : 0, flushesBetween(events, 1, firstLogWrite(events)), "after data " + afterData + ": " + events);
        }
    }

    /** Writes data at {@link #DATA}, then commits a change to {@code it} ordered after it. */
    private static long commitAfter(Journal j, TestItem it, RecordingDevice rec, MemorySegment data) {
        rec.write(DATA, data);
        it.lock.lock();
        try {
            Transaction tx = j.begin(Reservation.items(1));
            it.add(tx, 0, 1);
            tx.orderAfterData();
            return tx.commit();
        } finally {
            it.lock.unlock();
        }
    }
}
