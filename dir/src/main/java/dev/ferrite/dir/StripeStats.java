package dev.ferrite.dir;

/**
 * How often writers of one key, or of one name, waited for each other since mount: the takings of a held
 * key stripe or name stripe that parked, and how long they stayed parked. A table's single writes and
 * write transactions hold their keys' stripes (a transaction all of them, until its journal group ends),
 * so two transactions that share a key, or only a stripe, apply one after the other; creates and unlinks
 * in a tree directory hold their name's.
 *
 * @param keyWaits      takings of a table key's stripe that waited for another writer
 * @param keyWaitNanos  the time they waited
 * @param nameWaits     takings of a directory name's stripe that waited for another create or unlink
 * @param nameWaitNanos the time they waited
 */
public record StripeStats(long keyWaits, long keyWaitNanos, long nameWaits, long nameWaitNanos) {
}
