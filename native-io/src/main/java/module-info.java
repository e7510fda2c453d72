/**
 * Block devices for Ferrite: what an application opens and hands to a volume ({@code DirectDevice},
 * {@code MappedDevice}, {@code MemoryDevice}, {@code OverlayDevice}, their options) and the exceptions
 * every Ferrite module throws. The off-heap and on-disk helpers the layers above share are exported to
 * them alone; the FFM downcalls ({@code dev.ferrite.io.sys}) stay inside this module.
 */
@SuppressWarnings("module") // the modules named in "exports ... to" are built after this one
module dev.ferrite.io {
    requires org.jctools.core;

    exports dev.ferrite.io;
    exports dev.ferrite.io.internal to dev.ferrite.journal, dev.ferrite.btree, dev.ferrite.dir;
}
