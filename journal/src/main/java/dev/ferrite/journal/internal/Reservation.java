package dev.ferrite.journal.internal;

import dev.ferrite.io.InvalidArgumentException;

/**
 * How much log space a transaction reserves: room for {@code items} log items (each counted at its worst
 * case, a whole block scattered into the most ranges) and, for a permanent reservation, for {@code count}
 * transactions rolled one after another on the same ticket ({@link Transaction#roll()}).
 *
 * @param items most distinct items one transaction of this reservation logs
 * @param count 1 for a one-shot reservation; more for a permanent one that is regranted on each roll
 */
public record Reservation(int items, int count) {
    public Reservation {
        if (items < 1) {
            throw new InvalidArgumentException("a reservation must cover at least one item, not " + items);
        }
        if (count < 1) {
            throw new InvalidArgumentException("a reservation count must be at least 1, not " + count);
        }
    }

    /** One-shot: one transaction logging at most {@code items} items. */
    public static Reservation items(int items) {
        return new Reservation(items, 1);
    }

    /** Permanent: {@code count} rolled transactions, each logging at most {@code items} items. */
    public static Reservation permanent(int items, int count) {
        return new Reservation(items, count);
    }

    boolean isPermanent() {
        return count > 1;
    }
}
