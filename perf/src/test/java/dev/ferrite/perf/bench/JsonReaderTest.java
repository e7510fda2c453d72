package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

class JsonReaderTest {
    @Test
    void parsesEveryKindOfValue() {
        Object v = JsonReader.parse(" {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\n\"], \"b\": {}, \"c\": []} ");
        assertEquals(Map.of("a", Arrays.asList(1L, -2500.0, true, false, null, "xé\n"), "b", Map.of(), "c", List.of()), v);
    }

    @Test
    void keepsDocumentOrderAndLargeIntegers() {
        Map<?, ?> m = (Map<?, ?>) JsonReader.parse("{\"z\": 1, \"a\": 9223372036854775807, \"m\": 99999999999999999999}");
        assertEquals(List.of("z", "a", "m"), List.copyOf(m.keySet()));
        assertEquals(Long.MAX_VALUE, m.get("a"));
        assertEquals(1e20, (Double) m.get("m"), 1e5);
    }

    @Test
    void acceptsTheNanAndInfThatFioPrints() {
        List<?> l = (List<?>) JsonReader.parse("[nan, -nan, inf, -inf]");
        assertTrue(Double.isNaN((Double) l.get(0)));
        assertTrue(Double.isNaN((Double) l.get(1)));
        assertEquals(Double.POSITIVE_INFINITY, l.get(2));
        assertEquals(Double.NEGATIVE_INFINITY, l.get(3));
    }

    @Test
    void reportsWhereTheTextIsWrong() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JsonReader.parse("{\n  \"a\": 1,\n  \"b\" 2}"));
        assertEquals("bad JSON at line 3, column 7: expected ':' but found '2'", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> JsonReader.parse("[1, 2"));
        assertThrows(IllegalArgumentException.class, () -> JsonReader.parse("{} x"));
        assertThrows(IllegalArgumentException.class, () -> JsonReader.parse("\"open"));
        assertThrows(IllegalArgumentException.class, () -> JsonReader.parse("1.2.3"));
    }

    @Test
    void pathLookupNamesTheMissingStep() {
        Object doc = JsonReader.parse("{\"jobs\": [{\"read\": {\"iops\": 12.5}}]}");
        assertEquals(12.5, JsonReader.number(doc, "jobs", 0, "read", "iops"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> JsonReader.number(doc, "jobs", 0, "write", "iops"));
        assertEquals("no jobs[0].write in the JSON document", e.getMessage());
    }
}
