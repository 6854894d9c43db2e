package io.tablecdc.pg;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.Phase;
import io.tablecdc.catalog.TableState;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.wire.Lsn;

/**
 * Which tables of the flow the publication holds, for the apply task: the entry by which each table is in it (also
 * in the catalog), the tables found missing that leave the flow once the stream has passed the moment they were
 * found missing, and the tables that left and came back (copied again from scratch). The apply task keeps following
 * tables; this class tells it which ones joined ({@link #check}) and which ones are gone ({@link #leaveOncePassed}).
 * One poll thread uses it, between transactions.
 */
final class PublicationMembership {
    /** Its lines are the apply task's, under the apply task's name. */
    private static final Logger log = LoggerFactory.getLogger(ApplyTask.class);
    /** How often the publication is read while the flow streams. */
    static final long CHECK_MS = 10_000;
    /** Seconds before a copy task copies again a table that came back to the publication (as tablecdc-reset-table). */
    private static final int REJOIN_DELAY_S = 10;
    /** How the catalog's error of a table that left the publication starts. */
    private static final String LEFT_PUBLICATION = "left publication ";

    private final PgPipelineConfig config;
    private final String flow;
    private final Catalog catalog;
    /** The publication entry by which each table was last seen in the publication (also in the catalog). */
    private final Map<String, String> members = new HashMap<>();
    /**
     * Tables a publication check found missing, with the server's WAL position then: each leaves the flow once the
     * stream has read past that position (the changes committed before it left are sent).
     */
    private final Map<String, Lsn> leaving = new HashMap<>();
    /** The server's WAL position when the start found the first table that left while the flow was stopped. */
    private Lsn startWal;

    PublicationMembership(PgPipelineConfig config, String flow, Catalog catalog) {
        this.config = config;
        this.flow = flow;
        this.catalog = catalog;
    }

    /**
     * At the start of streaming: records the entry of each table of the publication ({@code publishedMembers}, in its
     * order) against the catalog's ({@link #member}).
     */
    void start(Map<String, String> publishedMembers) {
        members.clear();
        leaving.clear();
        startWal = null;
        Map<String, String> recorded = catalog.phases().publicationMembers(flow);
        for (String table : publishedMembers.keySet()) {
            member(table, recorded.get(table), publishedMembers.get(table), true);
        }
    }

    /**
     * At the start of streaming, after {@link #start}: whether a table of the flow ({@code state}, its catalog row)
     * left the publication while the flow was stopped and has not left the flow yet. It is then leaving: followed
     * until the stream has passed the server's WAL position at the first such table, so that its changes before the
     * removal are sent.
     */
    boolean leftWhileStopped(Connection sql, TableState state, Map<String, String> publishedMembers) throws SQLException {
        if (state.phase() != null && !publishedMembers.containsKey(state.table()) && !hasLeft(state)) {
            // left the publication while the flow was stopped: followed until the stream has passed this moment,
            // so that its changes before the removal are sent
            startWal = startWal != null ? startWal : SourceDatabase.currentWal(sql);
            leaving.put(state.table(), startWal);
            log.info("flow {}, table {}: no longer in publication {}; it leaves the flow once its changes up to {}"
                    + " are sent", flow, state.table(), config.publication(), startWal);
            return true;
        }
        return false;
    }

    /**
     * Reads the publication: each of the {@code followed} tables missing from it leaves once the stream passes the
     * server's WAL position now, each one in it has its entry recorded ({@link #member}). Returns the publication's
     * tables with their entries, among them any the apply task does not follow yet.
     */
    Map<String, String> check(Connection sql, Collection<String> followed) throws SQLException {
        Map<String, String> published = SourceDatabase.publicationMembers(sql, config.publication());
        Lsn wal = null;
        for (String table : List.copyOf(followed)) {
            String member = published.get(table);
            if (member == null) {
                if (!leaving.containsKey(table)) {
                    wal = wal != null ? wal : SourceDatabase.currentWal(sql);
                    leaving.put(table, wal);
                    log.info("flow {}, table {}: no longer in publication {}; it leaves the flow once its changes"
                            + " up to {} are loaded", flow, table, config.publication(), wal);
                }
            } else {
                leaving.remove(table);
                // a table whose entry is not known yet (not read at its discovery) may be one that left
                member(table, members.get(table), member, !members.containsKey(table));
            }
        }
        return published;
    }

