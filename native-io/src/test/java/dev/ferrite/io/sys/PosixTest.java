package dev.ferrite.io.sys;

import dev.ferrite.io.Errno;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.FutureTask;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Each thread reads the errno its own last downcall captured, however the threads' calls interleave. */
class PosixTest {
    private static final int ROUNDS = 1000;

    @Test
    void errnoIsTheCallingThreadsAcrossInterleavedCalls() throws Exception {
        Semaphore aTurn = new Semaphore(1), bTurn = new Semaphore(0);
        // A fails with EBADF, then B with ENOENT before A reads its errno: a capture buffer shared between
        // them (the last caller's, without checking whose it is) would give A B's ENOENT, and B A's EBADF
        FutureTask<Void> a = new FutureTask<>(() -> alternate(aTurn, bTurn, () -> {
            assertEquals(-1, Posix.close(-1));
            return Errno.EBADF;
        }), null);
        FutureTask<Void> b = new FutureTask<>(() -> alternate(bTurn, aTurn, () -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment path = arena.allocateFrom("/nonexistent-ferrite-path/x");
                assertEquals(-1, Posix.open(path, Posix.O_RDONLY, 0));
            }
            return Errno.ENOENT;
        }), null);
        new Thread(a, "posix-a").start();
        new Thread(b, "posix-b").start();
        a.get(60, TimeUnit.SECONDS);
        b.get(60, TimeUnit.SECONDS);
    }

    /** ROUNDS times: a failing call in this thread's turn, then, in its next turn, after the other's call, its errno checked. */
    private static void alternate(Semaphore mine, Semaphore theirs, FailingCall call) {
        int expected = 0;
        for (int r = 0; r <= ROUNDS; r++) {
            try {
                if (!mine.tryAcquire(10, TimeUnit.SECONDS)) {
                    throw new AssertionError("round " + r + ": the other thread stopped");
                }
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            try {
                if (r > 0) {
                    assertEquals(expected, Posix.errno(), "round " + r);
                }
                if (r < ROUNDS) {
                    expected = call.fail();
                    assertEquals(expected, Posix.errno(), "round " + r + ", read at once");
                }
            } finally {
                theirs.release();
            }
        }
    }

    @FunctionalInterface
    private interface FailingCall {
        int fail();
    }
}
