package dev.ferrite.perf;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * Keys and values as {@code ferrite table} reads and prints them. In: UTF-8 text, or with {@code --hex}
 * hex digits (two per byte, an optional {@code 0x} before them). Out: the text itself when the bytes are
 * printable UTF-8 (no control character, tab and newline included, and not starting with "0x"), else
 * {@code 0x} and hex digits; with {@code --hex} always hex digits, without the {@code 0x}, as they are given.
 */
final class TableText {
    private static final HexFormat HEX = HexFormat.of();

    private TableText() {
    }

    /** The bytes {@code text} stands for, as UTF-8 or with {@code hex} as hex digits; null if {@code hex} and they are not hex. */
    static byte[] parse(String text, boolean hex) {
        if (!hex) {
            return text.getBytes(StandardCharsets.UTF_8);
        }
        String digits = text.startsWith("0x") || text.startsWith("0X") ? text.substring(2) : text;
        if (digits.length() % 2 != 0) {
            return null;
        }
        try {
            return HEX.parseHex(digits);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /** {@code bytes} as printed: hex digits if {@code hex}, else the text when it is printable, else 0x and hex digits. */
    static String format(byte[] bytes, boolean hex) {
        if (hex) {
            return HEX.formatHex(bytes);
        }
        String text = printable(bytes);
        return text != null ? text : "0x" + HEX.formatHex(bytes);
    }

    /** {@code bytes} for a message: quoted text, or 0x and hex digits. */
    static String quote(byte[] bytes, boolean hex) {
        String text = hex ? null : printable(bytes);
        return text != null ? "'" + text + "'" : "0x" + HEX.formatHex(bytes);
    }

    /** {@code bytes} decoded, if they are valid UTF-8 with no control or unassigned character and do not read as hex; else null. */
    private static String printable(byte[] bytes) {
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
        if (text.startsWith("0x")) {
            return null;
        }
        return text.codePoints().allMatch(c -> !Character.isISOControl(c) && Character.isDefined(c)) ? text : null;
    }
}
