package io.tablecdc.e2e.flows;

import java.util.HashMap;
import java.util.Map;

/** The tablecdc headers of one record, as a source writes them (see the record contract). */
public final class Headers {
    private Headers() {
    }

    public static Map<String, String> of(String flow, String table, String op, long version, long batch, boolean last) {
        Map<String, String> headers = new HashMap<>();
        headers.put("tablecdc.flow", flow);
        headers.put("tablecdc.table", table);
        headers.put("tablecdc.op", op);
        headers.put("tablecdc.version", Long.toString(version));
        headers.put("tablecdc.batch", Long.toString(batch));
        if (last) {
            headers.put("tablecdc.batch.last", "true");
        }
        return headers;
    }
}
