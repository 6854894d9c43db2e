package io.tablecdc.e2e.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import javax.imageio.ImageIO;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The statistics, per-run ratios, markdown table and chart of a measure (no stack needed). */
class MeasureTest {
    @Test
    void medianMinAndMaxOfOddAndEvenCounts() {
        assertEquals(2.0, Measure.median(List.of(3.0, 1.0, 2.0)));
        assertEquals(2.5, Measure.median(List.of(4.0, 1.0, 3.0, 2.0)));
        assertEquals(1.0, Measure.min(List.of(3.0, 1.0, 2.0)));
        assertEquals(3.0, Measure.max(List.of(3.0, 1.0, 2.0)));
        assertTrue(Double.isNaN(Measure.median(List.of())));
    }

    @Test
    void ratiosPairEachRunWithTheBaselineOfTheSameRun() {
        Measure m = new Measure("x", "X", "rows/s", true, "base");
        m.add("base", 0, 100).add("base", 1, 50).add("base", 2, 200);
        // the variant is always half its run's baseline, although its own values spread 4x
        m.add("v", 0, 50).add("v", 1, 25).add("v", 2, 100);
        assertEquals(List.of(0.5, 0.5, 0.5), m.ratios("v"));
        // a run without a baseline value has no ratio
        m.add("w", 3, 10).add("w", 0, 10);
        assertEquals(List.of(0.1), m.ratios("w"));
    }

    @Test
    void markdownShowsRunsMinMedianMaxRatiosAndSkips() {
        Measure m = new Measure("x", "X", "rows/s", true, "base");
        m.declare("base").declare("v").declare("gone");
        m.add("base", 0, 1000).add("base", 1, 2000).add("base", 2, 1500);
        m.add("v", 0, 500).add("v", 1, 500).add("v", 2, 1500);
        m.skip("gone", "not available in this build: copy | refused");
        String md = m.markdown();
        assertTrue(md.startsWith("| variant | runs | min | median | max | median ratio vs base (per-run min–max) |\n|---|---|---|---|---|---|\n"), md);
        assertTrue(md.contains("| **base** (baseline) | 3 | 1000 | 1500 | 2000 | 1.00 |"), md);
        // ratios 0.5, 0.25, 1.0
        assertTrue(md.contains("| v | 3 | 500 | 500 | 1500 | 0.50 (0.25–1.00) |"), md);
        assertTrue(md.contains("| gone | 0 | – | – | – | skipped: not available in this build: copy / refused |"), md);
    }

    @Test
    void formatsWithoutExponentsAndRefusesNonNumbers() {
        assertEquals("169000", Measure.format(169_000.4));
        assertEquals("36.5", Measure.format(36.54));
        assertEquals("0.21", Measure.format(0.2149));
        assertEquals("0.0123", Measure.format(0.01234));
        assertEquals("–", Measure.format(Double.NaN));
        Measure m = new Measure("x", "X", "u", true, null);
        assertThrows(IllegalArgumentException.class, () -> m.add("v", 0, Double.NaN));
        assertThrows(IllegalArgumentException.class, () -> new Measure("Bad Slug", "X", "u", true, null));
    }

    @Test
    void chartIsAPngWithOneRowPerMeasuredVariant(@TempDir Path dir) throws Exception {
        System.setProperty("java.awt.headless", "true");
        Measure m = new Measure("x", "X", "rows/s", true, "base");
        m.add("base", 0, 1000).add("base", 1, 2000).add("v", 0, 500).add("v", 1, 700).skip("gone", "absent");
        Path png = dir.resolve("x.png");
        BarChart.write(m, png);
        BufferedImage image = ImageIO.read(png.toFile());
        assertEquals(960, image.getWidth());
        // title and axis (86 px) plus two rows of 34 px: the skipped variant draws no bar
        assertEquals(46 + 40 + 2 * 34, image.getHeight());
        assertTrue(Files.size(png) > 1000);
    }

    @Test
    void chartAxisEndsOnARoundNumber() {
        assertEquals(200_000, BarChart.niceCeiling(191_201));
        assertEquals(250_000, BarChart.niceCeiling(201_000));
        assertEquals(500, BarChart.niceCeiling(260));
        assertEquals(1, BarChart.niceCeiling(1));
        assertEquals(0.05, BarChart.niceCeiling(0.042), 1e-12);
        assertEquals(1, BarChart.niceCeiling(0));
    }

    @Test
    void rowBinaryEncodesTheSinkRowsColumnByColumn() {
        byte[] row0 = SinkSuite.rowBinary(0, 1);
        // id 0 (8) + "name-0" (1+6) + "user0@example.com" (1+17) + city NULL (1) + score (8) + ratio NULL (1)
        // + visits (8) + level (4) + balance (8) + updated_at (8) + version (8) + is_deleted (1)
        assertEquals(8 + 7 + 18 + 1 + 8 + 1 + 8 + 4 + 8 + 8 + 8 + 1, row0.length);
        byte[] row1 = SinkSuite.rowBinary(1, 2);
        // city "city-1" (1+1+6) and ratio 0.5 (1+8) present
        assertEquals(8 + 7 + 18 + 8 + 8 + 9 + 8 + 4 + 8 + 8 + 8 + 1, row1.length);
    }
}
