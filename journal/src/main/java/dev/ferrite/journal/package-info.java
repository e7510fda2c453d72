/**
 * journal: the XFS-style write-ahead log (grant heads, transactions, delayed logging, checkpoints,
 * Disruptor-fed AIL, recovery). Not written yet: this package is empty until its issue lands, and
 * nothing here claims to work.
 */
package dev.ferrite.journal;
