package io.tablecdc.pg;

import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.Phase;
import io.tablecdc.catalog.TableState;
import io.tablecdc.common.Resources;
import io.tablecdc.common.metrics.TableMetrics;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.wire.Lsn;

/**
 * Detaches the apply task's {@code ready} tables whose ClickHouse side fell behind from the flow's shared slot, so that
 * they hold back no other table, and looks after their private slots.
 *
 * <pre>
 * ready(c) ── synced − normalized ≥ max.unnormalized.batches, fewer than detach.max.tables detached
 *   1. catalog: detach_slot = S                       (recorded before the slot exists)
 *   2. SELECT pg_create_logical_replication_slot(S, 'pgoutput')   → consistent point s
 *   3. pg_logical_emit_message(false, 'tablecdc.detach', flow\ntable\nS)   → marker LSN m &gt; s
 * apply task meets the marker at m (in WAL order, as every slot does)
 *   4. catalog: detach_lsn = m; it keeps the table's changes committed before m, the private slot has every one
 *      committed at or after m (its consistent point lies before m)
 *   5. its acknowledged position passes m → lagging(m): nothing of the table is sent any more
 * a copy task, once the sink has loaded every batch of the table (TableCopy in its rejoin)
 *   6. streams S from m (the table's changes only), writes a handover marker m2, hands it back: catchup(m2) → ready(m2)
 *   7. drops S
 * </pre>
 *
 * <p>Steps 1 to 3 run on a thread of their own: creating a slot waits for the transactions running on the server to
 * end, and the apply task streams every other table meanwhile. A detach whose slot or marker cannot be made is
 * undone (the table streams on); one interrupted by a crash before its marker was met is undone at the next start
 * (its slot dropped; a marker of it still ahead in the stream names a slot the catalog no longer holds and is ignored).
 *
 * <p>Every {@value PublicationMembership#CHECK_MS} ms the apply task has it check the flow's private slots: a slot no
 * table holds is dropped; a table whose slot is gone, invalidated by the server or keeps more than
 * {@code detach.max.retained.wal.bytes} is copied again from scratch (a table {@code table.sync.copy} does not copy is
 * marked errored instead), so no change is ever skipped.
 */
