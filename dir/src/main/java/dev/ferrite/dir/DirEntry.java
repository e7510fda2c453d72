package dev.ferrite.dir;

/**
 * One directory entry as readdir returns it.
 *
 * @param name the entry's name
 * @param ino  the inode it names
 * @param type the inode's type: the S_IFMT bits of its mode ({@link InodeStat#S_IFDIR} and so on)
 */
public record DirEntry(String name, long ino, int type) {
    public boolean isDirectory() {
        return type == InodeStat.S_IFDIR;
    }
}
