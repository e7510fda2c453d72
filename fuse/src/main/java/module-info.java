/**
 * A Ferrite volume served as a file system through FUSE: libfuse3's low-level API, bound through the FFM API
 * (the module needs native access: {@code --enable-native-access}). {@link dev.ferrite.dir.Volume#mount} finds
 * this module's {@link dev.ferrite.dir.FileSystemProvider}.
 */
module dev.ferrite.fuse {
    requires dev.ferrite.dir;

    provides dev.ferrite.dir.FileSystemProvider with dev.ferrite.fuse.FuseFileSystemProvider;
}
