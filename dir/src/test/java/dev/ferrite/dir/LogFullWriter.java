package dev.ferrite.dir;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

import dev.ferrite.btree.internal.Txn;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Tests: an operation that enters an inode (a shared create in its directory, a single write in its table)
 * must not wait for log space while inside, where a writer that holds its reservation and waits in
 * {@link Inode#lockExclusive} would wait for it for ever.
 */
final class LogFullWriter {
    private LogFullWriter() {
    }

    /**
     * Runs {@code op} on a thread of its own while this thread holds all of the log's space in open
     * transactions ({@code alsoHold} given the first, to lock more in), and once it has parked, has a
     * writer take {@code inode} exclusively. Then lets everything go, and rethrows what {@code op} threw.
     *
     * @return true if the writer got in within 10 seconds
     */
    static boolean getsIn(Volume v, Inode inode, Consumer<Txn> alsoHold, Runnable op) throws InterruptedException {
        v.journal().quiesce(); // nothing logged left to write back: no space comes free while the log is held
        Deque<Txn> held = new ArrayDeque<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread worker = null, writer = null;
        boolean gotIn;
        try {
            held.push(Txn.begin(v.cache(), 1));
            alsoHold.accept(held.peek());
            for (Txn t; (t = Txn.tryBegin(v.cache(), 1)) != null; ) {
                held.push(t);
            }
            worker = Thread.ofPlatform().start(() -> {
                try {
                    op.run();
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (worker.getState() != Thread.State.WAITING && worker.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(worker.isAlive() && System.nanoTime() < deadline,
                        "the operation neither waited nor stayed alive: " + worker.getState() + ", " + failed.get());
                Thread.onSpinWait();
            }
            Thread.sleep(200); // parked for its log space, not passing through a lock
            writer = Thread.ofPlatform().start(() -> {
                inode.lockExclusive();
                inode.unlockExclusive();
            });
            writer.join(TimeUnit.SECONDS.toMillis(10));
            gotIn = !writer.isAlive();
        } finally {
            while (!held.isEmpty()) {
                held.pop().close(); // lets an operation stuck inside go on, and so the writer
            }
            if (worker != null) {
                worker.join();
            }
            if (writer != null) {
                writer.join();
            }
        }
        if (failed.get() != null) {
            throw new AssertionError("the operation failed", failed.get());
        }
        return gotIn;
    }
}
