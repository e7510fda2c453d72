package dev.ferrite.journal.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/** Left padding for {@link PaddedWord}: keeps the hot word off the cache line of whatever precedes it. */
abstract class PaddedWordLhs {
    long p01, p02, p03, p04, p05, p06, p07, p08, p09, p10, p11, p12, p13, p14, p15;
}

/** The word itself. */
abstract class PaddedWordValue extends PaddedWordLhs {
    volatile long value;
}

/**
 * A 64-bit word alone on its cache lines (JCTools-style inheritance padding), for words many threads CAS:
 * grant heads, the log tail. Accessed through a {@link VarHandle} so each use names its memory ordering.
 */
final class PaddedWord extends PaddedWordValue {
    long q01, q02, q03, q04, q05, q06, q07, q08, q09, q10, q11, q12, q13, q14, q15;

    private static final VarHandle VALUE;

    static {
        try {
            VALUE = MethodHandles.lookup().findVarHandle(PaddedWordValue.class, "value", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    long get() {
        return value;
    }

    long getAcquire() {
        return (long) VALUE.getAcquire(this);
    }

    void set(long v) {
        value = v;
    }

    boolean compareAndSet(long expect, long update) {
        return VALUE.compareAndSet(this, expect, update);
    }
}
