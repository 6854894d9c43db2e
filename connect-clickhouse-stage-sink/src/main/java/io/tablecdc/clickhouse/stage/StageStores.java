package io.tablecdc.clickhouse.stage;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;

/** The stage store a sink configuration names ({@code stage.uri}): S3, Google Cloud Storage or a local directory. */
public final class StageStores {
    private StageStores() {
    }

    public static StageStore open(ClickHouseStageSinkConfig config) {
        if ("gs".equals(config.stageUri().getScheme())) {
            return S3StageStore.gcs(config.stageUri(), config.gcsEndpoint(), config.gcsHmacAccessId(), config.gcsHmacSecret().value());
        }
        if ("s3".equals(config.stageUri().getScheme())) {
            return new S3StageStore(config.stageUri(), config.s3Endpoint(), config.s3Region(), config.s3AccessKey(),
                    config.s3SecretKey().value());
        }
        return new FileStageStore(config.stageUri());
    }
}
