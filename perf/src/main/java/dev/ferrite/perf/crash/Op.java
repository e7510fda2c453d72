package dev.ferrite.perf.crash;

import java.util.List;

import dev.ferrite.dir.Durability;

/**
 * One step of a crash-test workload, on paths relative to its lane's directory. Printed as a short
 * command line ({@code write A/foo 4096+8192}) so that a failure's workload reads as a script.
 */
sealed interface Op {
    /** Whether the op asks for durability: fsync, fdatasync, a volume sync or a SYNC table commit. */
    default boolean persists() {
        return false;
    }

    record Mkdir(String path) implements Op {
        @Override
        public String toString() {
            return "mkdir " + path;
        }
    }

    record Create(String path) implements Op {
        @Override
        public String toString() {
            return "create " + path;
        }
    }

    /** Writes {@code length} bytes at {@code offset}; both multiples of 8, as every offset and size the workloads use. */
    record Write(String path, long offset, int length) implements Op {
        @Override
        public String toString() {
            return "write " + path + " " + offset + "+" + length;
        }
    }

    record Append(String path, int length) implements Op {
        @Override
        public String toString() {
            return "append " + path + " " + length;
        }
    }

    record Truncate(String path, long size) implements Op {
        @Override
        public String toString() {
            return "truncate " + path + " " + size;
        }
    }

    /** {@code mode} is 0 or Namespace's FALLOC_FL_* flags. */
    record Fallocate(String path, int mode, long offset, long length) implements Op {
        @Override
        public String toString() {
            return "fallocate " + path + " mode 0x" + Integer.toHexString(mode) + " " + offset + "+" + length;
        }
    }

    record Rename(String from, String to) implements Op {
        @Override
        public String toString() {
            return "rename " + from + " " + to;
        }
    }

    record Link(String existing, String path) implements Op {
        @Override
        public String toString() {
            return "link " + existing + " " + path;
        }
    }

    record Symlink(String target, String path) implements Op {
        @Override
        public String toString() {
            return "symlink " + target + " " + path;
        }
    }

    record Unlink(String path) implements Op {
        @Override
        public String toString() {
            return "unlink " + path;
        }
    }

    record Rmdir(String path) implements Op {
        @Override
        public String toString() {
            return "rmdir " + path;
        }
    }

    /** Sets the permission bits, the owner and the modification time (setattr; the access time left). */
    record Setattr(String path, int permissions, int uid, int gid, long mtimeNanos) implements Op {
        @Override
        public String toString() {
            return "setattr " + path + " " + Integer.toOctalString(permissions) + " " + uid + ":" + gid + " mtime " + mtimeNanos;
        }
    }

    record Fsync(String path) implements Op {
        @Override
        public boolean persists() {
            return true;
        }

        @Override
        public String toString() {
            return "fsync " + path;
        }
    }

    record Fdatasync(String path) implements Op {
        @Override
        public boolean persists() {
            return true;
        }

        @Override
        public String toString() {
            return "fdatasync " + path;
        }
    }

    /** Volume.sync. */
    record Sync() implements Op {
        @Override
        public boolean persists() {
            return true;
        }

        @Override
        public String toString() {
            return "sync";
        }
    }

    /**
     * One table transaction over the lane's keys of table {@link Lane#TABLE}: each change puts a value of
     * {@code length} bytes, or deletes with length -1.
     */
    record Txn(List<Change> changes, Durability durability) implements Op {
        public Txn {
            changes = List.copyOf(changes);
        }

        @Override
        public boolean persists() {
            return durability == Durability.SYNC;
        }

        @Override
        public String toString() {
            StringBuilder s = new StringBuilder("txn ").append(durability.name().toLowerCase(java.util.Locale.ROOT));
            for (Change c : changes) {
                s.append(c.length < 0 ? " del " + c.key : " put " + c.key + "=" + c.length);
            }
            return s.toString();
        }
    }

    record Change(String key, int length) {
    }
}
