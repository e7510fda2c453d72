package dev.ferrite.fuse;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The libfuse3 functions this module calls (its low-level API, as libfuse 3.14 exports them): the session's life
 * (new, mount, loop, exit, unmount, destroy; the multithreaded loop's config; the arguments' parsing) and the replies to requests. Each
 * wrapper turns a {@link Throwable} of the downcall, which cannot happen for these signatures, into an
 * {@link IllegalStateException}. The multithreaded loop is bound by its 3.12 name ({@code fuse_session_loop_mt_312},
 * the default version of {@code fuse_session_loop_mt}), which takes the opaque config made by {@code fuse_loop_cfg_create}.
 */
@SuppressWarnings("restricted")
final class Libfuse {
    private final MethodHandle sessionNew, optFreeArgs, sessionMount, sessionLoopMt, sessionExit, sessionUnmount, sessionDestroy;
    private final MethodHandle cfgCreate, cfgDestroy, cfgCloneFd, cfgMaxThreads;
    private final MethodHandle replyErr, replyNone, replyEntry, replyCreate, replyAttr, replyReadlink, replyOpen, replyWrite,
            replyBuf, replyStatfs, replyLseek, addDirentry, addDirentryPlus, reqCtx;

    /** Binds the library at {@code path}. */
    Libfuse(String path) {
        SymbolLookup lib = SymbolLookup.libraryLookup(Path.of(path), Arena.global());
        Linker linker = Linker.nativeLinker();
        Binder b = (name, fd) -> linker.downcallHandle(lib.findOrThrow(name), fd);
        sessionNew = b.bind("fuse_session_new", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
        optFreeArgs = b.bind("fuse_opt_free_args", FunctionDescriptor.ofVoid(ADDRESS));
        sessionMount = b.bind("fuse_session_mount", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        sessionLoopMt = b.bind("fuse_session_loop_mt_312", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        sessionExit = b.bind("fuse_session_exit", FunctionDescriptor.ofVoid(ADDRESS));
        sessionUnmount = b.bind("fuse_session_unmount", FunctionDescriptor.ofVoid(ADDRESS));
        sessionDestroy = b.bind("fuse_session_destroy", FunctionDescriptor.ofVoid(ADDRESS));
        cfgCreate = b.bind("fuse_loop_cfg_create", FunctionDescriptor.of(ADDRESS));
        cfgDestroy = b.bind("fuse_loop_cfg_destroy", FunctionDescriptor.ofVoid(ADDRESS));
        cfgCloneFd = b.bind("fuse_loop_cfg_set_clone_fd", FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT));
        cfgMaxThreads = b.bind("fuse_loop_cfg_set_max_threads", FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT));
        replyErr = b.bind("fuse_reply_err", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        replyNone = b.bind("fuse_reply_none", FunctionDescriptor.ofVoid(ADDRESS));
        replyEntry = b.bind("fuse_reply_entry", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        replyCreate = b.bind("fuse_reply_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        replyAttr = b.bind("fuse_reply_attr", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_DOUBLE));
        replyReadlink = b.bind("fuse_reply_readlink", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        replyOpen = b.bind("fuse_reply_open", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        replyWrite = b.bind("fuse_reply_write", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        replyBuf = b.bind("fuse_reply_buf", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG));
        replyStatfs = b.bind("fuse_reply_statfs", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        replyLseek = b.bind("fuse_reply_lseek", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        addDirentry = b.bind("fuse_add_direntry", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG));
        addDirentryPlus = b.bind("fuse_add_direntry_plus", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG));
        reqCtx = b.bind("fuse_req_ctx", FunctionDescriptor.of(ADDRESS, ADDRESS));
    }

    @FunctionalInterface
    private interface Binder {
        MethodHandle bind(String name, FunctionDescriptor fd);
    }

    private static IllegalStateException failed(String call, Throwable e) {
        return new IllegalStateException(call + ": " + e, e);
    }

    // ------------------------------------------------------------------ the session

    /** {@code fuse_session_new}: NULL if libfuse refuses the options (it prints why on stderr). */
    MemorySegment sessionNew(MemorySegment args, MemorySegment ops, MemorySegment userdata) {
        try {
            return (MemorySegment) sessionNew.invokeExact(args, ops, ops.byteSize(), userdata);
        } catch (Throwable e) {
            throw failed("fuse_session_new", e);
        }
    }

    /** {@code fuse_opt_free_args}: frees what libfuse allocated for {@code args} while parsing them. */
    void freeArgs(MemorySegment args) {
        try {
            optFreeArgs.invokeExact(args);
        } catch (Throwable e) {
            throw failed("fuse_opt_free_args", e);
        }
    }

    int sessionMount(MemorySegment se, MemorySegment mountPoint) {
        try {
            return (int) sessionMount.invokeExact(se, mountPoint);
        } catch (Throwable e) {
            throw failed("fuse_session_mount", e);
        }
    }

    /**
     * Serves requests until the session exits or the mount goes, by up to {@code threads} workers, each reading its own
     * cloned {@code /dev/fuse} descriptor (one worker serves requests one at a time, in the order the kernel queued them).
     */
    int sessionLoop(MemorySegment se, int threads) {
        try {
            MemorySegment cfg = (MemorySegment) cfgCreate.invokeExact();
            try {
                cfgCloneFd.invokeExact(cfg, 1);
                cfgMaxThreads.invokeExact(cfg, threads);
                return (int) sessionLoopMt.invokeExact(se, cfg);
            } finally {
                cfgDestroy.invokeExact(cfg);
            }
        } catch (Throwable e) {
            throw failed("fuse_session_loop", e);
        }
    }

    void sessionExit(MemorySegment se) {
        try {
            sessionExit.invokeExact(se);
        } catch (Throwable e) {
            throw failed("fuse_session_exit", e);
        }
    }

    void sessionUnmount(MemorySegment se) {
        try {
            sessionUnmount.invokeExact(se);
        } catch (Throwable e) {
            throw failed("fuse_session_unmount", e);
        }
    }

    void sessionDestroy(MemorySegment se) {
        try {
            sessionDestroy.invokeExact(se);
        } catch (Throwable e) {
            throw failed("fuse_session_destroy", e);
        }
    }

    // ------------------------------------------------------------------ replies (each returns libfuse's answer: 0 or -errno)

    int replyErr(MemorySegment req, int errno) {
        try {
            return (int) replyErr.invokeExact(req, errno);
        } catch (Throwable e) {
            throw failed("fuse_reply_err", e);
        }
    }

    void replyNone(MemorySegment req) {
        try {
            replyNone.invokeExact(req);
        } catch (Throwable e) {
            throw failed("fuse_reply_none", e);
        }
    }

    int replyEntry(MemorySegment req, MemorySegment entry) {
        try {
            return (int) replyEntry.invokeExact(req, entry);
        } catch (Throwable e) {
            throw failed("fuse_reply_entry", e);
        }
    }

    int replyCreate(MemorySegment req, MemorySegment entry, MemorySegment fi) {
        try {
            return (int) replyCreate.invokeExact(req, entry, fi);
        } catch (Throwable e) {
            throw failed("fuse_reply_create", e);
        }
    }

    int replyAttr(MemorySegment req, MemorySegment stat, double timeout) {
        try {
            return (int) replyAttr.invokeExact(req, stat, timeout);
        } catch (Throwable e) {
            throw failed("fuse_reply_attr", e);
        }
    }

    int replyReadlink(MemorySegment req, MemorySegment target) {
        try {
            return (int) replyReadlink.invokeExact(req, target);
        } catch (Throwable e) {
            throw failed("fuse_reply_readlink", e);
        }
    }

    int replyOpen(MemorySegment req, MemorySegment fi) {
        try {
            return (int) replyOpen.invokeExact(req, fi);
        } catch (Throwable e) {
            throw failed("fuse_reply_open", e);
        }
    }

    int replyWrite(MemorySegment req, long count) {
        try {
            return (int) replyWrite.invokeExact(req, count);
        } catch (Throwable e) {
            throw failed("fuse_reply_write", e);
        }
    }

    int replyBuf(MemorySegment req, MemorySegment buf, long size) {
        try {
            return (int) replyBuf.invokeExact(req, buf, size);
        } catch (Throwable e) {
            throw failed("fuse_reply_buf", e);
        }
    }

    int replyStatfs(MemorySegment req, MemorySegment statvfs) {
        try {
            return (int) replyStatfs.invokeExact(req, statvfs);
        } catch (Throwable e) {
            throw failed("fuse_reply_statfs", e);
        }
    }

    int replyLseek(MemorySegment req, long offset) {
        try {
            return (int) replyLseek.invokeExact(req, offset);
        } catch (Throwable e) {
            throw failed("fuse_reply_lseek", e);
        }
    }

    /**
     * {@code fuse_add_direntry}: adds the entry to {@code buf} (of {@code size} bytes) if it fits; returns the bytes it
     * takes either way. The kernel reads {@code st_ino} and the type bits of {@code st_mode} from {@code stat};
     * {@code next} is the offset of the entry after it.
     */
    long addDirentry(MemorySegment req, MemorySegment buf, long size, MemorySegment name, MemorySegment stat, long next) {
        try {
            return (long) addDirentry.invokeExact(req, buf, size, name, stat, next);
        } catch (Throwable e) {
            throw failed("fuse_add_direntry", e);
        }
    }

    /** {@code fuse_add_direntry_plus}: as {@link #addDirentry} with a whole entry (a lookup, when its {@code ino} is not 0). */
    long addDirentryPlus(MemorySegment req, MemorySegment buf, long size, MemorySegment name, MemorySegment entry, long next) {
        try {
            return (long) addDirentryPlus.invokeExact(req, buf, size, name, entry, next);
        } catch (Throwable e) {
            throw failed("fuse_add_direntry_plus", e);
        }
    }

    /** The request's {@code struct fuse_ctx} (the caller's uid and gid). */
    MemorySegment requestContext(MemorySegment req) {
        try {
            return ((MemorySegment) reqCtx.invokeExact(req)).reinterpret(LowLevelFormat.CTX.byteSize());
        } catch (Throwable e) {
            throw failed("fuse_req_ctx", e);
        }
    }
}
