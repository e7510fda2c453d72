package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * A temporary file, or directory, for a benchmark to run on, deleted (a directory with everything in it)
 * by {@link #close()} or, if the JVM is stopped first (Ctrl-C, SIGTERM), by a shutdown hook: a gigabyte
 * left behind in /tmp per interrupted run adds up.
 */
public final class ScratchFile implements AutoCloseable {
    private final Path path;
    private final Thread deleteOnShutdown;

    private ScratchFile(Path path) {
        this.path = path;
        this.deleteOnShutdown = new Thread(this::delete, "ferrite-scratch-cleanup");
        Runtime.getRuntime().addShutdownHook(deleteOnShutdown);
    }

    /** Creates an empty file named {@code prefix}...{@code suffix} in {@code dir}. */
    public static ScratchFile create(Path dir, String prefix, String suffix) {
        try {
            return new ScratchFile(Files.createTempFile(dir, prefix, suffix));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary file in " + dir + ": " + e.getMessage(), e);
        }
    }

    /** Creates an empty directory named {@code prefix}... in {@code dir}. */
    public static ScratchFile directory(Path dir, String prefix) {
        try {
            return new ScratchFile(Files.createTempDirectory(dir, prefix));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary directory in " + dir + ": " + e.getMessage(), e);
        }
    }

    public Path path() {
        return path;
    }

    private void delete() {
        try {
            if (Files.isDirectory(path)) {
                List<Path> all;
                try (Stream<Path> walk = Files.walk(path)) {
                    all = walk.sorted(Comparator.reverseOrder()).toList(); // children before their directory
                }
                for (Path p : all) {
                    Files.deleteIfExists(p);
                }
            } else {
                Files.deleteIfExists(path);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot delete " + path + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        try {
            Runtime.getRuntime().removeShutdownHook(deleteOnShutdown);
        } catch (IllegalStateException shuttingDown) {
            return; // the hook is deleting it
        }
        delete();
    }
}
