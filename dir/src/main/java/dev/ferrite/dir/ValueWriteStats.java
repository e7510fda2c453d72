package dev.ferrite.dir;

/**
 * The device writes of table values kept out of line in extents since mount. A put caches such a value
 * and leaves its write to later ({@code TableExtentWriteBack}): the log writes the values pending before
 * each checkpoint, a thread of the volume's writes them in the background once a quarter of their budget
 * is pending, and a put that finds the budget spent writes them itself. Values adjacent on the device go
 * in one write; those whose cached blocks are scattered are copied into a staging buffer first. The bytes
 * over the time spent in the writes is the rate the device took them at, as the writing threads saw it
 * (a thread preempted inside a write counts that time too).
 *
 * @param written      values written
 * @param inBackground of those, by the background thread
 * @param atBudget     of those, by puts that found the budget spent
 * @param writes       device writes that wrote them
 * @param blocksCopied blocks copied into the staging buffer for those writes
 * @param bytes        bytes those writes wrote (whole blocks)
 * @param writeNanos   time spent in those writes, summed over the threads that made them
 */
public record ValueWriteStats(long written, long inBackground, long atBudget, long writes, long blocksCopied, long bytes, long writeNanos) {
}
