package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A directory of the host's kernel filesystem, driven through directory descriptors
 * ({@link PosixHandleSession}, {@link MetaApi#HANDLE}) or through {@code java.nio.file} paths, the calls a
 * Java program would make ({@link MetaApi#PATH}). Durability: {@code sync -f} on the directory (syncfs(2): the filesystem's log
 * forced once, as fs_mark's sync does). Cold cache: after a sync, {@code /proc/sys/vm/drop_caches} is
 * written with 3 (dentries, inodes, page cache), which needs root; without it the walk runs warm and the
 * report says so. The store is a new directory, deleted with its contents on close.
 */
final class PosixMeta implements MetaStore {
    private static final Path DROP_CACHES = Path.of("/proc/sys/vm/drop_caches");

    private final ScratchFile scratch;
    private final Path root;
    private final Storage storage;
    private final MetaApi api;

    private PosixMeta(ScratchFile scratch, MetaApi api) {
        this.scratch = scratch;
        this.root = scratch.path();
        this.storage = Storage.of(root);
        this.api = api;
    }

    /**
     * A store in a new directory under {@code base}, driven through {@code api}, deleted with everything in
     * it on {@link #close()}.
     */
    static PosixMeta in(Path base, MetaApi api) {
        return new PosixMeta(ScratchFile.directory(base, "ferrite-posix-"), api);
    }

    @Override
    public String describe() {
        return root + " (" + storage.describe() + "), " + (api == MetaApi.HANDLE
                ? "directory descriptors (openat, fstatat, unlinkat, getdents64)" : "java.nio.file paths")
                + "; sync -f at phase end";
    }

    @Override
    public Session session() {
        return api == MetaApi.HANDLE ? new PosixHandleSession(root) : new PathSession();
    }

    @Override
    public void sync() {
        run("sync", "-f", root.toString());
    }

    @Override
    public String coldCache() {
        sync();
        if (!Files.isWritable(DROP_CACHES)) {
            return "warm: " + DROP_CACHES + " is not writable (run as root for a cold walk)";
        }
        try {
            Files.writeString(DROP_CACHES, "3");
        } catch (IOException e) {
            return "warm: writing " + DROP_CACHES + " failed: " + e.getMessage();
        }
        return "kernel dentry, inode and page caches dropped";
    }

    @Override
    public void check() {
        // The kernel filesystem's own checker needs it unmounted; the workload checks what it sees instead.
    }

    @Override
    public void close() {
        scratch.close();
    }

    private static void run(String... command) {
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IllegalStateException(String.join(" ", command) + " failed: " + out.strip());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(String.join(" ", command) + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted waiting for " + String.join(" ", command), e);
        }
    }

    private final class PathSession implements Session {
        @Override
        public void mkdir(String dir) {
            try {
                Files.createDirectory(root.resolve(dir));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void create(String dir, String name) {
            try {
                Files.createFile(root.resolve(dir).resolve(name));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public long list(String dir, Consumer<String> names) {
            long n = 0;
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(root.resolve(dir))) {
                for (Path p : entries) {
                    names.accept(p.getFileName().toString());
                    n++;
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return n;
        }

        @Override
        public long stat(String dir, String name) {
            try {
                return Files.readAttributes(root.resolve(dir).resolve(name), BasicFileAttributes.class,
                        LinkOption.NOFOLLOW_LINKS).size();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void unlink(String dir, String name) {
            try {
                Files.delete(root.resolve(dir).resolve(name));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void rmdir(String dir) {
            try {
                Files.delete(root.resolve(dir));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() {
        }
    }
}
