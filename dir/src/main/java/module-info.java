/**
 * Ferrite's volume: format and open a volume on a block device, and work with its namespace through
 * paths or handles. Requiring this module gives an application the devices and exceptions
 * ({@code dev.ferrite.io}) and the option and figure types of the layers below, nothing of their insides.
 * {@link dev.ferrite.dir.Volume#mount} serves a volume as a file system through a
 * {@link dev.ferrite.dir.FileSystemProvider} from another module ({@code dev.ferrite.fuse}).
 */
module dev.ferrite.dir {
    requires transitive dev.ferrite.btree;

    exports dev.ferrite.dir;

    uses dev.ferrite.dir.FileSystemProvider;
}
