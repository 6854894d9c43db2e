package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Tables are single-partition topics, so how the sink's consumer group assigns partitions decides whether a sink's
 * tasks share the tables. Connect's default consumer strategy (range first) gives every single-partition topic to the
 * same task; the examples' {@code consumer.override.partition.assignment.strategy} (cooperative sticky) spreads them.
 */
class SinkAssignmentIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";

    @Test
    void theExamplesAssignmentStrategySpreadsSingleParttionTopicsOverTheTasks() throws Exception {
        String catalogUrl = stack.postgres().createDatabase("assign_catalog");
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            for (String t : List.of("assignit.a", "assignit.b", "assignit.c", "assignit.d")) {
                producer.topic(t);
            }
        }
        Map<String, String> spread = config(catalogUrl, "assign-spread");
        spread.put("consumer.override.partition.assignment.strategy", COOPERATIVE);
        Map<String, String> plain = config(catalogUrl, "assign-default");
        stack.connect().rest().putConfig("assign-spread", spread);
        stack.connect().rest().putConfig("assign-default", plain);
        stack.connect().rest().awaitRunning("assign-spread", 2, Duration.ofSeconds(60));
        stack.connect().rest().awaitRunning("assign-default", 2, Duration.ofSeconds(60));
        try {
            // cooperative sticky may first give all four to the task that joined first, then moves two in a follow-up rebalance
            assertEquals(List.of(2, 2), awaitStable("connect-assign-spread", List.of(2, 2)), "cooperative sticky: 2 tables per task");
            // range (Connect's default) gives each topic's only partition to the same member, whatever the order of joining
            assertEquals(List.of(0, 4), awaitStable("connect-assign-default", List.of(0, 4)), "Connect's default: every table on one task");
        } finally {
            stack.connect().rest().delete("assign-spread");
            stack.connect().rest().delete("assign-default");
        }
    }

    private static Map<String, String> config(String catalogUrl, String name) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, name);
        config.put("tasks.max", "2");
        config.put("topics.regex", "assignit\\..*");
        config.put("stage.local.dir", StackPaths.workDir(name + "-local").toString());
        return config;
    }

    /**
     * Partitions held by each member (sorted) once the group is stable with two members holding {@code expected}; the last
     * state seen when that never happens within the deadline.
     */
    private static List<Integer> awaitStable(String group, List<Integer> expected) throws Exception {
        try (Admin admin = Admin.create(Map.<String, Object>of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            List<Integer> counts = List.of();
            Map<String, Integer> last = new TreeMap<>();
            while (System.nanoTime() < deadline) {
                ConsumerGroupDescription d;
                try {
                    d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                } catch (java.util.concurrent.ExecutionException e) {
                    if (!(e.getCause() instanceof org.apache.kafka.common.errors.GroupIdNotFoundException)) {
                        throw e;
                    }
                    Thread.sleep(500); // the tasks' consumers have not joined yet
                    continue;
                }
                last.clear();
                int total = 0;
                for (MemberDescription m : d.members()) {
                    int n = m.assignment().topicPartitions().size();
                    last.put(m.consumerId(), n);
                    total += n;
                }
                counts = new ArrayList<>(last.values());
                counts.sort(null);
                if (d.groupState() == org.apache.kafka.common.GroupState.STABLE && total == 4 && counts.equals(expected)) {
                    return counts;
                }
                Thread.sleep(500);
            }
            return counts;
        }
    }
}
