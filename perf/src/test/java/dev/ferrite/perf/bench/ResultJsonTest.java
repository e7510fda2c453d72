package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ResultJsonTest {
    private static final List<String> MACHINE_FIELDS =
            List.of("hostname", "cpus", "memory_bytes", "kernel", "cpu_model", "jdk", "date", "storage");
    private static final List<String> RESULT_FIELDS =
            List.of("workload", "phase", "target", "threads", "n", "rate", "unit", "p50_us", "p99_us", "p999_us", "max_us", "busy_cpus",
                    "gc_pauses", "gc_max_ms");

    @Test
    void writtenFileParsesBackWithEveryField(@TempDir Path dir) throws Exception {
        Machine machine = new Machine("host \"a\"\\b", 2, 25L << 30, "Linux 6.18 amd64", "Xeon\t(R)", "25+36",
                "2026-11-29T19:00:00Z", new Storage("/tmp/x.dev", "ext4", "/dev/vda"));
        List<Result> results = List.of(
                new Result("device", "randwrite-qd32", "ferrite/io_uring", 1, 123_456, 98_765.4321, "IOPS", 250.5, 598.25, 1_210.5, 4120, 1.75,
                        3, 12),
                new Result("device", "randwrite-qd32", "fio", 1, 130_000, 104_000, "IOPS", 244, 570, 1_020, Double.NaN, Double.NaN));
        Path file = dir.resolve("results.json");
        ResultJson.write(file, machine, results);

        Map<?, ?> root = (Map<?, ?>) JsonReader.parse(Files.readString(file));
        Map<?, ?> m = (Map<?, ?>) root.get("machine");
        assertEquals(MACHINE_FIELDS, List.copyOf(m.keySet()));
        assertEquals("host \"a\"\\b", m.get("hostname"));
        assertEquals(2L, m.get("cpus"));
        assertEquals(25L << 30, m.get("memory_bytes"));
        assertEquals("Xeon\t(R)", m.get("cpu_model"));
        assertEquals(Map.of("path", "/tmp/x.dev", "filesystem", "ext4", "source", "/dev/vda"), m.get("storage"));

        List<?> rows = (List<?>) root.get("results");
        assertEquals(2, rows.size());
        Map<?, ?> r = (Map<?, ?>) rows.getFirst();
        assertEquals(RESULT_FIELDS, List.copyOf(r.keySet()));
        assertEquals("device", r.get("workload"));
        assertEquals("randwrite-qd32", r.get("phase"));
        assertEquals("ferrite/io_uring", r.get("target"));
        assertEquals(1L, r.get("threads"));
        assertEquals(123_456L, r.get("n"));
        assertEquals(98_765.432, (Double) r.get("rate"), 1e-9);
        assertEquals("IOPS", r.get("unit"));
        assertEquals(250.5, (Double) r.get("p50_us"), 1e-9);
        assertEquals(598.25, (Double) r.get("p99_us"), 1e-9);
        assertEquals(4120.0, (Double) r.get("max_us"), 1e-9);
        assertEquals(1.75, (Double) r.get("busy_cpus"), 1e-9);
        assertEquals(3.0, (Double) r.get("gc_pauses"), 1e-9);
        assertEquals(12.0, (Double) r.get("gc_max_ms"), 1e-9);
        assertNull(((Map<?, ?>) rows.get(1)).get("gc_pauses"), "not measured: null");
        assertNull(((Map<?, ?>) rows.get(1)).get("max_us"), "a NaN is written as null");

        List<Result> back = ResultJson.read(Files.readString(file));
        assertEquals(new Result("device", "randwrite-qd32", "ferrite/io_uring", 1, 123_456, 98_765.432, "IOPS", 250.5, 598.25, 1_210.5,
                4120, 1.75, 3, 12), back.getFirst(), "read back, to the three decimals written");
        assertEquals(results.get(1), back.get(1), "NaN read back from null");
        assertEquals(machine, ResultJson.readMachine(Files.readString(file)));
    }

    @Test
    void machineWithoutStorageWritesNull() {
        Machine machine = Machine.collect(null);
        Map<?, ?> root = (Map<?, ?>) JsonReader.parse(ResultJson.format(machine, List.of()));
        Map<?, ?> m = (Map<?, ?>) root.get("machine");
        assertEquals(MACHINE_FIELDS, List.copyOf(m.keySet()));
        assertNull(m.get("storage"));
        assertEquals(List.of(), root.get("results"));
    }

    /** A run split into a JVM per target passes its skipped phases back too; a document without them has none. */
    @Test
    void skippedPhasesParseBack() {
        Machine machine = Machine.collect(null);
        List<Result> results = List.of(new Result("kv", "insert", "lmdb", 1, 10, 100, "ops/s", 1, 2, 2.5, 3, 1));
        List<Skipped> skipped = List.of(new Skipped("kv", "insert-1MiB", "lmdb", 2, "values \"over\" its page"),
                new Skipped("kv", "get-1MiB", "lmdb", 2, "no load"));
        String json = ResultJson.format(machine, results, skipped);
        assertEquals(results, ResultJson.read(json));
        assertEquals(skipped, ResultJson.readSkipped(json));
        assertEquals(List.of(), ResultJson.readSkipped(ResultJson.format(machine, results)));
        assertEquals(ResultJson.format(machine, results), ResultJson.format(machine, results, List.of()), "no skipped: no field");
    }
}
