package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.ToDoubleFunction;

/**
 * Several rounds of the same dbench runs summed up per client count. A run's max latency is one
 * operation out of millions, set as much by what else the machine ran in that instant as by the target,
 * so one round decides little on a shared host: this gives each target's median and worst over the
 * rounds, and in how many rounds it had the lowest max latency of all targets, beside its median
 * throughput.
 */
public final class DbenchRounds {
    private DbenchRounds() {
    }

    /**
     * @param rounds  each round's results, in round order
     * @param targets the targets in column order
     * @return one table per client count any round ran; empty for no rounds
     */
    public static String render(List<List<DbenchResult>> rounds, List<String> targets) {
        StringBuilder sb = new StringBuilder();
        List<Integer> clientCounts = rounds.stream().flatMap(List::stream).map(DbenchResult::clients).distinct().sorted().toList();
        for (int c : clientCounts) {
            List<String[]> rows = new ArrayList<>();
            List<String> head = new ArrayList<>(List.of("dbench over " + rounds.size() + " rounds, " + c + (c == 1 ? " client" : " clients")));
            head.addAll(targets);
            rows.add(head.toArray(String[]::new));
            List<double[]> mb = new ArrayList<>();
            List<double[]> max = new ArrayList<>();
            for (String t : targets) {
                mb.add(each(rounds, t, c, DbenchResult::mbPerSec));
                max.add(each(rounds, t, c, DbenchResult::maxLatencyMs));
            }
            int[] lowest = lowestMaxLatency(rounds, targets, c);
            rows.add(row("throughput MB/s, median", mb, v -> fixed(median(v), 2)));
            rows.add(row("max latency ms, median", max, v -> fixed(median(v), 3)));
            rows.add(row("max latency ms, worst", max, v -> fixed(v.length == 0 ? Double.NaN : Arrays.stream(v).max().getAsDouble(), 3)));
            List<String> low = new ArrayList<>(List.of("lowest max latency, rounds"));
            for (int i = 0; i < targets.size(); i++) {
                low.add(lowest[i] + "/" + rounds.size());
            }
            rows.add(low.toArray(String[]::new));
            sb.append('\n').append(ResultTable.format(rows, 1));
        }
        return sb.toString();
    }

    /** For each target, the rounds in which its max latency at {@code clients} was below every other target's that ran. */
    static int[] lowestMaxLatency(List<List<DbenchResult>> rounds, List<String> targets, int clients) {
        int[] lowest = new int[targets.size()];
        for (List<DbenchResult> round : rounds) {
            int best = -1;
            double least = Double.POSITIVE_INFINITY;
            boolean tie = false;
            for (int i = 0; i < targets.size(); i++) {
                DbenchResult r = find(round, targets.get(i), clients);
                if (r == null) {
                    continue;
                }
                if (r.maxLatencyMs() < least) {
                    least = r.maxLatencyMs();
                    best = i;
                    tie = false;
                } else if (r.maxLatencyMs() == least) {
                    tie = true;
                }
            }
            if (best >= 0 && !tie) {
                lowest[best]++;
            }
        }
        return lowest;
    }

    /** The median of {@code v}: the mean of the two middle values for an even count; NaN for none. */
    static double median(double[] v) {
        if (v.length == 0) {
            return Double.NaN;
        }
        double[] s = v.clone();
        Arrays.sort(s);
        int m = s.length / 2;
        return s.length % 2 == 1 ? s[m] : (s[m - 1] + s[m]) / 2;
    }

    private static double[] each(List<List<DbenchResult>> rounds, String target, int clients,
                                 ToDoubleFunction<DbenchResult> value) {
        return rounds.stream().map(r -> find(r, target, clients)).filter(Objects::nonNull).mapToDouble(value).toArray();
    }

    private static DbenchResult find(List<DbenchResult> round, String target, int clients) {
        return round.stream().filter(r -> r.target().equals(target) && r.clients() == clients).findFirst().orElse(null);
    }

    private static String[] row(String label, List<double[]> values, Function<double[], String> cell) {
        List<String> cells = new ArrayList<>(List.of(label));
        values.forEach(v -> cells.add(cell.apply(v)));
        return cells.toArray(String[]::new);
    }

    private static String fixed(double v, int decimals) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, "%." + decimals + "f", v) : "-";
    }
}
