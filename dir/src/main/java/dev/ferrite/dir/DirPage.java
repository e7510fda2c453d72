package dev.ferrite.dir;

import java.util.List;

/**
 * A page of readdir results.
 *
 * @param entries up to the number asked for, in key order
 * @param next    where to resume
 * @param end     true if the directory holds nothing after these
 */
public record DirPage(List<DirEntry> entries, DirCookie next, boolean end) {
}
