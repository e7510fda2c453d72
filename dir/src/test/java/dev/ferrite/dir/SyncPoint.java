package dev.ferrite.dir;

import dev.ferrite.io.testkit.RecordingDevice;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * Where a sync became durable in a recording, exactly. Counting flushes when the sync returns is not it:
 * the AIL's write-back flushes in the background, so the count may have run past the sync's own flush.
 * The sync's own flush is the first one after the last write into the log's record area issued before
 * it returned: the checkpoint it forced is the last one written then (the thread that syncs is the only
 * one that commits, and it waits), and only a flush after those writes makes them durable.
 */
final class SyncPoint {
    private SyncPoint() {
    }

    /**
     * Runs {@code sync} (a sync, an fsync or a force on the volume {@code rec} records, which no other
     * thread changes meanwhile) and returns the index of the flush that made it durable, or -1 if nothing
     * was ever logged. Fails if the sync returned before its log writes were flushed.
     */
    static int of(RecordingDevice rec, Volume v, Runnable sync) {
        sync.run();
        int end = rec.eventCount();
        Geometry g = v.geometry();
        long first = g.logStart() + 1, past = g.logStart() + g.logBlocks(); // block logStart is the anchor, not a record
        int lastLog = -1;
        for (int i = end - 1; i >= 0 && lastLog < 0; i--) {
            RecordingDevice.Event e = rec.event(i);
            if (e.kind() == RecordingDevice.Event.Kind.WRITE && e.block() < past && e.block() + e.blockCount() > first) {
                lastLog = i;
            }
        }
        if (lastLog < 0) {
            return -1;
        }
        for (int k = 0; k < rec.flushCount(); k++) {
            int at = rec.flushEvent(k);
            if (at > lastLog) {
                if (at >= end) {
                    break;
                }
                return k;
            }
        }
        return fail("the sync returned before a flush followed its last log write, event " + lastLog + " of " + end);
    }
}
