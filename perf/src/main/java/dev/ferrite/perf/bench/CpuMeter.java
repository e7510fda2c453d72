package dev.ferrite.perf.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * How busy the whole machine was over a phase, in CPUs: the busy share of every CPU's time in
 * {@code /proc/stat} (user, nice, system, irq, softirq; not idle, iowait or steal) times the CPU count.
 * Machine-wide on purpose: it counts the kernel threads and helper processes a target uses (a kernel
 * filesystem's writeback, fio) as well as the JVM's own threads, so that targets compare on the same
 * terms — and a reading near the CPU count says the phase was CPU-bound on this machine.
 */
final class CpuMeter {
    private static final Path STAT = Path.of("/proc/stat");

    /** Cumulative busy and total jiffies of all CPUs, or both -1 where {@code /proc/stat} cannot be read. */
    record Sample(long busy, long total) {
    }

    private CpuMeter() {
    }

    static Sample sample() {
        try (var lines = Files.lines(STAT)) {
            String cpu = lines.filter(l -> l.startsWith("cpu ")).findFirst().orElse(null);
            if (cpu == null) {
                return new Sample(-1, -1);
            }
            String[] f = cpu.trim().split("\\s+");
            long busy = 0, total = 0;
            for (int i = 1; i < f.length && i <= 8; i++) {
                long v = Long.parseLong(f[i]);
                total += v;
                if (i != 4 && i != 5 && i != 8) { // idle, iowait, steal
                    busy += v;
                }
            }
            return new Sample(busy, total);
        } catch (IOException | RuntimeException e) {
            return new Sample(-1, -1);
        }
    }

    /** CPUs busy on average between two samples; NaN if either is unknown or no time passed. */
    static double busyCpus(Sample from, Sample to, int cpus) {
        long total = to.total() - from.total();
        if (from.total() < 0 || to.total() < 0 || total <= 0) {
            return Double.NaN;
        }
        return (double) (to.busy() - from.busy()) / total * cpus;
    }

    /** CPUs busy on average since {@code from}. */
    static double busyCpusSince(Sample from) {
        return busyCpus(from, sample(), Runtime.getRuntime().availableProcessors());
    }
}
