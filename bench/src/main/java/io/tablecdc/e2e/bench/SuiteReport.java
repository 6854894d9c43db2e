package io.tablecdc.e2e.bench;

import java.util.ArrayList;
import java.util.List;

/** What one suite measured: its measures (one table and chart each) and free notes (setup, profiles, skips). */
public final class SuiteReport {
    private final String id;
    private final String title;
    private final String description;
    private final List<Measure> measures = new ArrayList<>();
    private final List<String> notes = new ArrayList<>();

    public SuiteReport(String id, String title, String description) {
        this.id = id;
        this.title = title;
        this.description = description;
    }

    public Measure measure(Measure m) {
        measures.add(m);
        return m;
    }

    public synchronized void note(String markdown) {
        notes.add(markdown);
    }

    public String id() {
        return id;
    }

    public String title() {
        return title;
    }

    public String description() {
        return description;
    }

    public List<Measure> measures() {
        return measures;
    }

    public synchronized List<String> notes() {
        return new ArrayList<>(notes);
    }
}
