package dev.ferrite.dir;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import dev.ferrite.io.Errno;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * A thread's entry-key buffers: the key a name makes, the buffers reused by the thread's next operation,
 * never shared by two operations at once (one running inside another gets its own), and bad names
 * refused as {@link PathResolver#requireName} refuses them.
 */
class EntryKeyTest {
    private static byte[] keyOf(EntryKey k) {
        return Arrays.copyOf(k.bytes(), k.length());
    }

    private static byte[] expected(String name) {
        return DirEntryFormat.key(name.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void aNameMakesItsDirectoryKey() {
        for (String name : new String[] {"a", "file-123", "ünïcødé", "x".repeat(255), "é".repeat(127), ".", "..", "a\u20acb"}) {
            try (EntryKey k = EntryKey.take(name, false)) {
                assertArrayEquals(expected(name), keyOf(k), name);
                assertEquals(k.length(), k.segment().byteSize());
                assertArrayEquals(expected(name), k.segment().toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            }
            assertArrayEquals(expected(name), keyOf(EntryKey.of(name.getBytes(StandardCharsets.UTF_8))), name);
        }
    }

    @Test
    void theThreadsNextOperationReusesTheBuffers() {
        EntryKey first;
        try (EntryKey k = EntryKey.take("one", true)) {
            first = k;
        }
        try (EntryKey k = EntryKey.take("two", true)) {
            assertSame(first, k);
            assertArrayEquals(expected("two"), keyOf(k));
            assertSame(k.value(5, InodeFormat.S_IFREG), k.value(6, InodeFormat.S_IFDIR));
        }
    }

    @Test
    void anOperationInsideAnotherGetsBuffersOfItsOwn() {
        try (EntryKey outer = EntryKey.take("outer-name", true)) {
            var value = outer.value(42, InodeFormat.S_IFREG);
            try (EntryKey inner = EntryKey.take("in", true)) {
                assertNotSame(outer, inner);
                assertNotSame(outer.stat(), inner.stat());
                inner.value(7, InodeFormat.S_IFDIR);
                assertArrayEquals(expected("in"), keyOf(inner));
            }
            assertArrayEquals(expected("outer-name"), keyOf(outer), "the inner operation left the outer key alone");
            assertEquals(42, DirEntryFormat.valueInode(value));
            assertEquals(InodeFormat.S_IFREG, DirEntryFormat.valueType(value));
            try (EntryKey again = EntryKey.take("again", true)) {
                assertNotSame(outer, again, "still owned by the outer operation");
            }
        }
    }

    @Test
    void badNamesAreRefusedAndLeaveTheBuffersFree() {
        String[] bad = {"", null, "a/b", "a\0b", ".", "..", "x".repeat(256), "é".repeat(128)};
        int[] errno = {Errno.EINVAL, Errno.EINVAL, Errno.EINVAL, Errno.EINVAL, Errno.EINVAL, Errno.EINVAL, Errno.ENAMETOOLONG,
                Errno.ENAMETOOLONG};
        EntryKey free;
        try (EntryKey k = EntryKey.take("free", true)) {
            free = k;
        }
        for (int i = 0; i < bad.length; i++) {
            String name = bad[i];
            assertEquals(errno[i], assertThrows(NamespaceException.class, () -> EntryKey.take(name, true)).errno(), String.valueOf(name));
            try (EntryKey k = EntryKey.take("ok", true)) {
                assertSame(free, k, "a refused name does not keep the thread's buffers");
            }
        }
    }
}
