package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON parser for reading tool output (fio's {@code --output-format=json}) and our own result
 * files back: objects become {@code Map<String, Object>} in document order, arrays {@code List<Object>},
 * numbers {@code Long} when integral and in range, else {@code Double}. Besides RFC 8259 it accepts the
 * bare {@code nan}, {@code -nan}, {@code inf} and {@code -inf} that C's {@code printf("%f")} writes for
 * empty statistics, because fio's JSON is made that way.
 */
public final class JsonReader {
    private final String text;
    private int pos;

    private JsonReader(String text) {
        this.text = text;
    }

    /** Parses one JSON value that makes up the whole of {@code text}. */
    public static Object parse(String text) {
        JsonReader r = new JsonReader(text);
        Object value = r.value();
        r.skipWhitespace();
        if (r.pos != text.length()) {
            throw r.error("unexpected '" + text.charAt(r.pos) + "' after the value");
        }
        return value;
    }

    /**
     * The value at {@code path} below {@code root}: strings index objects, integers index arrays.
     *
     * @throws IllegalArgumentException naming the path if any step is missing or of the wrong kind
     */
    public static Object at(Object root, Object... path) {
        Object v = root;
        for (int i = 0; i < path.length; i++) {
            Object step = path[i];
            if (step instanceof String key && v instanceof Map<?, ?> map && map.containsKey(key)) {
                v = map.get(key);
            } else if (step instanceof Integer index && v instanceof List<?> list && index >= 0 && index < list.size()) {
                v = list.get(index);
            } else {
                throw new IllegalArgumentException("no " + describe(path, i + 1) + " in the JSON document");
            }
        }
        return v;
    }

    /** The number at {@code path} below {@code root}. */
    public static double number(Object root, Object... path) {
        if (at(root, path) instanceof Number n) {
            return n.doubleValue();
        }
        throw new IllegalArgumentException(describe(path, path.length) + " in the JSON document is not a number");
    }

    private static String describe(Object[] path, int length) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < length; i++) {
            if (path[i] instanceof Integer index) {
                sb.append('[').append(index).append(']');
            } else {
                sb.append(i == 0 ? "" : ".").append(path[i]);
            }
        }
        return sb.toString();
    }

    private Object value() {
        skipWhitespace();
        if (pos >= text.length()) {
            throw error("unexpected end of input");
        }
        char c = text.charAt(pos);
        return switch (c) {
            case '{' -> object();
            case '[' -> array();
            case '"' -> string();
            case 't' -> literal("true", Boolean.TRUE);
            case 'f' -> literal("false", Boolean.FALSE);
            case 'n' -> text.startsWith("nan", pos) ? literal("nan", Double.NaN) : literal("null", null);
            case 'i' -> literal("inf", Double.POSITIVE_INFINITY);
            default -> {
                if (c == '-' || (c >= '0' && c <= '9')) {
                    yield number();
                }
                throw error("unexpected '" + c + "'");
            }
        };
    }

    private Map<String, Object> object() {
        Map<String, Object> map = new LinkedHashMap<>();
        pos++;
        skipWhitespace();
        if (peek() == '}') {
            pos++;
            return map;
        }
        while (true) {
            skipWhitespace();
            if (peek() != '"') {
                throw error("expected a string key");
            }
            String key = string();
            skipWhitespace();
            expect(':');
            map.put(key, value());
            skipWhitespace();
            if (peek() == ',') {
                pos++;
            } else {
                expect('}');
                return map;
            }
        }
    }

    private List<Object> array() {
        List<Object> list = new ArrayList<>();
        pos++;
        skipWhitespace();
        if (peek() == ']') {
            pos++;
            return list;
        }
        while (true) {
            list.add(value());
            skipWhitespace();
            if (peek() == ',') {
                pos++;
            } else {
                expect(']');
                return list;
            }
        }
    }

    private String string() {
        pos++;
        StringBuilder sb = new StringBuilder();
        while (true) {
            if (pos >= text.length()) {
                throw error("unterminated string");
            }
            char c = text.charAt(pos++);
            if (c == '"') {
                return sb.toString();
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            if (pos >= text.length()) {
                throw error("unterminated escape");
            }
            char e = text.charAt(pos++);
            switch (e) {
                case '"', '\\', '/' -> sb.append(e);
                case 'b' -> sb.append('\b');
                case 'f' -> sb.append('\f');
                case 'n' -> sb.append('\n');
                case 'r' -> sb.append('\r');
                case 't' -> sb.append('\t');
                case 'u' -> {
                    if (pos + 4 > text.length()) {
                        throw error("truncated \\u escape");
                    }
                    try {
                        sb.append((char) Integer.parseInt(text, pos, pos + 4, 16));
                    } catch (NumberFormatException ex) {
                        throw error("bad \\u escape");
                    }
                    pos += 4;
                }
                default -> throw error("bad escape '\\" + e + "'");
            }
        }
    }

    private Object number() {
        int start = pos;
        if (peek() == '-') {
            pos++;
            if (text.startsWith("nan", pos)) {
                return literal("nan", Double.NaN);
            }
            if (text.startsWith("inf", pos)) {
                return literal("inf", Double.NEGATIVE_INFINITY);
            }
        }
        boolean integral = true;
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c >= '0' && c <= '9') {
                pos++;
            } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                integral = false;
                pos++;
            } else {
                break;
            }
        }
        String s = text.substring(start, pos);
        try {
            if (integral) {
                try {
                    return Long.parseLong(s);
                } catch (NumberFormatException tooLarge) {
                    return Double.parseDouble(s);
                }
            }
            return Double.parseDouble(s);
        } catch (NumberFormatException e) {
            pos = start;
            throw error("bad number '" + s + "'");
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected '" + text.charAt(pos) + "'");
        }
        pos += word.length();
        return value;
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error(pos < text.length() ? "expected '" + c + "' but found '" + text.charAt(pos) + "'"
                    : "expected '" + c + "' but the input ended");
        }
        pos++;
    }

    private char peek() {
        return pos < text.length() ? text.charAt(pos) : '\0';
    }

    private void skipWhitespace() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    private IllegalArgumentException error(String what) {
        int line = 1, col = 1;
        for (int i = 0; i < Math.min(pos, text.length()); i++) {
            if (text.charAt(i) == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return new IllegalArgumentException("bad JSON at line " + line + ", column " + col + ": " + what);
    }
}
