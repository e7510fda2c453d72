package dev.ferrite.io;

import java.util.Random;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * The seed of every randomised test: {@code -Dferrite.seed=N}, or a fixed default so runs repeat.
 * Register with {@code @ExtendWith(TestSeed.class)} to have it printed when a test fails.
 */
public final class TestSeed implements TestWatcher {
    public static final long SEED = Long.getLong("ferrite.seed", 0x5EED_F311L);

    /** A generator for one test, seeded from {@link #SEED} and a per-test salt so tests do not share a stream. */
    public static Random random(long salt) {
        return new Random(SEED * 31 + salt);
    }

    @Override
    public void testFailed(ExtensionContext context, Throwable cause) {
        System.err.println(context.getDisplayName() + " failed with -Dferrite.seed=" + SEED);
    }
}