final class Detacher implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(Detacher.class);
    /** Prefix of the detach markers (logical decoding messages). */
    static final String MARKER_PREFIX = "tablecdc.detach";
    /** The apply task's {@code paused-reason} metric of a {@code lagging} table. */
    static final String PAUSED_REASON = "detached";

    private final PgPipelineConfig config;
    private final String flow;
    private final Catalog catalog;
    private final ExecutorService worker;
    /** Tables whose steps 1 to 3 run now. */
    private final Set<String> inFlight = ConcurrentHashMap.newKeySet();
    /**
     * The markers this instance wrote, by private slot: until the stream has read past one, the apply task may still
     * record it, so its detach is not undone.
     */
    private final Map<String, Lsn> markers = new ConcurrentHashMap<>();
    private volatile String mainSlot;
    /** Tables at or above their limit: the normalized batch id seen when they got there, and since when (nanos). */
    private final Map<String, long[]> over = new java.util.HashMap<>();

    private final TableMetrics metrics;

    Detacher(PgPipelineConfig config, String flow, Catalog catalog, TableMetrics metrics) {
        this.config = config;
        this.flow = flow;
        this.catalog = catalog;
        this.metrics = metrics;
        this.worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "tablecdc-" + flow + "-detach");
            t.setDaemon(true);
            return t;
        });
    }

    /** The flow's main slot, whose hash names the private slots. */
    void mainSlot(String slot) {
        this.mainSlot = slot;
    }

    /** {@code <slot.prefix>_detach_<8 hex of the main slot's hash>_}: the flow's private slots, and only them. */
    static String slotPrefix(String slotPrefix, String mainSlot) {
        return io.tablecdc.common.FlowSlots.detachSlotPrefix(slotPrefix, mainSlot);
    }

    /** The marker's content: flow, table and private slot on three lines. */
    static String markerContent(String flow, String table, String slot) {
        return flow + "\n" + table + "\n" + slot;
    }

    /**
     * The table and the private slot of a detach marker of {@code flow}, or null for another flow's. The slot name
     * holds no line break, so a table name holding one still parses.
     */
    static String[] parseMarker(String flow, String content) {
        if (!content.startsWith(flow + "\n")) {
            return null;
        }
        String rest = content.substring(flow.length() + 1);
        int slotAt = rest.lastIndexOf('\n');
        return slotAt < 0 ? null : new String[] {rest.substring(0, slotAt), rest.substring(slotAt + 1)};
    }

    /**
     * At a start, a reconnect and every slot check: detaches that never had their marker recorded are undone, their
     * slots dropped: one a crash interrupted, one whose undo failed (a broken connection), one whose marker the
     * stream passed without recording it. Not one whose steps 1 to 3 run now, nor one whose marker this instance
     * wrote and the stream has not read past yet ({@code read}, the apply task's read position).
     */
    void abandonUnfinished(Connection sql, List<TableState> states, Lsn read) throws SQLException {
        for (TableState state : states) {
            if (state.detachSlot() != null && state.detachLsn() == null && !inFlight.contains(state.table())
                    && !markerAhead(state.detachSlot(), read)) {
                // the catalog first, the slot only once the undo took effect: an older instance of the apply task,
                // still blocked recording the marker it met, may commit it after the read above; the slot then holds
                // the table's changes since the marker and is kept
                if (catalog.phases().abandonDetach(flow, state.table(), state.detachSlot())) {
                    SourceDatabase.dropSlot(sql, state.detachSlot());
                    // the wording "did not reach its marker before the task stopped; undone" is what operators
                    // (and PgDetachFaultIT) look for; the undo also covers a detach whose own undo failed
                    log.info("flow {}, table {}: the detach begun with slot {} did not reach its marker before the task"
                            + " stopped; undone (the table streams on)", flow, state.table(), state.detachSlot());
                } else {
                    log.info("flow {}, table {}: the detach begun with slot {} was not undone: its marker was recorded"
                            + " meanwhile (or the table moved on); the slot is kept", flow, state.table(),
                            state.detachSlot());
                }
            }
        }
    }

    /** Whether this instance wrote the marker of {@code slot} and the stream has not read past it ({@code read}). */
    private boolean markerAhead(String slot, Lsn read) {
        Lsn marker = markers.get(slot);
        return marker != null && (read == null || !read.isAfter(marker));
    }

    /**
     * Starts detaching the {@code ready} tables of {@code states} that this task streams and whose batches synced but
     * not normalized have stayed at or above {@code max.unnormalized.batches} for {@code detach.after.ms} with none of
     * them loaded meanwhile (its normalized batch id unchanged), up to {@code detach.max.tables} at once. The time is
     * this task's own (no clock of another worker counts); a restart starts it again.
     */
    void consider(List<TableState> states, Set<String> streamed) {
        int limit = config.detachMaxTables();
        if (limit == 0 || mainSlot == null) {
            return;
        }
        long now = System.nanoTime();
        long detached = states.stream().filter(s -> s.detachSlot() != null).count();
        for (TableState state : states) {
            boolean full = state.phase() == Phase.READY && state.detachSlot() == null && streamed.contains(state.table())
                    && state.unnormalizedBatches() >= config.maxUnnormalizedBatches();
            long[] since = over.get(state.table());
            if (!full || (since != null && since[0] != state.normalizedBatchId())) {
                // below the limit, or the sink loaded some of it meanwhile: the wait starts again
                over.remove(state.table());
                since = null;
            }
            if (!full) {
                continue;
            }
            if (since == null) {
                over.put(state.table(), new long[] {state.normalizedBatchId(), now});
                since = over.get(state.table());
            }
            if (now - since[1] < java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(config.detachAfterMs())
                    || detached + inFlight.size() >= limit) {
                continue;
            }
            if (inFlight.add(state.table())) {
                over.remove(state.table());
                String behind = "batches synced up to id " + state.syncedBatchId() + " wait for normalize (loaded up to id "
                        + state.normalizedBatchId() + ")";
                try {
                    worker.execute(() -> detach(state.table(), behind));
                } catch (RejectedExecutionException e) {
                    inFlight.remove(state.table());
                    return;
                }
            }
        }
    }

    /** Steps 1 to 3 for one table, on the detach thread. */
    private void detach(String table, String behind) {
        byte[] random = new byte[3];
        new SecureRandom().nextBytes(random);
        String slot = slotPrefix(config.slotPrefix(), mainSlot) + HexFormat.of().formatHex(random);
        boolean created = false;
        Connection c = null;
        try {
            if (!catalog.phases().beginDetach(flow, table, slot, config.detachMaxTables())) {
                return;
            }
            log.info("flow {}, table {}: {}, at least max.unnormalized.batches={}, and none was loaded for {} ms;"
                    + " detaching it from the shared slot with private slot {}", flow, table, behind,
                    config.maxUnnormalizedBatches(), config.detachAfterMs(), slot);
            c = SourceDatabase.connect(config, "tablecdc " + flow + " detach");
            // a failover slot with slot.failover=true, so that a standby that synchronized it keeps the table's changes
            // since its marker across a promotion (randomized run seed 8776 lost them with the slot)
            Lsn consistent = config.slotFailover() ? SourceDatabase.createFailoverSlot(c, slot) : createSlot(c, slot);
            created = true;
            Lsn marker = SourceDatabase.emitHandover(c, MARKER_PREFIX, markerContent(flow, table, slot));
            markers.put(slot, marker);
            log.info("flow {}, table {}: private slot {} consistent at {}; detach marker at {}", flow, table, slot,
                    consistent, marker);
        } catch (SQLException | RuntimeException e) {
            log.warn("flow {}, table {}: cannot detach it ({}); it streams on and is tried again later", flow, table,
                    e.getMessage());
            try {
                // the catalog first: a marker written although its call failed may have been recorded meanwhile, and
                // the slot then holds the table's changes since it
                if (catalog.phases().abandonDetach(flow, table, slot) && created) {
                    SourceDatabase.dropSlot(c, slot);
                }
            } catch (SQLException | RuntimeException undo) {
                log.warn("flow {}, table {}: cannot undo the detach yet ({}); the next start of the apply task does",
                        flow, table, undo.getMessage());
            }
        } finally {
            Resources.closeQuietly(c, "the detach connection");
            inFlight.remove(table);
        }
    }

    private static Lsn createSlot(Connection c, String slot) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT CAST(lsn AS text)"
                + " FROM pg_create_logical_replication_slot(?, 'pgoutput')")) {
            ps.setString(1, slot);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return Lsn.parse(rs.getString(1));
            }
        }
    }

    /** A private slot as the server shows it. */
    private record PrivateSlot(String name, boolean active, String walStatus, long retainedBytes) {
    }

    /**
     * Drops the flow's private slots no table holds; copies again (or marks errored) a table whose private slot is
     * gone, invalidated or keeps more WAL than allowed.
     */
    void checkSlots(Connection sql, Lsn read) throws SQLException {
        if (mainSlot == null) {
            return;
        }
        // a detach left half done while the task runs (its undo failed) gives its place and its slot back now
        abandonUnfinished(sql, catalog.progress().listTables(flow), read);
        // the server first, then the catalog: a slot is recorded before it is created, so one seen here is in the
        // catalog read after it unless no table holds it any more
        Map<String, PrivateSlot> onServer = privateSlots(sql, slotPrefix(config.slotPrefix(), mainSlot));
        List<TableState> states = catalog.progress().listTables(flow);
        Set<String> held = ConcurrentHashMap.newKeySet();
        Set<String> unmarked = new java.util.HashSet<>();
        for (TableState state : states) {
            if (state.detachSlot() == null) {
                continue;
            }
            held.add(state.detachSlot());
            if (state.detachLsn() == null) {
                unmarked.add(state.detachSlot());
            }
            PrivateSlot slot = onServer.get(state.detachSlot());
            if (metrics.enabled()) {
                metrics.table(state.table()).detachedWal(slot == null ? -1 : slot.retainedBytes());
            }
            String problem = null;
            if (slot == null && state.detachLsn() != null) {
                problem = "its private slot " + state.detachSlot() + " is gone";
            } else if (slot != null && "lost".equals(slot.walStatus())) {
                problem = "the server invalidated its private slot " + slot.name() + " (max_slot_wal_keep_size)";
            } else if (slot != null && slot.retainedBytes() > config.detachMaxRetainedWalBytes()) {
                problem = "its private slot " + slot.name() + " keeps " + slot.retainedBytes() + " bytes of WAL, more than"
                        + " detach.max.retained.wal.bytes=" + config.detachMaxRetainedWalBytes();
            }
            if (problem != null) {
                lost(state.table(), state.detachSlot(), problem);
            }
        }
        // markers recorded, or of detaches undone: the stream's reading of them no longer matters
        markers.keySet().retainAll(unmarked);
        for (PrivateSlot slot : onServer.values()) {
            if (!slot.active() && !held.contains(slot.name()) && SourceDatabase.dropSlot(sql, slot.name())) {
                log.info("flow {}: dropped private slot {}, which no table holds any more", flow, slot.name());
            }
        }
    }

    /** A detached table's changes since its marker cannot be had from its private slot: it starts over. */
    private void lost(String table, String slot, String problem) {
        // only while the table is still detached with that slot: a rejoin that completed since the catalog was read
        // (its slot dropped after the handover) is not started over
        if (config.copies(table)) {
            if (catalog.phases().restartDetached(flow, table, slot, problem + ": copied again from scratch").isPresent()) {
                log.warn("flow {}, table {}: {}; the table is copied again from scratch", flow, table, problem);
            }
        } else {
            String error = problem + ": its changes since it was detached cannot be streamed; "
                    + ApplyTask.resetHint(config, flow, table);
            if (catalog.phases().markDetachLost(flow, table, slot, error, Instant.now())) {
                log.error("flow {}, table {}: {}", flow, table, error);
            }
        }
    }

    private static Map<String, PrivateSlot> privateSlots(Connection c, String prefix) throws SQLException {
        String pattern = prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%";
        try (PreparedStatement ps = c.prepareStatement("SELECT slot_name, active, wal_status,"
                + " COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint"
                + " FROM pg_replication_slots WHERE slot_name LIKE ?")) {
            ps.setString(1, pattern);
            Map<String, PrivateSlot> slots = new ConcurrentHashMap<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    slots.put(rs.getString(1), new PrivateSlot(rs.getString(1), rs.getBoolean(2),
                            rs.getString(3) == null ? "" : rs.getString(3), rs.getLong(4)));
                }
            }
            return slots;
        }
    }

    /** The tables whose detach runs now (steps 1 to 3). */
    List<String> inFlight() {
        return new ArrayList<>(inFlight);
    }

    @Override
    public void close() {
        worker.shutdownNow();
    }
}
