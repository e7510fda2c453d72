/**
 * dir: the namespace (volumes, allocation groups, inodes, directories, files). Not written yet: this
 * package is empty until its issue lands, and nothing here claims to work.
 */
package dev.ferrite.dir;
