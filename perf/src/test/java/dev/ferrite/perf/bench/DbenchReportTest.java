package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import dev.ferrite.perf.bench.DbenchLoadfile.Kind;
import dev.ferrite.perf.bench.DbenchResult.OpRow;

import org.junit.jupiter.api.Test;

class DbenchReportTest {
    @Test
    void putsTargetsSideBySidePerClientCount() {
        DbenchResult ferrite = new DbenchResult("ferrite", 2, 900, 4.5,
                List.of(new OpRow(Kind.NTCREATEX, 1000, 0.0125, 2.5, 0.75), new OpRow(Kind.FLUSH, 50, 0.5, 4.5, 4.25)),
                0, List.of(), 1.5);
        DbenchResult xfs = new DbenchResult("xfs", 2, 600, 9.0,
                List.of(new OpRow(Kind.NTCREATEX, 800, 0.02, 3.0, Double.NaN), new OpRow(Kind.READX, 4000, 0.001, 0.5, Double.NaN),
                        new OpRow(Kind.FLUSH, 40, 0.25, 9.0, Double.NaN)),
                -1, List.of(), Double.NaN);
        assertEquals("""

                dbench, 2 clients  ferrite     xfs
                throughput MB/s     900.00  600.00
                ferrite / this        1.00    1.50
                max latency ms       4.500   9.000
                busy CPUs             1.50       -
                CPU µs per op       2857.1       -
                status mismatches        0       -

                latencies in ms
                           ferrite                           xfs
                Operation    Count  AvgLat  MaxLat  p99.9  Count  AvgLat  MaxLat
                NTCreateX     1000   0.013   2.500  0.750    800   0.020   3.000
                ReadX            -       -       -      -   4000   0.001   0.500
                Flush           50   0.500   4.500  4.250     40   0.250   9.000
                """, DbenchReport.render(List.of(xfs, ferrite), List.of("ferrite", "xfs"), 2));
    }
}
