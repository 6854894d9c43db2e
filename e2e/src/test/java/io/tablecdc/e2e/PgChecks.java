package io.tablecdc.e2e;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.stack.LocalStack;

/**
 * What the Postgres pipeline tests check: a source database, its flow's catalog and ClickHouse. Tables are compared
 * as one text per row, built by a Postgres expression and a ClickHouse expression of the same shape.
 */
final class PgChecks {
    interface Check {
        boolean ok() throws Exception;
    }

    /** Opens a connection to the source database. */
    interface Source {
        Connection connect() throws SQLException;
    }

    private final LocalStack stack;
    private final Source source;
    private final String catalogUrl;
    private final Client clickhouse;
    private final java.util.Set<String> keylessTables = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final Map<String, Integer> keylessCopies = new java.util.concurrent.ConcurrentHashMap<>();
    private final Map<String, String> expectedFrom = new java.util.concurrent.ConcurrentHashMap<>();
    private final Map<String, Integer> keyedCopies = new java.util.concurrent.ConcurrentHashMap<>();
    /** How long {@link #awaitEqual} requires equality to last once reached; zero: the first moment is enough. */
    private volatile Duration hold = Duration.ZERO;

    PgChecks(LocalStack stack, String database, String catalogUrl, Client clickhouse) {
        this(stack, () -> stack.postgres().connect(database), catalogUrl, clickhouse);
    }

    /**
     * The checks of a test class of its own: creates the source database {@code database} and the catalog database
     * {@code catalogDatabase} on the stack's Postgres and opens a ClickHouse client, which {@link #close} closes.
     */
    static PgChecks start(LocalStack stack, String database, String catalogDatabase) throws Exception {
        stack.postgres().createDatabase(database);
        String catalogUrl = stack.postgres().createDatabase(catalogDatabase);
        return new PgChecks(stack, database, catalogUrl, stack.clickhouse().client());
    }

    /** The catalog's JDBC URL. */
    String catalogUrl() {
        return catalogUrl;
    }

    /** The ClickHouse client these checks read with. */
    Client clickhouse() {
        return clickhouse;
    }

    /** Closes the ClickHouse client (of {@link #start}). */
    void close() {
        clickhouse.close();
    }

    /** A source on another server than the stack's Postgres (the catalog stays on the stack's). */
    PgChecks(LocalStack stack, Source source, String catalogUrl, Client clickhouse) {
        this.stack = stack;
        this.source = source;
        this.catalogUrl = catalogUrl;
        this.clickhouse = clickhouse;
    }

    Connection source() throws SQLException {
        return source.connect();
    }

    Connection catalog() throws SQLException {
        return DriverManager.getConnection(catalogUrl, stack.postgres().user(), stack.postgres().password());
    }

    void sql(String... statements) throws SQLException {
        try (Connection c = source(); Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

    /**
     * Runs each statement as a transaction of its own and waits until the flow has synced a new batch of
     * {@code table} before the next: the apply task makes one batch of each table per poll, so transactions run back
     * to back may share one.
     */
    void batchEach(String flow, String table, String... statements) throws Exception {
        for (String statement : statements) {
            long before = Long.parseLong(table(flow, table).get("synced_batch_id"));
            sql(statement);
            awaitTable(flow, table, row -> Long.parseLong(row.get("synced_batch_id")) > before, Duration.ofSeconds(60));
        }
    }

    /**
     * Inserts {@code count} rows into {@code table} one by one ({@code VALUES (id, <rest>)}), each timed from its commit
     * until ClickHouse shows it, in milliseconds.
     */
    List<Long> freshness(String table, int firstId, int count, String rest) throws Exception {
        List<Long> millis = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int id = firstId + i;
            sql("INSERT INTO " + table + " VALUES (" + id + ", " + rest + ")");
            long inserted = System.nanoTime();
            awaitTrue(() -> chLong("SELECT count() FROM " + table.replace('.', '_') + " FINAL WHERE id = " + id) == 1,
                    Duration.ofSeconds(60), "row " + id + " of " + table + " never reached ClickHouse");
            millis.add((System.nanoTime() - inserted) / 1_000_000);
        }
        return millis;
    }

    /** The {@code p}-th percentile of {@code values} (nearest rank). */
    static long percentile(List<Long> values, int p) {
        List<Long> sorted = new ArrayList<>(values);
        java.util.Collections.sort(sorted);
        return sorted.get(Math.min(sorted.size() - 1, (int) Math.ceil(p / 100.0 * sorted.size()) - 1));
    }

    /** A ClickHouse {@code SELECT count() …}; -1 when it fails (e.g. the table does not exist yet). */
    long chLong(String sql) {
        try {
            List<GenericRecord> rows = clickhouse.queryAll(sql.replaceFirst("count\\(\\)", "count() AS n"));
            return rows.isEmpty() ? -1 : rows.get(0).getLong("n");
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** The first column of the first row of {@code sql} (one parameter) in the catalog; null when there is none. */
    String catalogValue(String sql, String param) throws SQLException {
        try (Connection c = catalog()) {
            return value(c, sql, param);
        }
    }

    /** The first column of the first row of {@code sql} (one parameter) in the source; null when there is none. */
    String sourceValue(String sql, String param) throws SQLException {
        try (Connection c = source()) {
            return value(c, sql, param);
        }
    }

    private static String value(Connection c, String sql, String param) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, param);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    /** Runs the statements as one transaction. */
    void transaction(String... statements) throws SQLException {
        try (Connection c = source()) {
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                for (String statement : statements) {
                    s.execute(statement);
                }
            }
            c.commit();
        }
    }

    static void awaitTrue(Check check, Duration timeout, String message) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (check.ok()) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(message);
    }

