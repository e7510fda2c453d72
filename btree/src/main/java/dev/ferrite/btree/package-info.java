/**
 * btree: the off-heap buffer cache and the concurrent B+tree logged through the journal. Not written
 * yet: this package is empty until its issue lands, and nothing here claims to work.
 */
package dev.ferrite.btree;
