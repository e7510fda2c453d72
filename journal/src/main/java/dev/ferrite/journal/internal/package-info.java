/**
 * The write-ahead log itself (DESIGN section 4), exported only to the layers above (btree, dir).
 *
 * <p>Face to the layers above: {@link Journal} (format, open with recovery, begin, force,
 * quiesce, close), {@link Transaction}, {@link LogItem} (what
 * higher layers implement), {@link Replayer} and {@link ReplayItem}
 * (recovery callbacks), {@link Lsn}, {@link Reservation}, and the
 * two exceptions the journal itself raises: {@link dev.ferrite.journal.VolumeShutdownException} (it shut
 * down after an error, every later call fails) and {@link dev.ferrite.journal.ReservationExceededException}.
 *
 * <p>Invariants:
 * <ul>
 *   <li>Log space is reserved before a transaction changes anything; the write grant head never passes
 *       the anchored tail by more than the log; the uncontended reservation path is one CAS per head.
 *   <li>A commit copies dirty ranges into the CIL without a global lock; each checkpoint carries each
 *       item once, with every change since the item was last written home.
 *   <li>A checkpoint is durable only when all its records are written and flushed; checkpoints are
 *       written one after another, each flushed before the next.
 *   <li>An item is pinned from commit until its checkpoint is in the AIL, and never written home while
 *       pinned; the tail moves only after write-back is flushed and the new tail is anchored on disk.
 *   <li>Recovery replays complete checkpoints from the anchored tail, skipping items whose home block
 *       is newer, and refuses a log damaged before its end.
 * </ul>
 */
package dev.ferrite.journal.internal;

import dev.ferrite.journal.VolumeShutdownException;