    /** The table's catalog columns once {@code done} holds for them. */
    Map<String, String> awaitTable(String flow, String table, Predicate<Map<String, String>> done, Duration timeout)
            throws Exception {
        AtomicReference<Map<String, String>> seen = new AtomicReference<>();
        try {
            awaitTrue(() -> {
                seen.set(table(flow, table));
                return seen.get() != null && done.test(seen.get());
            }, timeout, "");
        } catch (AssertionError e) {
            throw new AssertionError("catalog row of " + table + " never as expected; last seen " + seen.get());
        }
        return seen.get();
    }

    /**
     * phase, phase_lsn, last_error, copy_rows_done, copy_rows_total, copy_attempt, synced_batch_id, paused_reason,
     * copy_lease_owner, normalized_batch_id, detach_slot, detach_lsn and detached_at of a table.
     */
    Map<String, String> table(String flow, String table) throws SQLException {
        try (Connection c = catalog(); PreparedStatement ps = c.prepareStatement("SELECT phase, phase_lsn, last_error,"
                + " copy_rows_done::text, copy_rows_total::text, copy_attempt::text, synced_batch_id::text, paused_reason,"
                + " copy_lease_owner, normalized_batch_id::text, detach_slot, detach_lsn, detached_at::text"
                + " FROM cdc_table_replication_state WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                Map<String, String> row = new HashMap<>();
                String[] names = {"phase", "phase_lsn", "last_error", "copy_rows_done", "copy_rows_total", "copy_attempt",
                    "synced_batch_id", "paused_reason", "copy_lease_owner", "normalized_batch_id", "detach_slot",
                    "detach_lsn", "detached_at"};
                for (int i = 0; i < names.length; i++) {
                    row.put(names[i], rs.getString(i + 1));
                }
                return row;
            }
        }
    }

    /**
     * ClickHouse's {@code table} is compared with Postgres's {@code relation} instead of {@code table} itself: e.g. a
     * copy of a table made as it left the publication, whose later changes ClickHouse must not have.
     */
    void expectAs(String table, String relation) {
        expectedFrom.put(table, relation);
    }

    List<String> postgresRows(String table, String expression) throws SQLException {
        List<String> rows = new ArrayList<>();
        try (Connection c = source(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT " + expression + " AS r FROM " + expectedFrom.getOrDefault(table, table)
                     + " ORDER BY 1")) {
            while (rs.next()) {
                rows.add(rs.getString(1));
            }
        }
        return rows;
    }

    /**
     * {@code table} has no key: its ClickHouse table is a plain {@code MergeTree} where every row loaded stays, read
     * without {@code FINAL}, so that a row loaded twice shows twice; {@link #awaitEqual} requires every Postgres row
     * at least as often and nothing else, and counts the extra copies ({@link #keylessCopies}).
     */
    void keyless(String table) {
        keylessTables.add(table);
    }

    /**
     * How many rows of keyless {@code table} ClickHouse held more than Postgres at the last {@link #awaitEqual} that
     * succeeded: copies of rows sent again after a crash (the pipeline delivers at least once; exactly-once delivery
     * avoids them).
     */
    int keylessCopies(String table) {
        return keylessCopies.getOrDefault(table, 0);
    }

