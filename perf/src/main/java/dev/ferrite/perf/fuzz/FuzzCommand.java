package dev.ferrite.perf.fuzz;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "fuzz", mixinStandardHelpOptions = true, header = "Fuzzes mutated images for crashes, hangs and stray exceptions.",
        description = {
        "Hostile-image fuzzer: mutates a formatted, populated volume (superblock and",
        "mirror, group headers, B-tree nodes of every tree, inode and directory blocks,",
        "extent maps, tables, log records and anchor; bit flips with and without a",
        "recomputed checksum, hostile field values, zeroed, swapped and grafted blocks,",
        "truncation), then mounts, walks, reads, writes and checks each image in child",
        "JVMs with a time limit per case. A failure is a JDK exception escaping the API",
        "or a background thread, a JVM crash or a hang; each prints its recipe, a line",
        "for perf/src/test/resources/fuzz-corpus.txt. Exit status: 0 no failures, 1",
        "failures, 2 usage.", ""})
public final class FuzzCommand implements Callable<Integer> {
    @Option(names = "--cases", paramLabel = "N", description = "cases to run (default: 1000, or unlimited with --minutes)")
    Long cases;

    @Option(names = "--seed", paramLabel = "S", defaultValue = "1", description = "first case seed (default: ${DEFAULT-VALUE}); case i uses S + i")
    long seed;

    @Option(names = "--minutes", paramLabel = "M", description = "stop after M minutes")
    Double minutes;

    @Option(names = "--threads", paramLabel = "T", defaultValue = "1", description = "child JVMs at a time (default: ${DEFAULT-VALUE})")
    int threads;

    @Option(names = "--case-seconds", paramLabel = "S", defaultValue = "30",
            description = "a case with no answer after S seconds is a hang (default: ${DEFAULT-VALUE})")
    double caseSeconds;

    @Option(names = "--keep", paramLabel = "DIR", description = "write each failing case's image (case-HASH.img, named by its recipe's hash) and its recipe (failures.txt) here")
    Path keep;

    @Option(names = "--replay", paramLabel = "FILE", description = "run the recipes in FILE (one a line, # comments) instead of generated cases")
    Path replay;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        if (threads < 1 || threads > 64 || (cases != null && cases < 1) || (minutes != null && minutes <= 0) || caseSeconds <= 0) {
            throw new ParameterException(spec.commandLine(), "--threads must be 1..64, --cases, --minutes and --case-seconds positive");
        }
        PrintWriter out = spec.commandLine().getOut();
        Iterator<String> work;
        String what;
        long count;
        if (replay != null) {
            List<String> recipes = corpus(Files.readAllLines(replay, StandardCharsets.UTF_8));
            work = recipes.stream().map(r -> "run " + r).iterator();
            count = recipes.size();
            what = recipes.size() + " recipes from " + replay;
        } else {
            long n = cases != null ? cases : minutes != null ? Long.MAX_VALUE : 1000;
            count = n;
            work = new Iterator<>() {
                private long i;

                @Override
                public boolean hasNext() {
                    return i < n;
                }

                @Override
                public String next() {
                    return "gen " + (seed + i++);
                }
            };
            what = (n == Long.MAX_VALUE ? "cases" : n + " cases") + " from seed " + seed;
        }
        long start = System.nanoTime();
        long deadline = minutes == null ? start + TimeUnit.DAYS.toNanos(365) : start + (long) (minutes * 60e9);
        out.println("fuzz: " + what + ", " + threads + " child JVM" + (threads > 1 ? "s" : "") + ", " + caseSeconds + " s per case"
                + (minutes != null ? ", for " + minutes + " min" : ""));
        out.flush();
        AtomicLong done = new AtomicLong();
        List<FuzzRunner.Result> failures = new ArrayList<>();
        Map<String, Long> outcomes = new TreeMap<>();
        new FuzzRunner(threads, (long) (caseSeconds * 1000), count).run(work, deadline, r -> {
            long n = done.incrementAndGet();
            synchronized (out) {
                if (r.failed()) {
                    failures.add(r);
                    out.println("FAIL " + r.recipe() + "\n     " + r.outcome());
                    keep(r, out);
                } else {
                    outcomes.merge(summary(r.outcome()), 1L, Long::sum);
                }
                if (n % 100 == 0) {
                    double s = (System.nanoTime() - start) / 1e9;
                    out.printf("fuzz: %d cases, %.1f s, %.1f cases/s, %d failures%n", n, s, n / s, failures.size());
                }
                out.flush();
            }
        });
        double s = (System.nanoTime() - start) / 1e9;
        out.printf("fuzz: %d cases in %.1f s (%.1f cases/s), %d failures%n", done.get(), s, done.get() / s, failures.size());
        outcomes.forEach((k, v) -> out.println("  " + v + " " + k));
        out.flush();
        return failures.isEmpty() ? 0 : 1;
    }

    /** The recipes of a corpus file: its lines without comments and blanks. */
    static List<String> corpus(List<String> lines) {
        List<String> recipes = new ArrayList<>();
        for (String l : lines) {
            int hash = l.indexOf('#');
            String r = (hash >= 0 ? l.substring(0, hash) : l).strip();
            if (!r.isEmpty()) {
                recipes.add(r);
            }
        }
        return recipes;
    }

    /** An outcome's kind, for the summary: how the first mount answered and what the check found. */
    private static String summary(String outcome) {
        String first = outcome.split(";")[0].strip();
        return first.startsWith("mount refused") ? first : outcome.contains("problems") ? "answered with check problems"
                : "checked clean or answered with Ferrite exceptions";
    }

    private void keep(FuzzRunner.Result r, PrintWriter out) {
        if (keep == null) {
            return;
        }
        try {
            Files.createDirectories(keep);
            Files.writeString(keep.resolve("failures.txt"), r.recipe() + "  # " + r.outcome() + "\n", StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            Recipe recipe;
            try {
                recipe = Recipe.parse(r.recipe());
            } catch (IllegalArgumentException e) {
                return; // a selftest or a worker that never started: no image
            }
            BaseImage base = BaseImage.build(recipe.base());
            Path img = keep.resolve("case-" + Integer.toHexString(r.recipe().hashCode()) + ".img");
            try (BlockDevice dev = recipe.apply(base.device); MemoryDevice ignored = base.device) {
                writeImage(dev, img);
            }
            out.println("     kept " + img);
        } catch (IOException | RuntimeException e) {
            out.println("     could not keep the image: " + e.getMessage());
        }
    }

    private static void writeImage(BlockDevice dev, Path file) throws IOException {
        try (var arena = java.lang.foreign.Arena.ofConfined();
             var ch = java.nio.channels.FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                     StandardOpenOption.TRUNCATE_EXISTING)) {
            var b = arena.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            for (long blk = 0; blk < dev.blockCount(); blk++) {
                dev.read(blk, b);
                ch.write(b.asByteBuffer());
            }
        }
    }
}
