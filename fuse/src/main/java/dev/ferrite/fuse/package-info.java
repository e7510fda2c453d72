/**
 * fuse: a volume's namespace as a FUSE file system ({@code ./ferrite mount}, {@link dev.ferrite.dir.Volume#mount}),
 * served through libfuse3's low-level (inode) API. {@code LowLevelServer} answers each request from the
 * {@link dev.ferrite.dir.Namespace} by handle, with the errno the namespace gives; {@code NodeTable} keeps a
 * {@link dev.ferrite.dir.Handle} per inode the kernel knows, with the kernel's lookup count; {@code Libfuse} binds
 * libfuse's calls and {@code LowLevelFormat} lays out its structs; {@code FuseFileSystemProvider} mounts and
 * unmounts. See docs/mount.md.
 */
package dev.ferrite.fuse;