    List<String> clickHouseRows(String table, String expression) {
        List<String> rows = new ArrayList<>();
        String name = table.replaceAll("[^A-Za-z0-9_]", "_");
        String finalClause = keylessTables.contains(table) ? "" : " FINAL";
        for (GenericRecord r : clickhouse.queryAll("SELECT " + expression + " AS r FROM " + name
                + finalClause + " WHERE _tablecdc_is_deleted = 0 ORDER BY r")) {
            rows.add(r.getString("r"));
        }
        return rows;
    }

    /**
     * Waits until every table's rows in ClickHouse (FINAL, without deletes) equal Postgres's, row for row.
     * {@code tables}: table → {Postgres row expression, ClickHouse row expression}. Ordering is by the text.
     * The wait is {@code timeout}, extended while the sink still loads batches (the catalog's normalized batch ids
     * rise or its stage rows change), up to three times {@code timeout}: a sink that stalls fails after
     * {@code timeout} without progress; one that is slow on a loaded machine is not mistaken for a loss. The failure
     * names the catalog's progress, so that a stall and a loss can be told apart.
     */
    void awaitEqual(Map<String, String[]> tables, Duration timeout) throws Exception {
        long start = System.nanoTime();
        long deadline = start + timeout.toNanos();
        long cap = start + 3 * timeout.toNanos();
        String progress = sinkProgress();
        Map<String, String> last = new HashMap<>();
        long fullComparedAt = System.nanoTime();
        while (System.nanoTime() < deadline) {
            boolean equal = true;
            // the fingerprints first (two aggregates, no rows fetched): rows are fetched and compared once they agree,
            // or every FULL_COMPARE_EVERY to say what differs; fetching 200,000 rows on both sides twice a second took
            // the processor time the pipeline under test needed
            boolean fingerprintsAgree = true;
            for (Map.Entry<String, String[]> table : tables.entrySet()) {
                if (!keylessTables.contains(table.getKey()) && !fingerprintsAgree(table.getKey(), table.getValue())) {
                    fingerprintsAgree = false;
                    break;
                }
            }
            if (!fingerprintsAgree && System.nanoTime() - fullComparedAt < FULL_COMPARE_EVERY.toNanos()) {
                equal = false;
                Thread.sleep(500);
                String now = sinkProgress();
                if (!now.equals(progress)) {
                    progress = now;
                    deadline = Math.min(cap, Math.max(deadline, System.nanoTime() + timeout.toNanos()));
                }
                continue;
            }
            fullComparedAt = System.nanoTime();
            for (Map.Entry<String, String[]> table : tables.entrySet()) {
                List<String> expected = postgresRows(table.getKey(), table.getValue()[0]);
                List<String> actual;
                try {
                    actual = clickHouseRows(table.getKey(), table.getValue()[1]);
                } catch (RuntimeException e) {
                    last.put(table.getKey(), "ClickHouse: " + e.getMessage());
                    equal = false;
                    continue;
                }
                // Postgres and ClickHouse may sort text differently
                expected.sort(null);
                actual.sort(null);
                if (keylessTables.contains(table.getKey())) {
                    // at-least-once delivery: a keyless table may hold a row more often than Postgres (a replay after
                    // a crash), never less often, and never a row Postgres does not have; the copies are counted
                    Map<String, Integer> left = new HashMap<>();
                    expected.forEach(r -> left.merge(r, 1, Integer::sum));
                    java.util.Set<String> known = new java.util.HashSet<>(expected);
                    List<String> unexpected = new ArrayList<>();
                    int copies = 0;
                    for (String r : actual) {
                        Integer n = left.get(r);
                        if (n == null) {
                            if (known.contains(r)) {
                                copies++;
                            } else {
                                unexpected.add(r);
                            }
                        } else if (n == 1) {
                            left.remove(r);
                        } else {
                            left.put(r, n - 1);
                        }
                    }
                    if (!left.isEmpty() || !unexpected.isEmpty()) {
                        equal = false;
                        last.put(table.getKey(), "at " + java.time.LocalTime.now() + ": " + expected.size()
                                + " rows in Postgres, " + actual.size() + " in ClickHouse (no key); missing "
                                + head(new ArrayList<>(left.keySet())) + ", unexpected " + head(unexpected));
                    } else {
                        keylessCopies.put(table.getKey(), copies);
                        last.remove(table.getKey());
                    }
                    continue;
                }
                if (!expected.equals(actual)) {
                    equal = false;
                    last.put(table.getKey(), difference(expected, actual));
                } else {
                    last.remove(table.getKey());
                }
            }
            if (equal) {
                if (!fingerprintsAgree) {
                    // the rows changed between the fingerprints and the rows, or the fingerprints disagree on equal rows
                    System.out.println("awaitEqual: rows equal although the fingerprints differed a moment before ("
                            + tables.keySet() + ")");
                }
                checkVersions(tables);
                holdEqual(tables);
                return;
            }
            Thread.sleep(500);
            String now = sinkProgress();
            if (!now.equals(progress)) {
                progress = now;
                deadline = Math.min(cap, Math.max(deadline, System.nanoTime() + timeout.toNanos()));
            }
        }
        if (last.isEmpty()) {
            // the fingerprints differed to the end and no full comparison ran since: one says what differs
            for (Map.Entry<String, String[]> table : tables.entrySet()) {
                try {
                    last.put(table.getKey(), difference(postgresRows(table.getKey(), table.getValue()[0]),
                            clickHouseRows(table.getKey(), table.getValue()[1])));
                } catch (RuntimeException e) {
                    last.put(table.getKey(), "ClickHouse: " + e.getMessage());
                }
            }
        }
        throw new AssertionError("ClickHouse never equalled Postgres within " + (System.nanoTime() - start) / 1_000_000_000
                + " s: " + last + "; catalog: " + sinkProgress());
    }

