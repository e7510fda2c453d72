package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

/**
 * What a benchmark's data lives on, for the reader of its results: the path, the filesystem type
 * ({@code ext4}, {@code xfs}, {@code tmpfs}, or {@code block device} for a raw device) and where that
 * filesystem comes from ({@code /dev/vda}, {@code tmpfs}, ...).
 */
public record Storage(String path, String filesystem, String source) {
    /** The {@link #filesystem()} of a raw block device. */
    public static final String BLOCK_DEVICE = "block device";
    private static final int S_IFMT = 0xF000;
    private static final int S_IFBLK = 0x6000;

    /** Describes {@code path}, or the filesystem it would be created on if it does not exist yet. */
    public static Storage of(Path path) {
        Path abs = path.toAbsolutePath().normalize();
        try {
            if (Files.exists(abs) && isBlockDevice(abs)) {
                return new Storage(abs.toString(), BLOCK_DEVICE, abs.toString());
            }
            Path existing = abs;
            while (!Files.exists(existing)) {
                existing = existing.getParent();
            }
            FileStore store = Files.getFileStore(existing);
            return new Storage(abs.toString(), store.type(), store.name());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot inspect the filesystem of " + abs + ": " + e.getMessage(), e);
        }
    }

    private static boolean isBlockDevice(Path path) throws IOException {
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        return (mode & S_IFMT) == S_IFBLK;
    }

    public boolean isBlockDevice() {
        return filesystem.equals(BLOCK_DEVICE);
    }

    /** {@code ext4 on /dev/vda}, or {@code block device}. */
    public String describe() {
        return source.equals(path) || source.equals(filesystem) ? filesystem : filesystem + " on " + source;
    }
}
