package io.tablecdc.clickhouse;

import java.time.Instant;

import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.DestinationRefusal;
import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.clickhouse.destination.ClickHouseDestination;
import io.tablecdc.common.ErrorEpisode;

/**
 * How a sink task names the ClickHouse table a table is loaded into, as the catalog records it (its destination): by
 * the UUID of {@code clickhouse.database}, asked once per task, or by the server's address for a database without one;
 * and what the log says when the catalog refuses a table its destination.
 */
final class DestinationNames {
    /** Its lines are the sink task's, under the sink task's name. */
    private static final Logger log = LoggerFactory.getLogger(ClickHouseStageSinkTask.class);

    private final ClickHouseStageSinkConfig config;
    private final String connectorName;
    private final ClickHouseDestination destination;

    DestinationNames(ClickHouseStageSinkConfig config, String connectorName, ClickHouseDestination destination) {
        this.config = config;
        this.connectorName = connectorName;
        this.destination = destination;
    }

    /** Between a destination's database identity and its table name in {@link #destinationOf}. */
    static final String IN_DATABASE = " in ClickHouse database ";

    /**
     * The UUID of {@code clickhouse.database} ({@link ClickHouseDestination#databaseUuid}), asked once per task, when it
     * is first needed; "" when the database has none; null until asked successfully.
     */
    private volatile String databaseUuid;
    /** Held while ClickHouse is asked for {@link #databaseUuid}: one question at a time, not the task's monitor. */
    private final Object databaseUuidLock = new Object();

    private String databaseUuid() {
        String known = databaseUuid;
        if (known != null) {
            return known;
        }
        synchronized (databaseUuidLock) {
            return askDatabaseUuid();
        }
    }

    private String askDatabaseUuid() {
        String uuid = databaseUuid;
        if (uuid == null) {
            uuid = destination.databaseUuid().orElse("");
            databaseUuid = uuid;
            if (uuid.isEmpty()) {
                log.info("sink {}: ClickHouse database {} has no UUID (engine Ordinary or Memory) or does not exist; its"
                        + " tables are recorded in the catalog by the address of clickhouse.url", connectorName,
                        config.clickHouseDatabase());
            } else {
                log.info("sink {}: ClickHouse database {} has UUID {}; its tables are recorded in the catalog by it",
                        connectorName, config.clickHouseDatabase(), uuid);
            }
        }
        return uuid;
    }

