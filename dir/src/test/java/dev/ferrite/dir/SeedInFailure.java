package dev.ferrite.dir;

import java.lang.reflect.Field;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;
import org.opentest4j.TestAbortedException;

/**
 * Puts the seed a randomised test ran with into its failure: the test class's {@code static long SEED}
 * (its {@code -Dferrite.seed} or its default). Whatever the test threw, an assertion or an exception from
 * the engine, fails as an AssertionError naming the seed, the original as its cause.
 */
final class SeedInFailure implements TestExecutionExceptionHandler {
    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable t) throws Throwable {
        if (t instanceof TestAbortedException) {
            throw t;
        }
        Field f = context.getRequiredTestClass().getDeclaredField("SEED");
        f.setAccessible(true);
        throw new AssertionError(context.getDisplayName() + " ran with -Dferrite.seed=" + f.getLong(null) + ": " + t, t);
    }
}
