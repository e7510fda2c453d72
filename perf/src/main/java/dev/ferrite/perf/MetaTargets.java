package dev.ferrite.perf;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import dev.ferrite.perf.bench.LoopDevice;
import dev.ferrite.perf.bench.MetaApi;
import dev.ferrite.perf.bench.MetaBench;
import dev.ferrite.perf.bench.MetaStores;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/**
 * The {@code --targets} of the metadata workloads: {@code ferrite} (a volume on a file in the run's
 * directory), {@code fuse} (a volume on a RAM-backed loop device, mounted through FUSE), {@code xfs}, {@code ext4} and {@code btrfs} (each made for the run on a RAM-backed loop
 * device of its own), {@code posix} or {@code posix:DIR} (a new directory in the run's directory, or in DIR
 * — put DIR on the filesystem to compare against, e.g. an XFS mount), and {@code memory} (the ceiling: a
 * namespace in the heap, nothing durable), all driven through one {@link MetaApi}.
 */
final class MetaTargets {
    private MetaTargets() {
    }

    /**
     * The targets when none are given: Ferrite, each kernel file system this process can make a loop
     * device for ({@code xfs}, {@code ext4}, {@code btrfs}: root, losetup and the mkfs), and the
     * {@code memory} ceiling; if it can make none, a directory in the host's temporary directory
     * ({@code java.io.tmpdir}, a real file system where the run's directory is tmpfs) instead.
     */
    static List<String> defaults() {
        List<String> out = new ArrayList<>(List.of("ferrite"));
        for (LoopDevice.Kind kind : List.of(LoopDevice.Kind.XFS, LoopDevice.Kind.EXT4, LoopDevice.Kind.BTRFS)) {
            if (LoopDevice.available(kind)) {
                out.add(kind.label());
            }
        }
        if (out.size() == 1) {
            out.add("posix:" + System.getProperty("java.io.tmpdir"));
        }
        out.add("memory");
        return out;
    }

    private static LoopDevice.Kind loopKind(String target) {
        return switch (target) {
            case "xfs" -> LoopDevice.Kind.XFS;
            case "ext4" -> LoopDevice.Kind.EXT4;
            case "btrfs" -> LoopDevice.Kind.BTRFS;
            default -> null;
        };
    }

    static List<MetaBench.Target> parse(CommandSpec spec, List<String> specs, Path runDir, long cacheBytes, MetaApi api) {
        List<MetaBench.Target> targets = new ArrayList<>();
        Set<String> labels = new HashSet<>();
        for (String s : specs) {
            MetaBench.Target t;
            if (s.equals("ferrite")) {
                t = MetaStores.ferrite(runDir, cacheBytes, api);
            } else if (s.equals("fuse")) {
                Optional<String> why = MetaStores.fuseUnavailable();
                if (why.isPresent()) {
                    throw new ParameterException(spec.commandLine(), "--targets fuse: " + why.get());
                }
                t = MetaStores.fuse(runDir, cacheBytes, api);
            } else if (s.equals("memory")) {
                t = MetaStores.memory(api);
            } else if (loopKind(s) != null) {
                LoopDevice.Kind kind = loopKind(s);
                Optional<String> why = LoopDevice.unavailable(kind);
                if (why.isPresent()) {
                    throw new ParameterException(spec.commandLine(), "--targets " + s + ": " + why.get());
                }
                t = MetaStores.loop(kind, runDir, api);
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
                        + "'; give ferrite, xfs, ext4, btrfs, posix, posix:DIR or memory");
            }
            if (!labels.add(t.label())) {
                throw new ParameterException(spec.commandLine(), "--targets names " + t.label() + " twice");
            }
            targets.add(t);
        }
        return targets;
    }
}
