package io.tablecdc.clickhouse.destination;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Where final tables live: one ClickHouse server ({@link #single()}), or a cluster whose tables are created
 * {@code ON CLUSTER} as {@code ReplicatedReplacingMergeTree}, optionally behind a {@code Distributed} table.
 *
 * @param name                  the cluster of {@code ON CLUSTER} and {@code Distributed}; empty for one server
 * @param replicationPath       the Keeper path of a replicated table (ClickHouse expands its macros)
 * @param replicaName           the replica name of a replicated table (usually the {@code {replica}} macro)
 * @param distributed           rows go through a {@code Distributed} table {@code <t>} into {@code <t>_local}
 * @param insertQuorum          {@code off}, {@code auto} (a majority of replicas) or a number of replicas
 * @param insertQuorumTimeoutMs how long an INSERT waits for its quorum before it fails
 */
public record Cluster(String name, String replicationPath, String replicaName, boolean distributed, String insertQuorum,
                      long insertQuorumTimeoutMs) {
    /** The suffix of the replicated table behind a {@code Distributed} one. */
    public static final String LOCAL_SUFFIX = "_local";

    public Cluster {
        Objects.requireNonNull(name, "name");
        if (distributed && name.isEmpty()) {
            throw new IllegalArgumentException("a Distributed table needs a cluster");
        }
    }

    /** One server: plain {@code ReplacingMergeTree} tables, no quorum. */
    public static Cluster single() {
        return new Cluster("", "", "", false, "off", 0);
    }

    public boolean enabled() {
        return !name.isEmpty();
    }

    /** The table that stores the rows: {@code <t>_local} behind a {@code Distributed} table, else {@code <t>} itself. */
    public String storageTable(String table) {
        return distributed ? table + LOCAL_SUFFIX : table;
    }

    /** {@code " ON CLUSTER `name`"}, or nothing on one server. */
    String onCluster() {
        return enabled() ? " ON CLUSTER " + Sql.id(name) : "";
    }

    /**
     * Server settings of every normalize INSERT. On a cluster: {@code insert_quorum} (unless {@code off}),
     * {@code insert_quorum_timeout} and {@code insert_quorum_parallel=0}, so that the INSERT returns only once
     * the quorum of replicas wrote it and fails otherwise; through a {@code Distributed} table also
     * {@code insert_distributed_sync=1}, since an asynchronous distributed insert would return before any
     * shard has the rows.
     */
    public Map<String, String> insertSettings() {
        Map<String, String> settings = new LinkedHashMap<>();
        if (!enabled()) {
            return settings;
        }
        if (!"off".equals(insertQuorum)) {
            settings.put("insert_quorum", insertQuorum);
            settings.put("insert_quorum_timeout", Long.toString(insertQuorumTimeoutMs));
            settings.put("insert_quorum_parallel", "0");
        }
        if (distributed) {
            settings.put("insert_distributed_sync", "1");
        }
        return settings;
    }
}