    /**
     * Hands each leaving table the stream has passed ({@code acknowledged}, by Kafka) to {@code left}, unless a copy
     * of it is in flight ({@code copying}, {@code catchup}): that copy finishes or fails first, its lease is not taken
     * from under it. A table detached from the shared slot ({@code lagging}, or being detached) leaves only once it has
     * rejoined: its changes from its detach marker up to its removal are in its private slot alone.
     */
    void leaveOncePassed(Lsn acknowledged, Consumer<String> left) {
        for (Map.Entry<String, Lsn> gone : List.copyOf(leaving.entrySet())) {
            if (!acknowledged.isBefore(gone.getValue())) {
                Optional<TableState> state = catalog.progress().getTable(flow, gone.getKey());
                if (state.isEmpty() || (state.get().phase() != Phase.COPYING && state.get().phase() != Phase.CATCHUP
                        && state.get().phase() != Phase.LAGGING && state.get().detachSlot() == null)) {
                    left.accept(gone.getKey());
                }
            }
        }
    }

    /**
     * Records by which entry {@code table} belongs to the publication now. A table whose entry changed since
     * {@code before} left the publication and came back (or was dropped and created again): its changes in between
     * never reached the stream, so a copied table is copied again from scratch. So is a table the catalog shows as
     * having left ({@code mayHaveLeft}: at the start and for a table found in the publication anew), whatever its
     * entry: its entry was never recorded when the task that first saw it died before recording it (seed 8731), and
     * a table moved out of a schema published {@code FOR TABLES IN SCHEMA} and back keeps its entry.
     */
    private void member(String table, String before, String now, boolean mayHaveLeft) {
        boolean left = mayHaveLeft && catalog.progress().getTable(flow, table).map(PublicationMembership::hasLeft).orElse(false);
        if (now.equals(before) && !left) {
            members.put(table, now);
            return;
        }
        if (before != null || left) {
            if (config.copies(table)) {
                // batch ids go on from the table's old ones, so the sink never takes a new batch for a loaded one
                Optional<String> phase = catalog.phases().restartTable(flow, table, "left publication " + config.publication()
                        + " and came back (" + before + " -> " + now + "): copied again from scratch", REJOIN_DELAY_S);
                log.warn("flow {}, table {}: left publication {} and came back ({} -> {}); {} -> errored, a copy task"
                        + " copies it again from scratch in {} s", flow, table, config.publication(), before, now,
                        phase.orElse("no row"), REJOIN_DELAY_S);
            } else {
                catalog.phases().setPending(flow, table);
                log.warn("flow {}, table {}: left publication {} and came back ({} -> {}); it is not copied"
                        + " (table.sync.copy), so it streams on from here and its changes while it was out of the"
                        + " publication are not in ClickHouse", flow, table, config.publication(), before, now);
            }
        }
        catalog.phases().setPublicationMember(flow, table, now);
        members.put(table, now);
    }

    /**
     * A table newly in the publication: its entry is read now and recorded against the catalog's (at the next
     * {@link #check} if the publication cannot be read now).
     */
    void discovered(Connection sql, String table) {
        try {
            String member = SourceDatabase.publicationMembers(sql, config.publication()).get(table);
            if (member != null) {
                member(table, catalog.phases().publicationMembers(flow).get(table), member, true);
            }
        } catch (SQLException e) {
            // recorded at the next publication check
            log.debug("flow {}, table {}: publication entry not read now", flow, table, e);
        }
    }

    /** Whether a table's catalog row says it left the publication ({@link #left}). */
    private static boolean hasLeft(TableState state) {
        return state.phase() == Phase.ERRORED && state.nextRetryAt() == null && state.lastError() != null
                && state.lastError().startsWith(LEFT_PUBLICATION);
    }

    /**
     * A table that left the publication, once Kafka has acknowledged everything the stream read up to the moment it
     * was found missing and the apply task stopped following it: the catalog shows it {@code errored} for good with
     * the reason (its staged batches are still loaded; its rows in ClickHouse stay). Should it come back, it is copied
     * again ({@link #member}). {@code awaitingCopy}: the table waited for a copy (not copied yet, its copy failed, its
     * private slot lost), so ClickHouse lacks what that copy would have brought, and the reason says so.
     */
    void left(String table, boolean awaitingCopy) {
        leaving.remove(table);
        if (awaitingCopy) {
            catalog.phases().markLeft(flow, table, LEFT_PUBLICATION + config.publication() + " before the copy it was"
                    + " waiting for could run: its rows in ClickHouse are what they were (without the changes that copy"
                    + " would have brought), and it is copied again if it comes back");
            log.warn("flow {}, table {}: left publication {} while it waited for a copy; its rows in ClickHouse stay as"
                    + " they were, without the changes that copy would have brought", flow, table, config.publication());
            return;
        }
        catalog.phases().markLeft(flow, table, LEFT_PUBLICATION + config.publication() + ": no longer replicated; its rows in"
                + " ClickHouse stay as they are, and it is copied again if it comes back");
        log.info("flow {}, table {}: left publication {}; every change before is sent, its rows in ClickHouse stay as"
                + " they are", flow, table, config.publication());
    }
}
