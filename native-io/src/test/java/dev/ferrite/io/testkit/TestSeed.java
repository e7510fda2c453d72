package dev.ferrite.io.testkit;

import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;
import org.opentest4j.TestAbortedException;

/**
 * The one way a randomised test gets its seed: {@code -Dferrite.seed=N}, or the test's fixed default so
 * runs repeat. A test class that draws a seed registers this extension with
 * {@code @ExtendWith(TestSeed.class)}: whatever one of its tests then throws, an assertion or an exception
 * from the engine, fails as an AssertionError naming the seed it ran with, the original as its cause. The
 * seed is the one last drawn by the test class (or a class it extends or nests in), so draw it there.
 */
public final class TestSeed implements TestExecutionExceptionHandler {
    /** The default of {@link #random(long)}, for tests that only need some fixed stream. */
    private static final long KIT_DEFAULT = 0x5EED_F311L;
    private static final StackWalker CALLER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);
    /** The last seed each top-level test class drew: what a failure of that class's test ran with. */
    private static final Map<Class<?>, Long> DRAWN = new ConcurrentHashMap<>();

    /** {@code -Dferrite.seed} if set, else {@code defaultSeed}; remembered for the calling test class's failures. */
    public static long get(long defaultSeed) {
        return draw(CALLER.getCallerClass(), defaultSeed);
    }

    /** A generator for one test, seeded from {@code -Dferrite.seed} (or a fixed default) and a per-test salt so tests do not share a stream. */
    public static Random random(long salt) {
        return new Random(draw(CALLER.getCallerClass(), KIT_DEFAULT) * 31 + salt);
    }

    private static long draw(Class<?> caller, long defaultSeed) {
        long seed = Long.getLong("ferrite.seed", defaultSeed);
        DRAWN.put(topLevel(caller), seed);
        return seed;
    }

    private static Class<?> topLevel(Class<?> c) {
        while (c.getEnclosingClass() != null) {
            c = c.getEnclosingClass();
        }
        return c;
    }

    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable t) throws Throwable {
        Long seed = null;
        // the test class or a base class it inherits the randomised tests from (a contract test)
        for (Class<?> c = context.getRequiredTestClass(); c != null && seed == null; c = c.getSuperclass()) {
            seed = DRAWN.get(topLevel(c));
        }
        if (seed == null || t instanceof TestAbortedException) {
            throw t;
        }
        throw new AssertionError(context.getDisplayName() + " ran with -Dferrite.seed=" + seed + ": " + t, t);
    }
}
