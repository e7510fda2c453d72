/**
 * fuse: a volume's namespace as a FUSE file system ({@code ./ferrite mount}, {@link dev.ferrite.dir.Volume#mount}).
 * {@code FerriteFileSystem} answers libfuse's high-level (path) operations from the {@link dev.ferrite.dir.Namespace},
 * each with the errno the namespace gives; {@code OpenFiles} keeps the {@link dev.ferrite.dir.Handle} of every
 * open file and directory between open and release, so reads, writes and syncs never resolve a path;
 * {@code JfuseNative} holds this module's only FFM code (the {@code stat}/{@code statvfs} fields jfuse does not
 * set, and the operations it does not bind); {@code FuseFileSystemProvider} mounts and unmounts. See docs/mount.md.
 */
package dev.ferrite.fuse;
