package dev.ferrite.perf;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import dev.ferrite.perf.bench.MetaApi;
import dev.ferrite.perf.bench.MetaBench;
import dev.ferrite.perf.bench.MetaStores;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/**
 * The {@code --targets} of the metadata workloads: {@code ferrite} (a volume on a file in the run's
 * directory) and {@code posix} or {@code posix:DIR} (a new directory in the run's directory, or in DIR
 * — put DIR on the filesystem to compare against, e.g. an XFS mount), and {@code memory} (the ceiling: a
 * namespace in the heap, nothing durable), all driven through one {@link MetaApi}.
 */
final class MetaTargets {
    private MetaTargets() {
    }

    static List<MetaBench.Target> parse(CommandSpec spec, List<String> specs, Path runDir, long cacheBytes, MetaApi api) {
        List<MetaBench.Target> targets = new ArrayList<>();
        Set<String> labels = new HashSet<>();
        for (String s : specs) {
            MetaBench.Target t;
            if (s.equals("ferrite")) {
                t = MetaStores.ferrite(runDir, cacheBytes, api);
            } else if (s.equals("memory")) {
                t = MetaStores.memory(api);
            } else if (s.equals("posix")) {
                t = MetaStores.posix(runDir, "posix", api);
            } else if (s.startsWith("posix:") && s.length() > "posix:".length()) {
                Path dir = Path.of(s.substring("posix:".length()));
                if (!Files.isDirectory(dir) || !Files.isWritable(dir)) {
                    throw new ParameterException(spec.commandLine(), "--targets " + s + ": " + dir
                            + " is not a writable directory");
                }
                t = MetaStores.posix(dir, s, api);
            } else {
                throw new ParameterException(spec.commandLine(), "--targets: unknown target '" + s
                        + "'; give ferrite, posix, posix:DIR or memory");
            }
            if (!labels.add(t.label())) {
                throw new ParameterException(spec.commandLine(), "--targets names " + t.label() + " twice");
            }
            targets.add(t);
        }
        return targets;
    }
}
