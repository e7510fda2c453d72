/**
 * journal: Ferrite's XFS-style write-ahead log (DESIGN section 4). What an application sees of it:
 * {@link dev.ferrite.journal.JournalOptions} (its knobs, part of a volume's options),
 * {@link dev.ferrite.journal.JournalStats} (its figures), and the two exceptions the journal raises:
 * {@link dev.ferrite.journal.VolumeShutdownException} (it shut down after an error; every later call
 * fails) and {@link dev.ferrite.journal.ReservationExceededException}. The log lives in {@code dev.ferrite.journal.internal},
 * exported only to the modules built on it.
 */
package dev.ferrite.journal;
