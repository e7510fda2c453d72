package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A write-back's device write held at the device: the file's readers and buffered writers go on
 * meanwhile (they waited for the whole device write when write-back held the file's I/O lock
 * exclusively), a page written again during it stays dirty and its newer bytes reach the device at the
 * next write-back, and a direct write over a page being written back lands after the write-back's copy,
 * not under it. Checked again after a remount.
 */
class WriteBackConcurrencyTest extends FileTestBase {
    /** How long an operation that must not wait for the held write may take. */
    private static final long PROMPT_SECONDS = 10;
    private GatedDevice gated;
    /** A thread per task: the common pool may have one, which the held write-back would keep. */
    private final ExecutorService threads = Executors.newCachedThreadPool();

    /** Holds the write that covers device block {@link #gatedBlock} until {@link #release} opens. */
    static final class GatedDevice extends ForwardingDevice {
        volatile long gatedBlock = -1;
        final CountDownLatch entered = new CountDownLatch(1), release = new CountDownLatch(1);
        /** Counted down by a write to {@link #watchedBlock} while the gated one is held. */
        volatile long watchedBlock = -1;
        final CountDownLatch watchedWritten = new CountDownLatch(1);

        GatedDevice(BlockDevice inner) {
            super(inner);
        }

        @Override
        public void write(long block, MemorySegment src) {
            long w = watchedBlock;
            if (w >= block && w < block + src.byteSize() / blockSize() && release.getCount() > 0) {
                super.write(block, src);
                watchedWritten.countDown();
                return;
            }
            long g = gatedBlock;
            if (g >= block && g < block + src.byteSize() / blockSize()) {
                gatedBlock = -1;
                entered.countDown();
                try {
                    assertTrue(release.await(60, TimeUnit.SECONDS), "the held write was never released");
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            }
            super.write(block, src);
        }
    }

    @AfterEach
    void stopThreads() {
        gated.release.countDown(); // a failed test's held write too, so the volume closes
        threads.shutdown();
    }

    @Override
    BlockDevice device(MemoryDevice formatted) {
        return gated = new GatedDevice(formatted);
    }

    @Override
    VolumeOptions options() {
        return VolumeFixtures.OPTIONS.withDirtyExpireMillis(600_000); // no write-back but the test's
    }

    private static MemorySegment bytes(int len, int value) {
        MemorySegment m = MemorySegment.ofArray(new byte[len]);
        m.fill((byte) value);
        return m;
    }

    private static <T> T prompt(CompletableFuture<T> f, String what) throws Exception {
        try {
            return f.get(PROMPT_SECONDS, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError(what + " waited for a write-back's device write", e);
        }
    }

    @Test
    void readersAndWritersGoOnDuringAWriteBackAndNothingStaleLands() throws Exception {
        Handle f = written("f", 4, 1); // written blocks: write-back overwrites them in place
        long dev0 = ns.extents(f, 0, BS).getFirst().deviceOffset() / BS;
        ns.write(f, 16, bytes(100, 0x11)); // blocks 0 and 1 dirty: one run, one device write
        ns.write(f, BS + 16, bytes(100, 0x22));
        gated.gatedBlock = dev0;
        CompletableFuture<Void> fsync = CompletableFuture.runAsync(() -> ns.fsync(f), threads);
        assertTrue(gated.entered.await(PROMPT_SECONDS, TimeUnit.SECONDS), "the write-back reached the device");

        MemorySegment got = MemorySegment.ofArray(new byte[BS]);
        assertEquals(BS, (int) prompt(CompletableFuture.supplyAsync(() -> ns.read(f, 0, got), threads), "a read of a page being written back"));
        assertEquals((byte) 0x11, got.get(JAVA_BYTE, 16));
        prompt(CompletableFuture.runAsync(() -> ns.write(f, 200, bytes(50, 0x33)), threads), "a buffered write to a page being written back");
        prompt(CompletableFuture.runAsync(() -> ns.write(f, 3 * BS + 8, bytes(8, 0x44)), threads), "a buffered write to another page");
        MemorySegment two = MemorySegment.ofArray(new byte[BS]);
        prompt(CompletableFuture.supplyAsync(() -> ns.read(f, 2 * BS, two), threads), "a read that misses");
        assertEquals(stamped(2L * BS, 1, 1).asByteBuffer(), two.asByteBuffer());

        MemorySegment direct = stamped(BS, 1, 9); // over block 1, whose older copy is on its way
        gated.watchedBlock = dev0 + 1;
        CompletableFuture<Void> overwrite = CompletableFuture.runAsync(() -> ns.write(f, BS, direct), threads);
        // bounded: it must not happen, and the older copy would land over it if it did
        assertFalse(gated.watchedWritten.await(1, TimeUnit.SECONDS), "a direct write reached the device under a write-back's older copy");
        assertFalse(fsync.isDone(), "the write-back is still held");
        gated.release.countDown();
        prompt(fsync, "the fsync once released");
        prompt(overwrite, "the direct write once released");

        assertTrue(v.pageCache().stats().dirtyPages() >= 2, "written again during the write-back: still dirty, " + v.pageCache().stats());
        ns.read(f, 0, got);
        assertEquals((byte) 0x11, got.get(JAVA_BYTE, 16));
        assertEquals((byte) 0x33, got.get(JAVA_BYTE, 200));
        ns.read(f, BS, got);
        assertEquals(direct.asByteBuffer(), got.asByteBuffer(), "the direct write, not the write-back's older copy");
        ns.fsync(f);
        f.close();

        root.close();
        v.close();
        v = Volume.open(dev, options());
        ns = v.namespace();
        root = ns.openRoot();
        try (Handle g = ns.open(root, "f", Namespace.O_RDONLY)) {
            ns.read(g, 0, got);
            assertEquals((byte) 0x11, got.get(JAVA_BYTE, 16));
            assertEquals((byte) 0x33, got.get(JAVA_BYTE, 200), "the bytes written during the write-back reached the device");
            ns.read(g, BS, got);
            assertEquals(direct.asByteBuffer(), got.asByteBuffer(), "block 1 on the device");
            ns.read(g, 3 * BS, got);
            assertEquals((byte) 0x44, got.get(JAVA_BYTE, 8));
        }
    }
}
