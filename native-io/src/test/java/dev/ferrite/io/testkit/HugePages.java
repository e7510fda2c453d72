package dev.ferrite.io.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Transparent huge pages as this process sees them, for tests of memory meant to lie in them. */
public final class HugePages {
    private HugePages() {
    }

    /** True if the kernel gives huge pages to anonymous memory advised to take them (THP "always" or "madvise"). */
    public static boolean available() {
        try {
            return Files.readString(Path.of("/sys/kernel/mm/transparent_hugepage/enabled")).matches("(?s).*\\[(always|madvise)].*");
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * The kernel's count of faults that wanted a huge page and fell back to small pages (memory too
     * fragmented, or short), system-wide, from /proc/vmstat; 0 where it is not kept. A test whose memory
     * lies in fewer huge pages than it wanted, while this count rose, met the kernel's limit, not a bug.
     */
    public static long faultFallbacks() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/vmstat"))) {
                if (line.startsWith("thp_fault_fallback ")) {
                    return Long.parseLong(line.substring(line.indexOf(' ') + 1).trim());
                }
            }
            return 0;
        } catch (IOException e) {
            return 0;
        }
    }

    /** Kilobytes of anonymous huge pages in the mapping of this process that holds {@code address}, from /proc/self/smaps; 0 if none. */
    public static long kilobytesAt(long address) {
        try {
            boolean in = false;
            for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
                int dash = line.indexOf('-'), space = line.indexOf(' ');
                if (dash > 0 && space > dash && line.substring(0, dash).matches("[0-9a-f]+")) {
                    in = Long.compareUnsigned(Long.parseUnsignedLong(line.substring(0, dash), 16), address) <= 0
                            && Long.compareUnsigned(address, Long.parseUnsignedLong(line.substring(dash + 1, space), 16)) < 0;
                } else if (in && line.startsWith("AnonHugePages:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
            return 0;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
