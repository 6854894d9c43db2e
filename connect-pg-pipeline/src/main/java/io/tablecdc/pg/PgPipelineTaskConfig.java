package io.tablecdc.pg;

import java.util.HashMap;
import java.util.Map;

/**
 * What {@link PgPipelineSourceConnector} tells each of its tasks besides the connector's own configuration (the
 * flow, the task's role and index), under property names that only this class knows: the connector writes them
 * with {@link #taskProps}, the tasks read them with {@link #of}.
 */
final class PgPipelineTaskConfig {
    /** The flow (the connector's name). */
    static final String FLOW = "tablecdc.flow";
    /** {@code apply}, {@code copy} or {@code apply+copy}. */
    static final String ROLE = "tablecdc.role";
    /** The task's index among the connector's tasks. */
    static final String TASK_INDEX = "tablecdc.task.index";

    /** What a task does; {@link PgPipelineSourceTask} hands every call to the role's task. */
    enum Role {
        APPLY("apply"),
        COPY("copy"),
        /** Both in one task: a flow that copies with {@code tasks.max=1}. */
        APPLY_AND_COPY("apply+copy");

        final String value;

        Role(String value) {
            this.value = value;
        }

        /** The role a task property names; a task without one (or with an unknown one) applies. */
        static Role of(String value) {
            return COPY.value.equals(value) ? COPY : APPLY_AND_COPY.value.equals(value) ? APPLY_AND_COPY : APPLY;
        }
    }

    private final String flow;
    private final Role role;
    private final String taskIndex;

    private PgPipelineTaskConfig(String flow, Role role, String taskIndex) {
        this.flow = flow;
        this.role = role;
        this.taskIndex = taskIndex;
    }

    /** A task's properties: the connector's, with the flow, the role and the task's index. */
    static Map<String, String> taskProps(Map<String, String> connectorProps, String flow, Role role, int taskIndex) {
        Map<String, String> task = new HashMap<>(connectorProps);
        task.put(FLOW, flow);
        task.put(ROLE, role.value);
        task.put(TASK_INDEX, Integer.toString(taskIndex));
        return task;
    }

    /**
     * Reads a task's properties. Without the connector's properties (a task started by hand), the flow is the
     * {@code name} property or {@code pg-pipeline}, the role apply and the index {@code ?}.
     */
    static PgPipelineTaskConfig of(Map<String, String> props) {
        return new PgPipelineTaskConfig(props.getOrDefault(FLOW, props.getOrDefault("name", "pg-pipeline")),
                Role.of(props.get(ROLE)), props.getOrDefault(TASK_INDEX, "?"));
    }

    String flow() {
        return flow;
    }

    Role role() {
        return role;
    }

    /** The task's index among the connector's tasks, or {@code ?}. */
    String taskIndex() {
        return taskIndex;
    }
}
