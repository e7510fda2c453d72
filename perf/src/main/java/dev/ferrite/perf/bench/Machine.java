package dev.ferrite.perf.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.OffsetDateTime;
import java.time.temporal.ChronoUnit;
import java.util.Optional;

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
                Runtime.version() + " (" + System.getProperty("java.vm.vendor") + " " + System.getProperty("java.vm.name") + ")",
                OffsetDateTime.now().truncatedTo(ChronoUnit.SECONDS).toString(),
                storage);
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
