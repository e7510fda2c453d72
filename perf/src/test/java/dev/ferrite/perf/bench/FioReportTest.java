package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.ferrite.io.FerriteException;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;

/** Reads reports that fio 3.33 wrote with the options {@link Fio#run} passes. */
class FioReportTest {
    @Test
    void readsRateAndTotalLatencyOfRandomWrites() throws IOException {
        Fio.Stats s = Fio.Report.parse(resource("fio-randwrite.json"), "randwrite-qd32").io("write");
        assertEquals(new Fio.Stats(47841, 95491.017964, 391131209, 301.056, 831.488, Double.NaN, 5536.112), s,
                "a report made without 99.9 in its percentile list has none");
    }

    @Test
    void readsSyncLatencies() throws IOException {
        Fio.Stats s = Fio.Report.parse(resource("fio-fdatasync.json"), "fdatasync").sync();
        assertEquals(new Fio.Stats(1194, 1194 / 0.5, 0, 57.6, 3784.704, Double.NaN, 5081.779), s);
    }

    @Test
    void skipsNotesBeforeTheDocumentAndRejectsAJobWithoutTheSection() throws IOException {
        String json = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + resource("fio-randwrite.json");
        Fio.Report report = Fio.Report.parse(json, "randwrite-qd32");
        FerriteException e = assertThrows(FerriteException.class, () -> report.io("read"));
        assertEquals("fio did no reads in job randwrite-qd32", e.getMessage());
    }

    @Test
    void escapesColonsInFileNames() {
        assertEquals("/mnt/a\\:b/dev", Fio.filename(Path.of("/mnt/a:b/dev")));
    }

    private static String resource(String name) throws IOException {
        try (InputStream in = FioReportTest.class.getResourceAsStream(name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
