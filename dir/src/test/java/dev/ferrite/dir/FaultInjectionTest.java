package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.FerriteException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.journal.VolumeShutdownException;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Device errors injected under a mounted volume (docs/crash-safety.md, "Fault injection"): a failed log
 * write, log flush or metadata write-back shuts the volume down, so that every later call fails with
 * "volume shut down after I/O error at ..." instead of going on from changes that may never reach the
 * device; a failed data write or data flush, a read error and running out of space are reported to the
 * call that met them and the volume goes on. In every case the volume reopened on the healthy device
 * checks clean and holds everything acknowledged before the fault.
 */
class FaultInjectionTest {
    private static final int BS = 4096;

    private final MemoryDevice dev = VolumeFixtures.formatted();
    private final FaultDevice faulty = new FaultDevice(dev);

    @Test
    void failedLogWriteShutsTheVolumeDown() {
        // the circular log, past its anchor
        logFaultShutsDown(g -> faulty.failWrites(b -> b > g.logStart() && b < g.dataStart(), null, Errno.EIO),
                "volume shut down after I/O error at log write: memory: write at offset");
    }

    /** The next flush is the sync's log flush, unless the AIL's write-back happens to flush first: a shutdown either way. */
    @Test
    void failedLogFlushShutsTheVolumeDown() {
        logFaultShutsDown(g -> faulty.failFlushes(1, Errno.EIO), "volume shut down after I/O error at (log write|metadata write-back): memory: flush");
    }

