package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.function.Consumer;
import java.util.function.ObjIntConsumer;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A mounted fixture volume for file-data tests, with stamped buffers to write and check; checked clean at the end. */
abstract class FileTestBase {
    static final int BS = 4096;
    final Arena arena = Arena.ofShared();
    MemoryDevice dev;
    Volume v;
    Namespace ns;
    Handle root;

    /** The mount options; a subclass may tune them. */
    VolumeOptions options() {
        return OPTIONS;
    }

    /** The device to mount, over the formatted {@code dev}; a subclass may wrap it. */
    BlockDevice device(MemoryDevice formatted) {
        return formatted;
    }

    @BeforeEach
    void open() {
        dev = VolumeFixtures.formatted();
        v = Volume.open(device(dev), options());
        ns = v.namespace();
        root = ns.openRoot();
    }

    @AfterEach
    void close() {
        try {
            root.close();
            VolumeFixtures.assertChecked(ns); // the groups' check too, with the files' blocks owned
            v.close();
        } finally {
            dev.close();
            arena.close();
        }
    }

    /** {@code blocks} blocks, each 8-byte word stamped with its file offset and {@code gen}. */
    MemorySegment stamped(long offset, int blocks, int gen) {
        MemorySegment m = arena.allocate((long) blocks * BS, BlockDevice.BUFFER_ALIGNMENT);
        for (long at = 0; at < m.byteSize(); at += 8) {
            m.set(U64, at, (offset + at) << 16 | gen);
        }
        return m;
    }

    /**
     * Creates file {@code name} holding {@code blocks} blocks stamped with generation {@code gen}, closes it
     * (its last close trims what the write preallocated past its end) and opens it again.
     */
    Handle written(String name, int blocks, int gen) {
        try (Handle f = ns.create(root, name, 0644, true)) {
            ns.write(f, 0, stamped(0, blocks, gen));
        }
        return ns.open(root, name);
    }

    /** Edits inode {@code ino}'s core fields (up to the inline area) in a transaction: {@code edit(block, record offset)}. */
    void editRecord(long ino, ObjIntConsumer<MemorySegment> edit) {
        int rec = ns.records.rec(ino);
        try (Txn txn = Txn.begin(v.cache(), 2)) {
            Buffer m = ns.records.lockRecord(txn, ino);
            edit.accept(m.data(), rec);
            txn.log(m, rec, InodeFormat.INLINE);
            txn.commit();
        }
    }

    MemorySegment buffer(int blocks) {
        return arena.allocate((long) blocks * BS, BlockDevice.BUFFER_ALIGNMENT);
    }

    /** Every word of {@code m}, read from file offset {@code offset}, holds generation {@code gen} (0: zeros). */
    static void assertStamped(MemorySegment m, long offset, int gen) {
        for (long at = 0; at < m.byteSize(); at += 8) {
            long want = gen == 0 ? 0 : (offset + at) << 16 | gen;
            if (m.get(U64, at) != want) {
                throw new AssertionError("word at file offset " + (offset + at) + " is 0x" + Long.toHexString(m.get(U64, at))
                        + ", expected generation " + gen);
            }
        }
    }

    long free() {
        return v.statfs().freeBlocks();
    }

    /**
     * Fallocates every block the volume will give past the end of {@code hog} (KEEP_SIZE: never reclaimed), in
     * halving pieces: a fallocate promised more than is free fails with nothing taken.
     */
    void takeAllSpace(Handle hog) {
        long at = 0;
        for (long n = v.spareBlocks(); n > 0; ) {
            try {
                ns.fallocate(hog, Namespace.FALLOC_FL_KEEP_SIZE, at * BS, n * BS);
                at += n;
            } catch (NoSpaceException full) {
                n /= 2;
            }
        }
    }

    /** Whether some group of {@code v} holds {@code len} free blocks together (held back or not). */
    static boolean someGroupHolds(Volume v, int len) {
        for (int g = 0; g < v.geometry().agCount(); g++) {
            AllocationGroup ag = v.group(g);
            try (Txn txn = Txn.begin(v.cache(), 1)) {
                AllocationGroup.lock(txn, ag.agf);
                boolean holds = ag.space.hasExtent(txn, len);
                txn.release(ag.agf);
                if (holds) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Leaves {@code v}'s free space in single blocks, over 1,000 of them spare, no group holding two
     * together: file a in {@code root} maps most of it with every other block punched, file b the runs left
     * (the punches' room, the groups' tails).
     */
    static void freeSpaceInSingleBlocks(Volume v, Handle root) {
        Namespace ns = v.namespace();
        try (Handle a = ns.create(root, "a", 0644, true)) {
            long mapped = v.spareBlocks() - 600; // room for the punches' claims
            ns.fallocate(a, Namespace.FALLOC_FL_KEEP_SIZE, 0, mapped * BS);
            for (long b = 1; b < mapped; b += 2) {
                ns.fallocate(a, Namespace.FALLOC_FL_PUNCH_HOLE | Namespace.FALLOC_FL_KEEP_SIZE, b * BS, BS);
            }
        }
        try (Handle b = ns.create(root, "b", 0644, true)) {
            long at = 0;
            for (int len : new int[] {DirContents.RESERVE_LOW, 2}) {
                for (; someGroupHolds(v, len); at += len + 1) {
                    ns.fallocate(b, Namespace.FALLOC_FL_KEEP_SIZE, at * BS, (long) len * BS);
                }
            }
        }
        assertTrue(!someGroupHolds(v, 2), "a group holds 2 free blocks together");
        assertTrue(v.spareBlocks() > 1000, v.spareBlocks() + " spare blocks");
    }

    /** {@code op} on {@code f} fails with {@code errno} and changes neither the file nor free space. */
    void assertErrno(int errno, Consumer<Handle> op, Handle f) {
        InodeStat before = ns.stat(f);
        long free = free();
        NamespaceException e = assertThrows(NamespaceException.class, () -> op.accept(f));
        assertEquals(errno, e.errno(), e.getMessage());
        assertEquals(before, ns.stat(f));
        assertEquals(free, free());
    }

    /** A body run by one thread each, with its own arena; {@code body(me, arena)}. */
    interface ThreadBody {
        void run(int me, Arena mine) throws Exception;
    }

    /** Runs {@code body} on {@code threads} threads named {@code name-i}, waits for them all and rethrows a failure. */
    static void runThreads(int threads, String name, ThreadBody body) throws InterruptedException {
        Throwable[] failed = new Throwable[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int me = t;
            ts[t] = new Thread(() -> {
                try (Arena mine = Arena.ofConfined()) {
                    body.run(me, mine);
                } catch (Throwable e) {
                    failed[me] = e;
                }
            }, name + "-" + t);
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join(60_000);
            assertTrue(!t.isAlive(), t.getName() + " did not finish");
        }
        for (int t = 0; t < threads; t++) {
            if (failed[t] != null) {
                throw new AssertionError(name + "-" + t + " failed", failed[t]);
            }
        }
    }

    /** This thread's bytes allocated so far (com.sun.management's, reached reflectively: this module does not read it). */
    static long allocatedBytes() {
        try {
            return (Long) Class.forName("com.sun.management.ThreadMXBean").getMethod("getCurrentThreadAllocatedBytes")
                    .invoke(ManagementFactory.getThreadMXBean());
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }
}
