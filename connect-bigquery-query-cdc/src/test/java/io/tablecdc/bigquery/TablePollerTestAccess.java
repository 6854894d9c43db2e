package io.tablecdc.bigquery;

import com.google.cloud.bigquery.FieldValueList;

import io.tablecdc.common.RecordHeaders;

/** Opens package-private parts of {@link TablePoller} to tests in other packages. */
public final class TablePollerTestAccess {
    private TablePollerTestAccess() {
    }

    public static RecordHeaders.Op changeOp(FieldValueList row) {
        return TablePoller.changeOp(row);
    }
}
