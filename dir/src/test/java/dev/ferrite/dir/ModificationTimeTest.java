package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A data write moves the file's modification and change times even when it logs nothing (an overwrite
 * in place, a buffered write): stat shows the new times at once, and fsync, the last close, a volume
 * sync and the unmount log them; a time set explicitly afterwards wins; fdatasync leaves them alone.
 */
class ModificationTimeTest extends FileTestBase {
    /** Long before any write of the test. */
    private static final long OLD = 1_000_000_000L;

    /** A file of two written blocks whose times are set to {@link #OLD}. */
    private Handle aged(String name) {
        Handle f = ns.create(root, name, 0644, true);
        ns.write(f, 0, stamped(0, 2, 1));
        ns.setattr(f, -1, -1, -1, OLD, OLD);
        assertEquals(OLD, ns.stat(f).mtimeNanos());
        return f;
    }

    private static void assertRecent(long nanos, long since, String what) {
        assertTrue(nanos >= since - 1_000_000 && nanos > OLD, what + ": " + nanos + ", the write came at " + since);
    }

    @Test
    void anOverwriteInPlaceMovesTheTimesAtOnceAndTheLastCloseLogsThem() {
        long before = System.currentTimeMillis() * 1_000_000L;
        long forces;
        try (Handle f = aged("f")) {
            ns.fsync(f);
            forces = v.journalStats().forces();
            ns.write(f, 0, stamped(0, 1, 2)); // in place: no transaction
            InodeStat s = ns.stat("/f");
            assertRecent(s.mtimeNanos(), before, "mtime");
            assertRecent(s.ctimeNanos(), before, "ctime");
            ns.fdatasync(f);
            assertEquals(forces, v.journalStats().forces(), "fdatasync forces nothing for the times");
        }
        long shown = ns.stat("/f").mtimeNanos();
        long ino = ns.lookup("/f");
        assertEquals(shown, (long) ns.records.readRecord(ino, InodeFormat::mtime), "the last close logged the time stat showed");
        v.close();
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
        assertEquals(shown, ns.stat("/f").mtimeNanos());
    }

    @Test
    void aBufferedWriteMovesTheTimesAndATimeSetAfterItWins() {
        long before = System.currentTimeMillis() * 1_000_000L;
        try (Handle f = aged("f")) {
            ns.write(f, 3, MemorySegment.ofArray(new byte[] {1, 2, 3})); // buffered
            assertRecent(ns.stat(f).mtimeNanos(), before, "mtime after a buffered write");
            ns.setattr(f, -1, -1, -1, -1, 2 * OLD); // touch -m -d
            assertEquals(2 * OLD, ns.stat(f).mtimeNanos(), "the time set wins over the write's");
            ns.setattr(f, 0600, -1, -1, -1, -1); // chmod: the times stay
            assertEquals(2 * OLD, ns.stat(f).mtimeNanos());
        }
        assertEquals(2 * OLD, ns.stat("/f").mtimeNanos(), "neither the write-back nor the close moves it again");
    }

    @Test
    void theWriteBackOfAnExtendingBufferedWriteKeepsATimeSetAfterIt() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(new byte[10_000])); // buffered, into blocks not yet allocated
            ns.setattr(f, -1, -1, -1, OLD, OLD); // as tar and rsync do before closing
        }
        ns.sync(); // the write-back: allocates, writes, converts, commits the size
        assertEquals(OLD, ns.stat("/f").mtimeNanos(), "the write-back's transactions moved the time set after the write");
        assertEquals(10_000, ns.stat("/f").size());
        long before = System.currentTimeMillis() * 1_000_000L;
        try (Handle f = ns.open(root, "f")) {
            ns.write(f, 20_000, MemorySegment.ofArray(new byte[10])); // a write after the time set moves it again
        }
        ns.sync();
        assertRecent(ns.stat("/f").mtimeNanos(), before, "mtime after a later write's write-back");
        long shown = ns.stat("/f").mtimeNanos();
        v.close();
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
        assertEquals(shown, ns.stat("/f").mtimeNanos());
    }

    /**
     * A volume sync beside the writer logs the time an overwrite in place left waiting; a time set after
     * that write must stand, however the two meet (the sync used to read the waiting time before it locked
     * the record and could log it over the time set meanwhile: the crash suite's "modification time ... is
     * none of" the setattr's).
     */
    @Test
    void aSyncBesideTheWriterNeverLogsAWritesTimeOverATimeSetAfterIt() throws Exception {
        try (Handle f = aged("f")) {
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread syncer = Thread.ofPlatform().start(() -> {
                try {
                    while (!stop.get()) {
                        ns.sync();
                    }
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            try {
                for (int k = 1; k <= 1_500; k++) {
                    ns.write(f, 0, stamped(0, 1, k)); // in place: its time waits in the inode
                    ns.setattr(f, -1, -1, -1, -1, OLD + k);
                    assertEquals(OLD + k, ns.stat(f).mtimeNanos(), "round " + k + ": the time set after the write");
                }
            } finally {
                stop.set(true);
                syncer.join();
            }
            assertEquals(null, failed.get());
            ns.sync();
            assertEquals(OLD + 1_500, ns.stat(f).mtimeNanos());
        }
    }

    @Test
    void fsyncLogsTheTimeSoThatItSurvivesACrash() {
        long before = System.currentTimeMillis() * 1_000_000L;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            long shown;
            try (Volume vol = Volume.open(rec, OPTIONS)) {
                Namespace n = vol.namespace();
                try (Handle r = n.openRoot(); Handle f = n.create(r, "f", 0644, true)) {
                    n.write(f, 0, stamped(0, 1, 1));
                    n.setattr(f, -1, -1, -1, OLD, OLD);
                    n.fsync(f);
                    n.write(f, 0, stamped(0, 1, 2)); // in place
                    n.fsync(f);
                    shown = n.stat(f).mtimeNanos();
                    assertRecent(shown, before, "mtime");
                    try (MemoryDevice crashed = rec.imageAt(rec.eventCount()); Volume after = Volume.open(crashed, OPTIONS)) {
                        assertEquals(shown, after.namespace().stat("/f").mtimeNanos(), "the time fsync logged");
                    }
                }
            }
        }
    }

    @Test
    void theUnmountLogsTheTimesOfFilesStillOpen() {
        long before = System.currentTimeMillis() * 1_000_000L;
        Handle f = aged("f");
        ns.write(f, BS, stamped(BS, 1, 3)); // in place
        long shown = ns.stat(f).mtimeNanos();
        assertRecent(shown, before, "mtime");
        v.close(); // f stays open
        v = Volume.open(dev, OPTIONS);
        ns = v.namespace();
        root = ns.openRoot();
        assertEquals(shown, ns.stat("/f").mtimeNanos());
    }
}
