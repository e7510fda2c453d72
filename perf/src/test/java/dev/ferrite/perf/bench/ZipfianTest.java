package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.ferrite.io.testkit.TestSeed;

@ExtendWith(TestSeed.class)
class ZipfianTest {
    private static final int KEYS = 10_000;
    private static final int DRAWS = 1_000_000;

    @Test
    void theHottestKeysTakeTheirZipfianSharesAndEveryKeyIsInRange() {
        SplittableRandom random = new SplittableRandom(TestSeed.get(17));
        Zipfian zipfian = new Zipfian(KEYS);
        int[] hits = new int[KEYS];
        for (int i = 0; i < DRAWS; i++) {
            long k = zipfian.next(random);
            assertTrue(k >= 0 && k < KEYS, "key " + k + " out of 0.." + (KEYS - 1));
            hits[(int) k]++;
        }
        int[] sorted = hits.clone();
        Arrays.sort(sorted);
        double top = (double) sorted[KEYS - 1] / DRAWS, second = (double) sorted[KEYS - 2] / DRAWS;
        // rank 0 comes up with 1/zeta(1e10, 0.99) = 3.78%, rank 1 half as often (2^-0.99), plus what hashes alongside
        assertTrue(top > 0.034 && top < 0.042, "the hottest key's share " + top);
        assertTrue(second > 0.017 && second < 0.023, "the second key's share " + second);
        // skewed, yet spread: no key (of 10,000) is left out entirely by so many draws
        assertTrue(sorted[0] > 0, "a key never drawn");
        // the top 1% of keys: ranks 0..99 (zeta(100)/zeta(1e10), ~19%), and some 1% of the rest hashed alongside
        double hot = (double) Arrays.stream(sorted, KEYS - KEYS / 100, KEYS).sum() / DRAWS;
        double ranks = Zipfian.zeta(KEYS / 100, Zipfian.THETA) / Zipfian.zeta(Zipfian.ITEMS, Zipfian.THETA);
        assertTrue(hot > ranks - 0.005 && hot < ranks + 0.03, "the top 1% of keys took " + hot + ", ranks 0-99 " + ranks);
    }

    @Test
    void theHotKeysAreScatteredNotTheFirstIndexes() {
        Zipfian zipfian = new Zipfian(KEYS);
        assertEquals(Long.remainderUnsigned(Zipfian.fnv1a(0), KEYS), zipfian.next(new FixedDouble(0)),
                "the hottest key is rank 0 hashed");
        assertTrue(zipfian.next(new FixedDouble(0)) != 0);
    }

    @Test
    void zetaAddsUpTermsAndEstimatesTheTailClosely() {
        long n = 3_000_000;
        double exact = 0;
        for (long i = n; i >= 1; i--) {
            exact += Math.pow(i, -Zipfian.THETA);
        }
        assertEquals(exact, Zipfian.zeta(n, Zipfian.THETA), exact * 1e-12);
        assertEquals(1 + Math.pow(2, -0.5), Zipfian.zeta(2, 0.5), 1e-15);
        // the constant YCSB publishes for its scrambled generator's 10^10 items at theta 0.99
        assertEquals(26.46902820178302, Zipfian.zeta(Zipfian.ITEMS, Zipfian.THETA), 1e-6);
    }

    @Test
    void ranksFollowTheUniformInput() {
        Zipfian zipfian = new Zipfian(KEYS);
        assertEquals(0, zipfian.rank(0));
        assertEquals(1, zipfian.rank(1.5 / 26.469));
        assertTrue(zipfian.rank(0.999999) > 1_000_000_000L, "the tail reaches the far ranks");
        assertTrue(zipfian.rank(0.5) < zipfian.rank(0.9));
    }

    /** A generator whose doubles are all one value. */
    private record FixedDouble(double value) implements java.util.random.RandomGenerator {
        @Override
        public long nextLong() { // the generator draws doubles only: a long asked for fails the test
            throw new UnsupportedOperationException("Zipfian.next drew a long");
        }

        @Override
        public double nextDouble() {
            return value;
        }
    }
}
