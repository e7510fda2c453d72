package dev.ferrite.perf.bench;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.xml.parsers.DocumentBuilderFactory;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** The HTML report: well-formed, a chart per workload's rates and one per its latencies, each drawn; and it renders in a browser. */
class HtmlReportTest {
    private static final Machine MACHINE = new Machine("host <a>", 2, 1L << 34, "Linux", "cpu", "25", "2026-12-01T00:00:00Z", null);

    private static List<Result> results() {
        List<Result> out = new ArrayList<>();
        for (String target : List.of("ferrite", "xfs", "memory")) {
            double scale = target.equals("ferrite") ? 2 : 1;
            out.add(new Result("meta", "create-private", target, 1, 1000, 100_000 * scale, "ops/s", 5, 50, 200, 900, 1.2));
            out.add(new Result("meta", "walk-private", target, 2, 1000, 300_000 * scale, "ops/s", 2, 20, 100, 400, 1.9));
            for (String w : List.of("create@10k", "create@100k", "create@1M")) {
                out.add(new Result("dirscale", w, target, 1, 1000, 80_000 * scale, "ops/s", 5, 60, 700, 2000, 1.0));
            }
        }
        out.add(new Result("dbench", "dbench", "ferrite", 1, 100, 1200, "MB/s", Double.NaN, Double.NaN, Double.NaN, 9000, Double.NaN));
        out.add(new Result("dbench", "dbench", "xfs", 1, 100, 1100, "MB/s", Double.NaN, Double.NaN, Double.NaN, 3000, Double.NaN));
        return out;
    }

    @Test
    void theReportIsWellFormedWithEveryChartDrawn() throws Exception {
        String html = HtmlReport.render("test <run>", MACHINE, results());
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setNamespaceAware(true);
        Document doc = f.newDocumentBuilder().parse(new ByteArrayInputStream(html.replace("<!DOCTYPE html>", "")
                .getBytes(StandardCharsets.UTF_8)));
        NodeList svgs = doc.getElementsByTagNameNS("http://www.w3.org/2000/svg", "svg");
        assertEquals(HtmlReport.charts(results()), svgs.getLength(), "two charts for each of meta, dirscale, dbench");
        for (int i = 0; i < svgs.getLength(); i++) {
            Element svg = (Element) svgs.item(i);
            int marks = svg.getElementsByTagNameNS("http://www.w3.org/2000/svg", "rect").getLength()
                    + svg.getElementsByTagNameNS("http://www.w3.org/2000/svg", "polyline").getLength();
            assertTrue(marks > 0, "chart " + i + " (" + svg.getAttribute("aria-label") + ") draws nothing");
        }
        assertTrue(html.contains("host &lt;a&gt;") && html.contains("test &lt;run&gt;"), "text is escaped");
        assertTrue(html.contains("SHORT") && html.contains("pass"), "the summary marks the targets");
        assertTrue(!html.contains("<script"), "no script");
        assertEquals(-1, html.replace("http://www.w3.org/", "").indexOf("http"), "nothing fetched: the namespaces are the only URLs");
    }

    /** In headless Chromium (Debian's chromium; .ci/run installs it): every chart is in the rendered page, and nothing is logged to the console. */
    @Test
    void theReportRendersInABrowser(@TempDir Path dir) throws Exception {
        assumeTrue(LoopDevice.onPath("chromium"), "no chromium on the PATH: the browser check is skipped");
        Path page = dir.resolve("report.html");
        Files.writeString(page, HtmlReport.render("run", MACHINE, results()));
        Process p = new ProcessBuilder("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                "--v=0", "--user-data-dir=" + dir.resolve("profile"), "--dump-dom", page.toUri().toString())
                .redirectError(dir.resolve("stderr").toFile()).start();
        String dom = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "chromium did not finish");
        assertEquals(0, p.exitValue(), Files.readString(dir.resolve("stderr")));
        Matcher svg = Pattern.compile("<svg[^>]*>(.*?)</svg>", Pattern.DOTALL).matcher(dom);
        int charts = 0;
        while (svg.find()) {
            assertTrue(svg.group(1).contains("<rect") || svg.group(1).contains("<polyline"), "an empty chart in the rendered page");
            charts++;
        }
        assertEquals(HtmlReport.charts(results()), charts, dom.length() > 2000 ? dom.substring(0, 2000) : dom);
        String log = Files.readString(dir.resolve("stderr"));
        assertTrue(log.lines().noneMatch(l -> l.contains("CONSOLE")), "console messages while rendering:\n" + log);
    }
}
