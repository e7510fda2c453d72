/**
 * A Ferrite volume served as a file system through FUSE ({@code libfuse3}, bound through the FFM API
 * by jfuse): {@link dev.ferrite.dir.Volume#mount} finds this module's
 * {@link dev.ferrite.dir.FileSystemProvider}. jfuse's Linux binding must be readable by reflection
 * (the class path, or {@code --add-opens} for its two packages): its {@code stat} wrapper has no inode number
 * and its operation table lacks link, mknod, fallocate and lseek, which this module fills in.
 */
module dev.ferrite.fuse {
    requires dev.ferrite.dir;
    requires org.cryptomator.jfuse;

    provides dev.ferrite.dir.FileSystemProvider with dev.ferrite.fuse.FuseFileSystemProvider;
}
