package dev.ferrite.perf.bench;

import java.util.random.RandomGenerator;

/**
 * YCSB's "scrambled Zipfian" key chooser: a Zipfian rank over {@value #ITEMS} items with exponent
 * {@value #THETA} (Gray et al., "Quickly generating billion-record synthetic databases", SIGMOD 1994),
 * hashed (FNV-1a, 64 bits) and taken modulo the key count, so that the popular keys lie scattered over
 * the key space instead of clustering at its start. Rank 0, the hottest, comes up with probability
 * {@code 1/zeta(ITEMS)}, about 3.8%; a key's share is the sum of the ranks that hash to it.
 *
 * <p>Immutable, so threads share one; each draws with its own {@link RandomGenerator}.
 */
final class Zipfian {
    static final double THETA = 0.99;
    /** Ranks drawn before the modulo, as YCSB's scrambled generator draws them. */
    static final long ITEMS = 10_000_000_000L;
    /** Terms {@link #zeta} adds one by one; it estimates the rest (Euler-Maclaurin). */
    private static final long EXACT_TERMS = 1L << 20;
    /** {@code zeta(ITEMS, THETA)}, about 26.47: a million terms, worked out once. */
    private static final double ZETA_ITEMS = zeta(ITEMS, THETA);

    private final long keys;
    private final double zetan;
    private final double alpha;
    private final double eta;
    /** {@code 1 + 0.5^theta}: below it, {@code u * zetan} picks rank 1. */
    private final double secondRank;

    /** A chooser over key indexes {@code 0..keys-1}. */
    Zipfian(long keys) {
        if (keys < 1) {
            throw new IllegalArgumentException("no keys to choose from: " + keys);
        }
        this.keys = keys;
        this.zetan = ZETA_ITEMS;
        this.alpha = 1 / (1 - THETA);
        double zeta2 = 1 + Math.pow(2, -THETA);
        this.eta = (1 - Math.pow(2.0 / ITEMS, 1 - THETA)) / (1 - zeta2 / zetan);
        this.secondRank = 1 + Math.pow(0.5, THETA);
    }

    /** The next key index. */
    long next(RandomGenerator random) {
        return Long.remainderUnsigned(fnv1a(rank(random.nextDouble())), keys);
    }

    /** The Zipfian rank for a uniform {@code u} in [0, 1): 0 the most frequent. */
    long rank(double u) {
        double uz = u * zetan;
        if (uz < 1) {
            return 0;
        }
        if (uz < secondRank) {
            return 1;
        }
        return Math.min(ITEMS - 1, (long) (ITEMS * Math.pow(eta * u - eta + 1, alpha)));
    }

    /** FNV-1a over the 8 bytes of {@code v}, low byte first. */
    static long fnv1a(long v) {
        long h = 0xCBF2_9CE4_8422_2325L;
        for (int i = 0; i < 8; i++) {
            h ^= (v >>> (8 * i)) & 0xFF;
            h *= 0x0000_0100_0000_01B3L;
        }
        return h;
    }

    /**
     * The generalized harmonic number {@code sum(i^-theta, i = 1..n)}: the first {@value #EXACT_TERMS}
     * terms added, the rest by Euler-Maclaurin (integral, end corrections and first-derivative term),
     * whose next term is below 1e-20 there.
     */
    static double zeta(long n, double theta) {
        long exact = Math.min(n, EXACT_TERMS);
        double sum = 0;
        for (long i = exact; i >= 1; i--) { // smallest terms first, for accuracy
            sum += Math.pow(i, -theta);
        }
        if (n == exact) {
            return sum;
        }
        double a = exact, b = n;
        double integral = (Math.pow(b, 1 - theta) - Math.pow(a, 1 - theta)) / (1 - theta);
        double ends = (Math.pow(b, -theta) - Math.pow(a, -theta)) / 2;
        double slope = -theta * (Math.pow(b, -theta - 1) - Math.pow(a, -theta - 1)) / 12;
        return sum + integral + ends + slope;
    }
}
