/**
 * Ferrite's volume: format and open a volume on a block device, and work with its namespace through
 * paths or handles. Requiring this module gives an application the devices and exceptions
 * ({@code dev.ferrite.io}) and the option and figure types of the layers below, nothing of their insides.
 */
module dev.ferrite.dir {
    requires transitive dev.ferrite.btree;

    exports dev.ferrite.dir;
}
