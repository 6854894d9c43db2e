package io.tablecdc.e2e.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One measured quantity of a suite (say rows per second): for each variant one value per repetition, one variant
 * being the baseline. Ratios pair a variant's value with the baseline's value of the same repetition, because on a
 * shared machine two repetitions can run under very different load while a variant and its baseline, measured
 * minutes apart in one repetition, see much the same.
 */
public final class Measure {
    private final String slug;
    private final String title;
    private final String unit;
    private final boolean higherIsBetter;
    private final String baseline;
    private final Map<String, Map<Integer, Double>> values = new LinkedHashMap<>();
    private final Map<String, String> skipped = new LinkedHashMap<>();

    /**
     * @param slug file name of the chart (letters, digits and dashes)
     * @param baseline the variant the others are compared with, or null for none
     */
    public Measure(String slug, String title, String unit, boolean higherIsBetter, String baseline) {
        if (!slug.matches("[a-z0-9-]+")) {
            throw new IllegalArgumentException("a measure's slug is lower-case letters, digits and dashes: " + slug);
        }
        this.slug = slug;
        this.title = title;
        this.unit = unit;
        this.higherIsBetter = higherIsBetter;
        this.baseline = baseline;
    }

    /** Records the value of {@code variant} in repetition {@code rep}; variants keep the order of their first value. */
    public synchronized Measure add(String variant, int rep, double value) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            throw new IllegalArgumentException(title + ": " + variant + " run " + rep + " measured " + value);
        }
        values.computeIfAbsent(variant, v -> new LinkedHashMap<>()).put(rep, value);
        return this;
    }

    /** Marks a variant as not measured, with the reason shown in its row. */
    public synchronized Measure skip(String variant, String reason) {
        skipped.putIfAbsent(variant, reason);
        values.computeIfAbsent(variant, v -> new LinkedHashMap<>());
        return this;
    }

    /** Declares a variant (so that it keeps its place in the table) before its first value. */
    public synchronized Measure declare(String variant) {
        values.computeIfAbsent(variant, v -> new LinkedHashMap<>());
        return this;
    }

    public String slug() {
        return slug;
    }

    public String title() {
        return title;
    }

    public String unit() {
        return unit;
    }

    public boolean higherIsBetter() {
        return higherIsBetter;
    }

    public String baseline() {
        return baseline;
    }

    public synchronized List<String> variants() {
        return new ArrayList<>(values.keySet());
    }

    public synchronized String skipReason(String variant) {
        return skipped.get(variant);
    }

    /** The values of a variant in repetition order. */
    public synchronized List<Double> samples(String variant) {
        Map<Integer, Double> byRep = values.getOrDefault(variant, Map.of());
        List<Integer> reps = new ArrayList<>(byRep.keySet());
        Collections.sort(reps);
        List<Double> out = new ArrayList<>();
        for (int rep : reps) {
            out.add(byRep.get(rep));
        }
        return out;
    }

    /** The variant's value divided by the baseline's, for each repetition that measured both. */
    public synchronized List<Double> ratios(String variant) {
        List<Double> out = new ArrayList<>();
        if (baseline == null || !values.containsKey(baseline)) {
            return out;
        }
        Map<Integer, Double> base = values.get(baseline);
        Map<Integer, Double> mine = values.getOrDefault(variant, Map.of());
        List<Integer> reps = new ArrayList<>(mine.keySet());
        Collections.sort(reps);
        for (int rep : reps) {
            Double b = base.get(rep);
            if (b != null && b != 0) {
                out.add(mine.get(rep) / b);
            }
        }
        return out;
    }

    public static double min(List<Double> xs) {
        return xs.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
    }

    public static double max(List<Double> xs) {
        return xs.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
    }

    /** The median; the mean of the two middle values for an even count; NaN for none. */
    public static double median(List<Double> xs) {
        if (xs.isEmpty()) {
            return Double.NaN;
        }
        List<Double> sorted = new ArrayList<>(xs);
        Collections.sort(sorted);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    /** A value with three significant figures or so, without exponent; "–" for NaN. */
    public static String format(double v) {
        if (Double.isNaN(v)) {
            return "–";
        }
        double a = Math.abs(v);
        if (a >= 100 || a == 0) {
            return String.format(Locale.ROOT, "%.0f", v);
        }
        if (a >= 10) {
            return String.format(Locale.ROOT, "%.1f", v);
        }
        if (a >= 0.1) {
            return String.format(Locale.ROOT, "%.2f", v);
        }
        return String.format(Locale.ROOT, "%.3g", v);
    }

    /** This measure as a markdown table: each variant's runs, min, median, max and ratio to the baseline. */
    public synchronized String markdown() {
        StringBuilder md = new StringBuilder();
        boolean ratios = baseline != null;
        md.append("| variant | runs | min | median | max |");
        if (ratios) {
            md.append(" median ratio vs ").append(baseline).append(" (per-run min–max) |");
        }
        md.append("\n|---|---|---|---|---|").append(ratios ? "---|" : "").append('\n');
        for (String variant : values.keySet()) {
            List<Double> xs = samples(variant);
            String reason = skipped.get(variant);
            md.append("| ").append(variant.equals(baseline) ? "**" + variant + "** (baseline)" : variant).append(" | ");
            if (xs.isEmpty()) {
                md.append("0 | – | – | – |");
                if (ratios) {
                    md.append(" ").append(reason == null ? "not measured" : "skipped: " + reason.replace('|', '/')).append(" |");
                } else if (reason != null) {
                    md.setLength(md.length() - 1);
                    md.append(" skipped: ").append(reason.replace('|', '/')).append(" |");
                }
                md.append('\n');
                continue;
            }
            md.append(xs.size()).append(" | ").append(format(min(xs))).append(" | ").append(format(median(xs))).append(" | ")
                    .append(format(max(xs))).append(" |");
            if (ratios) {
                List<Double> rs = ratios(variant);
                if (variant.equals(baseline)) {
                    md.append(" 1.00 |");
                } else if (rs.isEmpty()) {
                    md.append(" – (no baseline in the same run) |");
                } else {
                    md.append(' ').append(format(median(rs))).append(" (").append(format(min(rs))).append('–').append(format(max(rs))).append(") |");
                }
            }
            md.append('\n');
        }
        return md.toString();
    }
}