    /** A sync after {@code arm} fails with a message matching {@code message}, and every later call as well; the volume reopens sound. */
    private void logFaultShutsDown(Consumer<Geometry> arm, String message) {
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/acked", 0755);
            v.sync();
            arm.accept(v.geometry());
            ns.mkdir("/lost", 0755);
            VolumeShutdownException e = assertThrows(VolumeShutdownException.class, v::sync);
            assertTrue(java.util.regex.Pattern.compile(message).matcher(e.getMessage()).lookingAt(), e.getMessage());
            assertShutDown(v, ns, e.getMessage().substring(e.getMessage().indexOf(" at ") + 4, e.getMessage().indexOf(": ")));
        }
        reopenSound(ns -> ns.stat("/acked"));
    }

    /** The anchor write that moves the log's tail, failed alone (the log and the home blocks still take writes). */
    @Test
    void failedLogAnchorWriteShutsTheVolumeDown() {
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/acked", 0755);
            ns.create("/acked/file", 0644, true);
            v.sync();
            long anchor = v.geometry().logStart();
            faulty.failWrites(b -> b == anchor, null, Errno.EIO);
            VolumeShutdownException e = assertThrows(VolumeShutdownException.class, v::quiesce); // writes home, then anchors the tail
            assertTrue(e.getMessage().startsWith("volume shut down after I/O error at log anchor write: memory: write at offset "
                    + anchor * BS), e.getMessage());
            assertShutDown(v, ns, "log anchor write");
        }
        reopenSound(ns -> ns.stat("/acked/file"));
    }

    /**
     * The clean superblock's write at unmount, failed alone, at the primary copy and at the mirror: close
     * reports it, the volume is closed all the same, and the next mount, finding a superblock still marked
     * mounted (or a stale mirror beside a clean primary), holds everything.
     */
    @Test
    void failedSuperblockWriteAtUnmountIsReportedAndTheNextMountRecovers() {
        for (long copy : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
            faulty.clear();
            Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS);
            Namespace ns = v.namespace();
            ns.mkdir("/acked-" + copy, 0755);
            ns.create("/acked-" + copy + "/file", 0644, true);
            v.sync();
            faulty.failWrites(b -> b == copy, null, Errno.EIO);
            DeviceException e = assertThrows(DeviceException.class, v::close);
            assertEquals(Errno.EIO, e.errno());
            assertTrue(e.getMessage().contains("write at offset " + copy * BS), e.getMessage());
            assertThrows(VolumeShutdownException.class, () -> ns.stat("/"));
            faulty.clear();
            try (Volume again = Volume.open(faulty, VolumeFixtures.OPTIONS)) {
                assertEquals(copy != SuperblockFormat.PRIMARY, again.mountReport().wasClean(), again.mountReport().toString());
                VolumeFixtures.assertChecked(again.namespace());
                for (long c = 0; c <= copy; c++) {
                    again.namespace().stat("/acked-" + c + "/file");
                }
            }
        }
    }

    @Test
    void failedMetadataWriteBackShutsTheVolumeDown() {
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/acked", 0755);
            ns.create("/acked/file", 0644, true);
            v.sync();
            Geometry g = v.geometry();
            // the pusher's writes of home blocks only: the log still works
            faulty.failWrites(b -> b >= g.dataStart(), "ferrite-ail-pusher", Errno.EIO);
            VolumeShutdownException e = assertThrows(VolumeShutdownException.class, v::quiesce);
            assertTrue(e.getMessage().startsWith("volume shut down after I/O error at metadata write-back: "), e.getMessage());
            assertShutDown(v, ns, "metadata write-back");
        }
        reopenSound(ns -> ns.stat("/acked/file"));
    }

    /** A data write's EIO goes to its caller, direct or at fsync when buffered; the volume stays up and the file keeps its bytes. */
    @Test
    void failedDataWriteIsReportedAndTheVolumeGoesOn() {
        byte[] acked = pattern(2 * BS, 1);
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS); Arena arena = Arena.ofConfined()) {
            Namespace ns = v.namespace();
            ns.create("/f", 0644, true);
            MemorySegment buf = arena.allocate(2 * BS, BlockDevice.BUFFER_ALIGNMENT);
            try (Handle h = ns.open("/f")) {
                MemorySegment.copy(acked, 0, buf, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, acked.length);
                ns.write(h, 0, buf);
                ns.fsync(h);
                long[] blocks = ns.extents(h, 0, 2 * BS).stream()
                        .flatMapToLong(x -> java.util.stream.LongStream.range(x.deviceOffset() / BS, (x.deviceOffset() + x.length()) / BS))
                        .toArray();
                Geometry g = v.geometry();
                String me = Thread.currentThread().getName();
                // an overwrite in place
                faulty.failWrites(b -> Arrays.stream(blocks).anyMatch(x -> x == b), me, Errno.EIO);
                buf.fill((byte) 9);
                DeviceException overwrite = assertThrows(DeviceException.class, () -> ns.write(h, 0, buf));
                assertEquals(Errno.EIO, overwrite.errno());
                // an append into newly allocated blocks
                faulty.failWrites(b -> b >= g.dataStart(), me, Errno.EIO);
                assertThrows(DeviceException.class, () -> ns.write(h, 2 * BS, buf));
                assertEquals(2 * BS, ns.stat(h).size());
                // a buffered write fails at write-back: its fsync reports it
                faulty.failWrites(b -> Arrays.stream(blocks).anyMatch(x -> x == b), null, Errno.EIO);
                ns.write(h, 10, java.nio.ByteBuffer.wrap(new byte[] {9, 9, 9}));
                assertThrows(DeviceException.class, () -> ns.fsync(h));
                faulty.clear();
                ns.mkdir("/after", 0755); // the volume goes on
                v.sync();
            }
        }
        reopenSound(ns -> {
            ns.stat("/after");
            byte[] got = new byte[2 * BS];
            try (Handle h = ns.open("/f")) {
                ns.read(h, 0, java.nio.ByteBuffer.wrap(got));
            }
            // the injected device wrote nothing: the bytes fsynced before the faults, but for the buffered
            // write, whose page the cache may have written back once the device was healthy again
            got[10] = got[11] = got[12] = 0;
            byte[] want = acked.clone();
            want[10] = want[11] = want[12] = 0;
            assertArrayEquals(want, got);
        });
    }

    /** A data flush's EIO goes to its fsync, which tries again next time; the volume stays up. */
    @Test
    void failedDataFlushIsReportedAndTheVolumeGoesOn() {
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS); Arena arena = Arena.ofConfined()) {
            Namespace ns = v.namespace();
            ns.create("/f", 0644, true);
            MemorySegment buf = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            try (Handle h = ns.open("/f")) {
                ns.write(h, 0, buf);
                ns.fsync(h);
                buf.fill((byte) 7);
                ns.write(h, 0, buf); // in place: fdatasync needs only a device flush
                faulty.failFlushes(1, Errno.EIO);
                assertThrows(DeviceException.class, () -> ns.fdatasync(h));
                ns.fdatasync(h); // flushes again
            }
            ns.mkdir("/after", 0755);
            v.sync();
        }
        reopenSound(ns -> ns.stat("/after"));
    }

    /** A read error on a B-tree block reaches the reader; the cache keeps no broken buffer, and the volume goes on. */
    @Test
    void readErrorOnTreeBlocksIsReported() {
        byte[] key = "key-0777".getBytes(StandardCharsets.UTF_8);
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            for (int i = 0; i < 400; i++) {
                ns.create("/d/file-" + i, 0644, true);
            }
            Table t = v.tables().create("t");
            try (WriteTransaction tx = v.begin()) {
                for (int i = 0; i < 2000; i++) {
                    tx.put(t, String.format("key-%04d", i).getBytes(StandardCharsets.UTF_8), new byte[100]);
                }
                tx.commit();
            }
        }
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            ns.stat("/d");
            Table t = v.tables().open("t");
            Geometry g = v.geometry();
            faulty.failReads(b -> b >= g.dataStart(), Errno.EIO);
            DeviceException dirRead = assertThrows(DeviceException.class, () -> ns.lookup("/d/file-377"));
            assertEquals("read", dirRead.operation());
            assertThrows(DeviceException.class, () -> t.get(key));
            ns.stat("/d"); // cached: the volume goes on
            faulty.clear();
            assertTrue(ns.lookup("/d/file-377") > 0);
            assertEquals(100, t.get(key).length);
        }
        reopenSound(ns -> ns.stat("/d/file-399"));
    }

    /**
     * Running out of space inside a file write, a create and a table transaction changes nothing the call
     * had not finished, reports ENOSPC, and leaves the volume up and consistent.
     */
    @Test
    void runningOutOfSpaceChangesNothingHalfDone() {
        List<String> files = new ArrayList<>();
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS); Arena arena = Arena.ofConfined()) {
            Namespace ns = v.namespace();
            Table t = v.tables().create("t");
            MemorySegment buf = arena.allocate(1 << 20, BlockDevice.BUFFER_ALIGNMENT);
            ns.create("/big", 0644, true);
            long size = 0;
            try (Handle h = ns.open("/big")) {
                while (true) {
                    try {
                        ns.write(h, size, buf);
                    } catch (NoSpaceException e) {
                        break;
                    }
                    size += buf.byteSize();
                }
                ns.fsync(h);
                assertEquals(size, ns.stat(h).size() / buf.byteSize() * buf.byteSize());
            }
            FerriteException full = null;
            for (int i = 0; full == null; i++) {
                try {
                    ns.create("/f" + i, 0644, true);
                    files.add("/f" + i);
                } catch (NoSpaceException e) {
                    full = e;
                }
                if (i > 200_000) {
                    throw new AssertionError("200000 creates on a full volume and no ENOSPC");
                }
            }
            try (WriteTransaction tx = v.begin()) {
                for (int i = 0; i < 300; i++) { // fits the log, not the volume
                    tx.put(t, ("k" + i).getBytes(StandardCharsets.UTF_8), new byte[2000]);
                }
                assertThrows(NoSpaceException.class, tx::commit);
            }
            assertFalse(t.containsKey("k0".getBytes(StandardCharsets.UTF_8)), "a transaction that found no space changed nothing");
            v.sync();
            VolumeFixtures.assertChecked(ns);
            ns.unlink("/big"); // room again: the volume goes on
            try (WriteTransaction tx = v.begin()) {
                tx.put(t, "after".getBytes(StandardCharsets.UTF_8), new byte[2000]);
                tx.commit();
            }
            ns.mkdir("/after", 0755);
            v.sync();
        }
        reopenSound(ns -> {
            ns.stat("/after");
            for (String f : files) {
                ns.stat(f);
            }
        });
    }

    /** Every kind of call fails fast, naming where the volume met its error. */
    private static void assertShutDown(Volume v, Namespace ns, String where) {
        String prefix = "volume shut down after I/O error at " + where;
        List<Runnable> calls = List.of(
                () -> ns.stat("/"),
                () -> ns.lookup("/acked"),
                () -> ns.list("/"),
                () -> ns.mkdir("/later", 0755),
                () -> ns.create("/later-file", 0644, true),
                v::sync,
                v::namespace,
                v::tables);
        for (Runnable call : calls) {
            VolumeShutdownException e = assertThrows(VolumeShutdownException.class, call::run);
            assertTrue(e.getMessage().startsWith(prefix), e.getMessage());
        }
    }

    /** Reopens the volume on the healthy device: it recovers, checks clean and passes {@code acknowledged}. */
    private void reopenSound(Consumer<Namespace> acknowledged) {
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            VolumeFixtures.assertChecked(ns);
            acknowledged.accept(ns);
        }
    }

    private static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        return b;
    }
}