    /**
     * Asks for the database's UUID when the task starts, so that a ClickHouse outage that begins later does not keep the
     * task from staging (staging needs the UUID, loading needs ClickHouse anyway): waits for the answer up to 5 s (at most
     * {@code clickhouse.timeout.ms}); an answer that comes later is kept, and a failure leaves the question to the first
     * record that needs it.
     */
    void askAtStart() {
        Thread asking = new Thread(() -> {
            try {
                databaseUuid();
            } catch (RuntimeException e) {
                log.info("sink {}: ClickHouse did not tell the UUID of database {} at start ({}); asked again when a table"
                        + " first needs it", connectorName, config.clickHouseDatabase(), ErrorEpisode.describe(e));
            }
        }, "tablecdc-database-uuid-" + connectorName);
        asking.setDaemon(true);
        asking.start();
        try {
            asking.join(Math.min(config.clickHouseTimeoutMs(), 5_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The ClickHouse table a table is loaded into, as the catalog records it: {@code <db>.<table> in ClickHouse database
     * <uuid>}, named by the database's UUID, so the same under every address of the server and another when the database
     * was dropped and created again; {@link #addressNameOf} for a database without a UUID. Asks ClickHouse the first time
     * (fails when it does not answer).
     */
    String destinationOf(TableKey key) {
        String uuid = databaseUuid();
        return uuid.isEmpty() ? addressNameOf(key)
                : config.clickHouseDatabase() + "." + key.clickHouseTable() + IN_DATABASE + uuid;
    }

    /**
     * The ClickHouse table named by the server's address and the database, {@code <host>:<port>/<db>.<table>}: how
     * earlier releases recorded every destination (a row recorded so is taken over under the same address, see
     * {@link io.tablecdc.catalog.SinkLeases#claimDestination(String, String, String, String)}).
     */
    String addressNameOf(TableKey key) {
        String server;
        try {
            java.net.URI uri = java.net.URI.create(config.clickHouseUrl());
            server = uri.getHost() + ":" + uri.getPort();
        } catch (RuntimeException e) {
            server = config.clickHouseUrl();
        }
        return server + "/" + config.clickHouseDatabase() + "." + key.clickHouseTable();
    }

    /**
     * Why the table is stopped: two source tables map to one ClickHouse table, another sink holds the table, or a table
     * with batches loaded would now be loaded into another one ({@code topic}: the topic its record came from).
     */
    String refusalMessage(TableKey key, DestinationRefusal refusal, String topic) {
        String here = config.clickHouseDatabase() + "." + key.clickHouseTable();
        String message;
        String recheck = "; the table checks its claim again every " + TableSink.RECHECK_MS / 1000 + " s and proceeds"
                + " without a restart once that is done";
        if (refusal instanceof DestinationRefusal.HeldBy held) {
            message = "ClickHouse table " + here + " is already loaded from " + held.otherTable() + "; flow " + key.flow()
                    + ", table " + key.table() + " (topic " + topic + ") would be mixed into it and is stopped. If flow "
                    + held.otherFlow() + " is this flow under a former name (its source connector renamed or created again"
                    + " under another name), retire it: delete its connector, then run tablecdc-retire-flow --flow "
                    + held.otherFlow() + " (docs/operations.md, \"Rename, retire or restart a flow\")" + recheck
                    + ". Otherwise set " + ClickHouseStageSinkConfig.TABLE_NAME_FORMAT_CONFIG + " so that the two get"
                    + " different ClickHouse tables (for example ${topic}), or stop one of them";
        } else if (refusal instanceof DestinationRefusal.HeldBySink sink) {
            message = "flow " + key.flow() + ", table " + key.table() + " (topic " + topic + ") is loaded by sink "
                    + sink.sink() + (sink.destination() == null ? "" : " into " + sink.destination())
                    + ", which holds it (its hold lasts until " + sink.until() + " and is renewed while it runs); two sinks"
                    + " on one table of one catalog would each load only some of its batches, so it is stopped here and"
                    + " nothing of it is staged or loaded by this sink. To load the table into a second ClickHouse as"
                    + " well, give this sink a catalog of its own (catalog.jdbc.url); to move the table to this sink,"
                    + " delete sink " + sink.sink() + " (docs/operations.md, \"Two sinks on one table\")" + recheck;
        } else {
            DestinationRefusal.LoadedElsewhere elsewhere = (DestinationRefusal.LoadedElsewhere) refusal;
            String current = elsewhere.current();
            String now = destinationOf(key);
            String loaded = "flow " + key.flow() + ", table " + key.table() + " (topic " + topic + ") has batches up to "
                    + elsewhere.normalizedBatchId() + " loaded into ";
            String reload = "or load the table into it from the start with tablecdc-reload-table (see docs/operations.md)";
            if (current.startsWith(here + IN_DATABASE)) {
                String uuidBefore = current.substring((here + IN_DATABASE).length());
                message = loaded + here + " of the ClickHouse database with UUID " + uuidBefore + ", and clickhouse.url ("
                        + config.clickHouseUrlForLogs() + ") now reaches "
                        + (now.startsWith(here + IN_DATABASE)
                                ? "a database " + config.clickHouseDatabase() + " with UUID "
                                        + now.substring((here + IN_DATABASE).length())
                                : "no database " + config.clickHouseDatabase() + " with a UUID (it does not exist, or its engine"
                                        + " is Ordinary or Memory)")
                        + " (another server, or the database dropped and created again): the rows loaded before are not"
                        + " there, so it is stopped and nothing more of it is loaded. Point clickhouse.url back at the server"
                        + " that holds the table, " + reload;
            } else if (current.endsWith("/" + here) && now.startsWith(here + IN_DATABASE)) {
                message = loaded + current + " (recorded by the server's address, as earlier releases did), and clickhouse.url ("
                        + config.clickHouseUrlForLogs() + ") now names another address: nothing tells that it reaches the same"
                        + " database, so it is stopped. Start the sink once with clickhouse.url at the address recorded (the"
                        + " table is then recorded by its database's UUID, and any address of the database works), "
                        + reload;
            } else {
                message = loaded + current + ", and this sink would now load it into " + now + ": both tables would be"
                        + " incomplete, so it is stopped. Set " + ClickHouseStageSinkConfig.TABLE_NAME_FORMAT_CONFIG
                        + " (now " + config.tableNameFormat() + ") and the ClickHouse settings back so that it keeps its table"
                        + " (a sink upgraded from a release whose default was ${table} needs table.name.format=${table}), or"
                        + " reload the table into the new one from the start (tablecdc-reload-table, see docs/operations.md)";
            }
        }
        return "sink " + connectorName + ": " + message;
    }

    /**
     * Why a table of records of another producer is stopped: its partition {@code tp} gave a record at {@code offset},
     * at or below the {@code stagedOffset} staged from it, whose {@code timestamp} is later than every record staged
     * from it ({@code stagedTimestamp}): the topic's offsets went back, and its rows are versioned by offset.
     */
    String offsetsWentBackMessage(TableKey key, TopicPartition tp, long offset, long timestamp, long stagedOffset,
                                  long stagedTimestamp) {
        return "sink " + connectorName + ": the offsets of topic " + tp.topic() + " partition " + tp.partition()
                + " went back: its record at offset " + offset + " (timestamp " + Instant.ofEpochMilli(timestamp)
                + ") is newer than every record staged from it, which reached offset " + stagedOffset + " (timestamps up to "
                + Instant.ofEpochMilli(stagedTimestamp) + "). The topic was recreated, its log was reset, or a mirror took its"
                + " place. The rows of table " + key.table() + " are versioned by Kafka offset, so its new rows would lose to"
                + " the rows loaded before under the same keys: the table is stopped and nothing more of it is staged. To"
                + " load the topic anew: stop the sink, empty ClickHouse table " + config.clickHouseDatabase() + "."
                + key.clickHouseTable() + " (TRUNCATE TABLE), run tablecdc-reload-table --flow " + key.flow() + " --table "
                + key.table() + " (it also forgets the offsets staged), set the sink's offset of " + tp.topic() + " partition "
                + tp.partition() + " to the first record to load, and resume the sink (docs/operations.md, \"Reload one"
                + " table into ClickHouse\")";
    }
}
