package io.tablecdc.bigquery;

import java.util.Map;

final class TestAccess {
    private TestAccess() {
    }

    static void configure(BigQueryQueryCdcSourceConnector connector, Map<String, String> props) {
        connector.configureWithoutCatalog(props);
    }
}
