package dev.ferrite.dir;

import java.nio.file.Path;

/**
 * Serves a volume as a file system: the service {@link Volume#mount} finds with {@link java.util.ServiceLoader}
 * (module {@code dev.ferrite.fuse} provides it through FUSE), so that this module depends on no FUSE binding.
 */
public interface FileSystemProvider {
    /**
     * Mounts {@code volume}'s namespace on directory {@code mountPoint} and returns once the kernel shows it there.
     *
     * @param source   what the mount table names as the file system's source: the volume's device
     * @param readOnly the file system refuses every change (EROFS)
     * @throws dev.ferrite.io.InvalidArgumentException if {@code mountPoint} is not a directory
     * @throws java.io.UncheckedIOException if the kernel refuses the mount
     */
    FileSystemMount mount(Volume volume, String source, Path mountPoint, boolean readOnly);
}
