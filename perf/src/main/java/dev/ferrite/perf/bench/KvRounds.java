package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Several rounds of the same {@code bench kv} run summed up as same-run ratios. A phase of large values
 * lasts a few hundred milliseconds (16,384 puts of 16 KiB, 256 of 1 MiB), so one run's rate moves 2-3x
 * with whatever else the machine does in that instant, a peer's as much as the first target's: each
 * round's ratio compares the two under the same conditions, and their median over the rounds decides
 * more than any one of them.
 */
public final class KvRounds {
    private KvRounds() {
    }

    /**
     * One table per peer: each phase (at each thread count and value size, in the first round's order) of
     * {@code first} and the peer, the median of their same-round ratios, the lowest and highest, and the
     * rounds in which {@code first} was ahead.
     *
     * @param rounds each round's results, in round order
     * @param first  the target whose rate is divided by each other's
     * @param peers  the other targets, in column order
     * @return the tables; empty for fewer than two rounds
     */
    public static String render(List<List<Result>> rounds, String first, List<String> peers) {
        if (rounds.size() < 2) {
            return "";
        }
        Map<String, List<Result>> phases = new LinkedHashMap<>();
        for (List<Result> round : rounds) {
            for (Result r : round) {
                phases.computeIfAbsent(key(r), k -> new ArrayList<>());
            }
        }
        StringBuilder sb = new StringBuilder();
        for (String peer : peers) {
            List<String[]> rows = new ArrayList<>();
            rows.add(new String[] {first + " vs " + peer + " over " + rounds.size() + " rounds", "median", "lowest", "highest", "ahead"});
            for (String phase : phases.keySet()) {
                double[] ratios = ratios(rounds, phase, first, peer);
                if (ratios.length == 0) {
                    continue;
                }
                double[] sorted = ratios.clone();
                Arrays.sort(sorted);
                long ahead = Arrays.stream(ratios).filter(x -> x > 1).count();
                rows.add(new String[] {phase, fixed(DbenchRounds.median(ratios)), fixed(sorted[0]), fixed(sorted[sorted.length - 1]),
                        ahead + "/" + ratios.length});
            }
            if (rows.size() > 1) {
                sb.append('\n').append(ResultTable.format(rows, 1));
            }
        }
        return sb.toString();
    }

    /** {@code first}'s rate over {@code peer}'s in each round that has both at {@code phase}. */
    static double[] ratios(List<List<Result>> rounds, String phase, String first, String peer) {
        List<Double> out = new ArrayList<>();
        for (List<Result> round : rounds) {
            Result a = find(round, phase, first), b = find(round, phase, peer);
            if (a != null && b != null && b.rate() > 0) {
                out.add(a.rate() / b.rate());
            }
        }
        return out.stream().mapToDouble(Double::doubleValue).toArray();
    }

    /** A phase as the tables name it: {@code insert-16KiB x2}. */
    private static String key(Result r) {
        return r.threads() == 1 ? r.phase() : r.phase() + " x" + r.threads();
    }

    private static Result find(List<Result> round, String phase, String target) {
        return round.stream().filter(r -> r.target().equals(target) && key(r).equals(phase)).findFirst().orElse(null);
    }

    private static String fixed(double v) {
        return String.format(Locale.ROOT, "%.2f", v);
    }
}
