package io.tablecdc.catalog;

/**
 * The epoch by which a Postgres pipeline flow's apply task owns the flow ({@code cdc_flow.apply_epoch}), as the
 * condition its catalog writes carry: {@link #and()} goes into a write's {@code WHERE} (or the {@code SELECT} of an
 * upsert) and {@link #bind} appends its values, so the statement changes nothing once another apply task has taken a
 * higher epoch. The condition locks the flow's row ({@code FOR SHARE}) until the write's transaction ends: a take waits
 * for a write that passed it, and a write that waited for a take sees the new epoch and changes nothing. {@link #NONE}
 * (every other writer) adds nothing.
 *
 * <p>Plain JDBC values only (see {@link Sql}): the operator commands load this class without Kafka's jars.
 */
final class ApplyFence {

    /** No fence: the writes of copy tasks, the sink, query CDC tasks and the operator commands. */
    static final ApplyFence NONE = new ApplyFence(null, 0);

    private final String flow;
    private final long epoch;

    ApplyFence(String flow, long epoch) {
        this.flow = flow;
        this.epoch = epoch;
    }

    String flow() {
        return flow;
    }

    long epoch() {
        return epoch;
    }

    boolean none() {
        return flow == null;
    }

    /** The condition to append to a {@code WHERE} clause: true while the flow's apply epoch is this one. */
    String and() {
        return none() ? "" : " AND EXISTS (SELECT 1 FROM " + Sql.FLOW + " apply_fence WHERE apply_fence.flow_name = ?"
                + " AND apply_fence.apply_epoch = ? FOR SHARE)";
    }

    /** {@code values} followed by the values of {@link #and()}, which must be the statement's last placeholders. */
    Object[] bind(Object... values) {
        if (none()) {
            return values;
        }
        return Sql.join(values, flow, epoch);
    }
}
