package io.tablecdc.e2e.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import javax.imageio.ImageIO;

/**
 * A horizontal bar chart of a {@link Measure}: one bar per variant at its median, a whisker from its min to its max,
 * the baseline in another colour; drawn with java.awt in headless mode (no chart library).
 */
public final class BarChart {
    private static final Color BAR = new Color(0x4C78A8);
    private static final Color BASELINE = new Color(0x9D9D9D);
    private static final Color WHISKER = new Color(0x222222);

    private BarChart() {
    }

    /** The smallest 1, 2, 2.5 or 5 times a power of ten at or above {@code v}, so the axis ticks are round numbers. */
    static double niceCeiling(double v) {
        if (!(v > 0)) {
            return 1;
        }
        double power = Math.pow(10, Math.floor(Math.log10(v)));
        for (double step : new double[] {1, 2, 2.5, 5, 10}) {
            if (step * power >= v * (1 - 1e-9)) {
                return step * power;
            }
        }
        return 10 * power;
    }

    public static void write(Measure measure, Path png) throws IOException {
        List<String> variants = new ArrayList<>();
        for (String v : measure.variants()) {
            if (!measure.samples(v).isEmpty()) {
                variants.add(v);
            }
        }
        int rowHeight = 34;
        int top = 46;
        int bottom = 40;
        int width = 960;
        int height = top + bottom + Math.max(1, variants.size()) * rowHeight;
        BufferedImage image = new BufferedImage(width, height, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = image.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
            g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, width, height);
            g.setColor(Color.BLACK);
            g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 15));
            g.drawString(measure.title() + " (" + measure.unit() + (measure.higherIsBetter() ? ", higher is better" : ", lower is better")
                    + "; bar = median, whisker = min–max)", 12, 24);
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
            FontMetrics fm = g.getFontMetrics();
            int labelWidth = 0;
            for (String v : variants) {
                labelWidth = Math.max(labelWidth, fm.stringWidth(v));
            }
            labelWidth = Math.min(labelWidth, 380);
            int x0 = 16 + labelWidth + 10;
            int plotWidth = width - x0 - 90;
            double maxValue = 0;
            for (String v : variants) {
                maxValue = Math.max(maxValue, Measure.max(measure.samples(v)));
            }
            maxValue = niceCeiling(maxValue);
            // axis with a few ticks
            int axisY = top + variants.size() * rowHeight + 4;
            g.setColor(Color.GRAY);
            g.drawLine(x0, top - 4, x0, axisY);
            g.drawLine(x0, axisY, x0 + plotWidth, axisY);
            for (int t = 0; t <= 4; t++) {
                double value = maxValue * t / 4;
                int x = x0 + (int) Math.round(plotWidth * t / 4.0);
                g.drawLine(x, axisY, x, axisY + 4);
                String label = Measure.format(value);
                g.drawString(label, x - fm.stringWidth(label) / 2, axisY + 18);
            }
            for (int i = 0; i < variants.size(); i++) {
                String v = variants.get(i);
                List<Double> xs = measure.samples(v);
                int y = top + i * rowHeight;
                double median = Measure.median(xs);
                int barEnd = x0 + (int) Math.round(plotWidth * median / maxValue);
                g.setColor(v.equals(measure.baseline()) ? BASELINE : BAR);
                g.fillRect(x0 + 1, y + 6, Math.max(1, barEnd - x0), rowHeight - 12);
                int lo = x0 + (int) Math.round(plotWidth * Measure.min(xs) / maxValue);
                int hi = x0 + (int) Math.round(plotWidth * Measure.max(xs) / maxValue);
                int mid = y + rowHeight / 2;
                g.setColor(WHISKER);
                g.setStroke(new BasicStroke(1.5f));
                g.drawLine(lo, mid, hi, mid);
                g.drawLine(lo, mid - 6, lo, mid + 6);
                g.drawLine(hi, mid - 6, hi, mid + 6);
                g.setColor(Color.BLACK);
                String label = v;
                while (fm.stringWidth(label) > labelWidth && label.length() > 4) {
                    label = label.substring(0, label.length() - 2);
                }
                if (!label.equals(v)) {
                    label = label.substring(0, label.length() - 1) + "…";
                }
                g.drawString(label, x0 - 10 - fm.stringWidth(label), mid + 5);
                g.drawString(Measure.format(median), Math.max(barEnd, hi) + 6, mid + 5);
            }
        } finally {
            g.dispose();
        }
        Files.createDirectories(png.toAbsolutePath().getParent());
        ImageIO.write(image, "png", png.toFile());
    }
}
