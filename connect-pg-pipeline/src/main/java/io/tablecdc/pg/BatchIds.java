package io.tablecdc.pg;

import java.util.HashMap;
import java.util.Map;
import java.util.function.ToLongFunction;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.BatchIdReservations;

/** Where a task's per-table batch ids come from. Used on the poll thread only. */
interface BatchIds {
    /** The id of the table's next batch: larger than any this source has given the table before. */
    long next(String table);

    /**
     * Drops what is left of the table's current ids: the next id comes from a new reservation (the table was sent
     * by another task meanwhile, whose ids are above these).
     */
    void forget(String table);

    /**
     * Drops the ids left of every table: the next id of each comes from a new reservation. After a reconnect, another
     * task may have sent the tables meanwhile (a worker cut off from its group whose tasks were given to another
     * worker), and its ids are above the ones this task still holds.
     */
    void forgetAll();

    /**
     * Ids reserved in blocks of {@code block} in the catalog ({@link BatchIdReservations#reserveBatchIds}): never used twice,
     * even by a task that died after Kafka took batches it had not recorded. One catalog update per block.
     */
    static BatchIds reserved(Catalog catalog, String flow, int block) {
        return reserved(catalog, flow, block, table -> 0);
    }

    /**
     * {@link #reserved(Catalog, String, int)} above {@code kafka(table)} as well: the batch id of the table's offset in
     * Kafka. A catalog restored from a backup (or the lost tail of an asynchronous failover) is behind Kafka, and its
     * counter alone would hand out ids that batches in Kafka already have (the sink drops such a batch as loaded).
     */
    static BatchIds reserved(Catalog catalog, String flow, int block, ToLongFunction<String> kafka) {
        // the end of the last block this task reserved for each table: a floor too, for a row that went back (deleted
        // by hand, restored) after this task sent batches whose offsets Connect has not committed yet
        Map<String, Long> reservedUpTo = new HashMap<>();
        return inBlocks(table -> {
            long floor = Math.max(kafka.applyAsLong(table), reservedUpTo.getOrDefault(table, 0L));
            long first = reserveAbove(catalog, flow, table, block, floor);
            reservedUpTo.put(table, first + block - 1);
            return first;
        }, block);
    }

    /** A reservation above {@code floor}; a row that is gone is written again first, as pending. */
    private static long reserveAbove(Catalog catalog, String flow, String table, int block, long floor) {
        try {
            return catalog.batchIds().reserveBatchIds(flow, table, block, floor);
        } catch (io.tablecdc.catalog.CatalogException e) {
            if (catalog.progress().getTable(flow, table).isPresent()) {
                throw e;
            }
            // the table's row was deleted by hand: the pipeline alone writes a Postgres table's row, as pending
            // (the apply task then follows it as a new table: copied again, or streamed on if not copied)
            org.slf4j.LoggerFactory.getLogger(BatchIds.class).warn("flow {}, table {}: its catalog row is gone"
                    + " (deleted by hand?); written again as pending", flow, table);
            catalog.progress().initTable(flow, table, io.tablecdc.catalog.Phase.PENDING);
            return catalog.batchIds().reserveBatchIds(flow, table, block, floor);
        }
    }

    /** The batch id of each table's offset in Kafka ({@code {"flow", "table"}} partitions), 0 when it has none. */
    static ToLongFunction<String> fromOffsets(org.apache.kafka.connect.storage.OffsetStorageReader reader, String flow) {
        // read at every reservation (one per block of ids): the catalog may go back while the task runs
        return table -> {
            if (reader == null) {
                return 0;
            }
            try {
                Map<String, Object> offset = reader.offset(ChangeBatcher.tablePartition(flow, table));
                return offset != null && offset.get(ChangeBatcher.BATCH_KEY) instanceof Number n ? n.longValue() : 0;
            } catch (RuntimeException e) {
                org.slf4j.LoggerFactory.getLogger(BatchIds.class).warn("flow {}, table {}: cannot read its offset in"
                        + " Kafka ({}); its batch ids come from the catalog alone this time", flow, table, e.toString());
                return 0;
            }
        };
    }

    /**
     * Ids a copy task reserves for its table while its claim ({@code owner}, {@code attempt}) holds: a reservation
     * the catalog refuses (the lease expired or another task claimed the table) throws {@link LeaseLostException}.
     */
    static BatchIds reservedWhileHolding(Catalog catalog, String flow, String owner, int attempt, int block) {
        return reservedWhileHolding(catalog, flow, owner, attempt, block, table -> 0);
    }

    /** {@link #reservedWhileHolding(Catalog, String, String, int, int)} above {@code kafka(table)} as well. */
    static BatchIds reservedWhileHolding(Catalog catalog, String flow, String owner, int attempt, int block,
                                         ToLongFunction<String> kafka) {
        return inBlocks(table -> catalog.copies().reserveCopyBatchIds(flow, table, owner, attempt, block,
                kafka.applyAsLong(table)).orElseThrow(() -> new LeaseLostException("batch id reservation")), block);
    }

    /**
     * Ids handed out from blocks of {@code block}: {@code reserve} returns the first id of a new block of a table
     * (the catalog's counter, {@link BatchIdReservations#reserveBatchIds}); a table's next block is reserved when its block is
     * used up or {@linkplain #forget forgotten}. Free of the catalog so that it can be tested on its own.
     */
    static BatchIds inBlocks(ToLongFunction<String> reserve, int block) {
        return new BatchIds() {
            private final Map<String, long[]> blocks = new HashMap<>();

            @Override
            public long next(String table) {
                long[] b = blocks.get(table);
                if (b == null || b[0] > b[1]) {
                    long first = reserve.applyAsLong(table);
                    b = new long[] {first, first + block - 1};
                    blocks.put(table, b);
                }
                return b[0]++;
            }

            @Override
            public void forget(String table) {
                blocks.remove(table);
            }

            @Override
            public void forgetAll() {
                blocks.clear();
            }
        };
    }

    /** A copy task's write the catalog refused: its claim no longer holds. */
    final class LeaseLostException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        LeaseLostException(String write) {
            super(write + " refused: the copy no longer holds the table's lease");
        }
    }

    /** Ids counting on from {@code last(table)}, looked up at a table's first use and after {@link #forget}. */
    static BatchIds countingFrom(ToLongFunction<String> last) {
        return new BatchIds() {
            private final Map<String, Long> next = new HashMap<>();

            @Override
            public long next(String table) {
                long id = next.computeIfAbsent(table, t -> last.applyAsLong(t) + 1);
                next.put(table, id + 1);
                return id;
            }

            @Override
            public void forget(String table) {
                next.remove(table);
            }

            @Override
            public void forgetAll() {
                next.clear();
            }
        };
    }
}
