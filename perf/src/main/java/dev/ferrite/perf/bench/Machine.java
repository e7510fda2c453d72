package dev.ferrite.perf.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.OffsetDateTime;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

import com.sun.management.HotSpotDiagnosticMXBean;

/**
 * Where a run happened, written beside its results so that numbers from different machines, kernels
 * and filesystems are never compared by accident.
 *
 * @param storage the file or device under test, or null for a workload that has none
 */
public record Machine(String hostname, int cpus, long memoryBytes, String kernel, String cpuModel, String jdk,
                      String date, Storage storage) {

    /** This machine, now. */
    public static Machine collect(Storage storage) {
        long memory = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getTotalMemorySize();
        return new Machine(
                firstLine(Path.of("/proc/sys/kernel/hostname")).orElse("unknown"),
                Runtime.getRuntime().availableProcessors(),
                memory,
                System.getProperty("os.name") + " " + System.getProperty("os.version") + " " + System.getProperty("os.arch"),
                readCpuModel(),
                Runtime.version() + " (" + System.getProperty("java.vm.vendor") + " " + System.getProperty("java.vm.name") + "), " + jvm(),
                OffsetDateTime.now().truncatedTo(ChronoUnit.SECONDS).toString(),
                storage);
    }

    /**
     * The collector and heap this JVM runs with, and the {@code -X}/{@code -XX} flags it was given: what
     * sets the "GC pauses" column and the max latencies of a run ({@code G1, heap 380-6,028 MiB, flags none}).
     */
    public static String jvm() {
        Runtime rt = Runtime.getRuntime();
        List<String> flags = ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> a.startsWith("-X") && !a.startsWith("-Xlog")).toList();
        return String.format(Locale.ROOT, "%s, heap %,d-%,d MiB, flags %s", collector(),
                ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getInit() >> 20, rt.maxMemory() >> 20,
                flags.isEmpty() ? "none" : String.join(" ", flags));
    }

    /** The collector by the flag that chose it (a JVM without one of them leaves it out). */
    static String collector() {
        HotSpotDiagnosticMXBean vm = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        String[][] collectors = {{"UseG1GC", "G1"}, {"UseZGC", "ZGC"}, {"UseShenandoahGC", "Shenandoah"},
                {"UseParallelGC", "Parallel"}, {"UseSerialGC", "Serial"}, {"UseEpsilonGC", "Epsilon"}};
        for (String[] c : collectors) {
            if (option(vm, c[0]).equals("true")) {
                return c[1].equals("Shenandoah") ? "Shenandoah (" + option(vm, "ShenandoahGCMode") + ")" : c[1];
            }
        }
        return "unknown";
    }

    private static String option(HotSpotDiagnosticMXBean vm, String name) {
        try {
            return vm.getVMOption(name).getValue();
        } catch (IllegalArgumentException absent) {
            return "";
        }
    }

    private static String readCpuModel() {
        // x86 names the model; AArch64 kernels only give implementer/part numbers.
        try (var lines = Files.lines(Path.of("/proc/cpuinfo"))) {
            return lines.filter(l -> l.startsWith("model name") || l.startsWith("CPU part"))
                    .map(l -> l.substring(l.indexOf(':') + 1).strip())
                    .findFirst()
                    .orElse("unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static Optional<String> firstLine(Path file) {
        try {
            return Optional.of(Files.readString(file).strip()).filter(s -> !s.isEmpty());
        } catch (IOException e) {
            return Optional.empty();
        }
    }
}