    /**
     * What differs between a keyed table's rows in Postgres and in ClickHouse, now. Sets: List.removeAll(List) is
     * quadratic, minutes for 200,000 rows, and would use up the timeout in one comparison that then reports a state
     * long gone.
     */
    private static String difference(List<String> expected, List<String> actual) {
        java.util.Set<String> actualSet = new java.util.HashSet<>(actual);
        java.util.Set<String> expectedSet = new java.util.HashSet<>(expected);
        List<String> missing = new ArrayList<>(expected);
        missing.removeIf(actualSet::contains);
        List<String> extra = new ArrayList<>(actual);
        extra.removeIf(expectedSet::contains);
        return "at " + java.time.LocalTime.now() + ": " + expected.size() + " rows in Postgres, " + actual.size()
                + " in ClickHouse; missing " + head(missing) + ", unexpected " + head(extra);
    }

    /** How often {@link #awaitEqual} compares rows while the fingerprints still differ (to say what differs). */
    private static final Duration FULL_COMPARE_EVERY = Duration.ofSeconds(15);

    /**
     * Whether a keyed table's rows have the same fingerprint in Postgres and in ClickHouse ({@code FINAL}, without
     * deletes): the number of rows and the sum of the first 60 bits of each row text's MD5, the same arithmetic on
     * both sides. Equal fingerprints are only a hint (the rows are compared after); differing ones mean differing rows,
     * unless either side changed between the two queries. A ClickHouse table not made yet differs.
     */
    private boolean fingerprintsAgree(String table, String[] expressions) throws SQLException {
        String expected;
        try (Connection c = source(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT count(*)::text || '/' || coalesce(sum(('x' || substr(md5(r), 1, 15))"
                     + "::bit(60)::bigint), 0)::text FROM (SELECT " + expressions[0] + " AS r FROM "
                     + expectedFrom.getOrDefault(table, table) + ") q")) {
            rs.next();
            expected = rs.getString(1);
        }
        String name = table.replaceAll("[^A-Za-z0-9_]", "_");
        String actual;
        try {
            actual = clickhouse.queryAll("SELECT concat(toString(count()), '/', toString(sum(toUInt128(reinterpretAsUInt64("
                    + "reverse(unhex(concat('0', substring(hex(MD5(r)), 1, 15))))))))) AS f FROM (SELECT " + expressions[1]
                    + " AS r FROM " + name + " FINAL WHERE _tablecdc_is_deleted = 0)").get(0).getString("f");
        } catch (RuntimeException e) {
            return false;
        }
        return expected.equals(actual);
    }

    /**
     * Once ClickHouse equalled Postgres, it must stay equal: for {@link #holdEqualFor} it is compared again every
     * second, and any difference (a late stale batch, a replayed truncate) fails with what differed. Only for tests
     * whose sources are quiet when they call {@link #awaitEqual}.
     */
    void holdEqualFor(Duration hold) {
        this.hold = hold;
    }

    private void holdEqual(Map<String, String[]> tables) throws Exception {
        long until = System.nanoTime() + hold.toNanos();
        String since = java.time.LocalTime.now().toString();
        boolean last = hold.isZero();
        while (!last) {
            Thread.sleep(1000);
            // every second the fingerprints, the rows where they differ, and all rows at the end
            last = System.nanoTime() >= until;
            for (Map.Entry<String, String[]> table : tables.entrySet()) {
                if (!last && !keylessTables.contains(table.getKey()) && fingerprintsAgree(table.getKey(), table.getValue())) {
                    continue;
                }
                List<String> expected = postgresRows(table.getKey(), table.getValue()[0]);
                List<String> actual = clickHouseRows(table.getKey(), table.getValue()[1]);
                expected.sort(null);
                actual.sort(null);
                boolean same = keylessTables.contains(table.getKey())
                        ? new java.util.HashSet<>(actual).equals(new java.util.HashSet<>(expected)) && actual.size() >= expected.size()
                        : expected.equals(actual);
                if (!same) {
                    throw new AssertionError("ClickHouse equalled Postgres at " + since + " but no longer at "
                            + java.time.LocalTime.now() + " for " + table.getKey() + ": " + expected.size()
                            + " rows in Postgres, " + actual.size() + " in ClickHouse; catalog: " + sinkProgress());
                }
            }
        }
        checkVersions(tables);
    }

    /**
     * Rows {@code FINAL} hides: in every keyed table, the rows loaded for one key and one version (read without
     * {@code FINAL}, deleted rows too) must be one image; two images of one (key, version) leave {@code FINAL} to pick
     * either, so they fail the check. Identical copies (a batch loaded again under another token) are counted in
     * {@link #keyedCopies}. A background merge may already have folded rows together, so this can miss a pair, never
     * invent one.
     */
    private void checkVersions(Map<String, String[]> tables) {
        for (Map.Entry<String, String[]> table : tables.entrySet()) {
            if (keylessTables.contains(table.getKey())) {
                continue;
            }
            String name = table.getKey().replaceAll("[^A-Za-z0-9_]", "_");
            List<GenericRecord> keys = clickhouse.queryAll("SELECT sorting_key AS k FROM system.tables"
                    + " WHERE database = currentDatabase() AND name = '" + name + "'");
            if (keys.isEmpty() || keys.get(0).getString("k").isBlank()) {
                continue;
            }
            String key = "tuple(" + keys.get(0).getString("k") + ")";
            // aliases no column of a table can have: an alias named like a column (k, v, n) would shadow it in the
            // expressions that read the columns
            List<GenericRecord> groups = clickhouse.queryAll("SELECT toString(" + key + ") AS _tc_key,"
                    + " toString(_tablecdc_version) AS _tc_version, uniqExact(tuple(" + table.getValue()[1]
                    + ", _tablecdc_is_deleted)) AS _tc_images, count() AS _tc_rows FROM " + name + " GROUP BY " + key
                    + ", _tablecdc_version HAVING _tc_rows > 1 ORDER BY _tc_images DESC, _tc_key LIMIT 1000");
            int copies = 0;
            List<String> conflicts = new ArrayList<>();
            for (GenericRecord g : groups) {
                long images = g.getLong("_tc_images");
                copies += (int) (g.getLong("_tc_rows") - images);
                if (images > 1) {
                    conflicts.add("key " + g.getString("_tc_key") + " version " + g.getString("_tc_version") + ": "
                            + images + " images");
                }
            }
            keyedCopies.put(table.getKey(), copies);
            if (!conflicts.isEmpty()) {
                throw new AssertionError("ClickHouse table " + name + " holds different rows under one key and version"
                        + " (FINAL keeps either): " + head(conflicts));
            }
        }
    }

    /**
     * How many identical extra copies of (key, version) rows keyed {@code table} held (without {@code FINAL}) at the
     * last {@link #awaitEqual} that succeeded; {@code FINAL} shows each once.
     */
    int keyedCopies(String table) {
        return keyedCopies.getOrDefault(table, 0);
    }

    /** Every table's synced and normalized batch ids and stage rows in the catalog, as text. */
    private String sinkProgress() {
        try (Connection c = catalog(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
                "SELECT t.flow_name, t.source_table_identifier, t.synced_batch_id, t.normalized_batch_id,"
                        + " (SELECT count(*) FROM cdc_table_avro_stage a WHERE a.flow_name = t.flow_name"
                        + "   AND a.source_table_identifier = t.source_table_identifier), t.paused_reason, t.last_error"
                        + " FROM cdc_table_replication_state t ORDER BY 1, 2")) {
            StringBuilder text = new StringBuilder();
            while (rs.next()) {
                text.append(String.format("[%s %s synced %d normalized %d staged %d paused %s error %s]", rs.getString(1),
                        rs.getString(2), rs.getLong(3), rs.getLong(4), rs.getLong(5), rs.getString(6), rs.getString(7)));
            }
            return text.toString();
        } catch (SQLException e) {
            return "catalog unreadable: " + e.getMessage();
        }
    }

    private static List<String> head(List<String> rows) {
        return rows.size() <= 10 ? rows : rows.subList(0, 10);
    }
}
