package io.tablecdc.clickhouse.stage;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;

/**
 * A stage store in an S3 bucket ({@code s3://bucket/prefix}) on AWS or any S3-compatible endpoint, read by
 * ClickHouse through {@code s3()}; or in a Google Cloud Storage bucket ({@code gs://bucket/prefix}) through
 * GCS's S3-compatible XML API with HMAC keys, read by ClickHouse through {@code gcs()}.
 */
public final class S3StageStore implements StageStore {
    private final S3Client s3;
    private final String bucket;
    private final String prefix;
    private final String endpoint;
    private final String accessKey;
    private final String secretKey;
    private final String scheme;
    private final String tableFunction;

    /** The GCS XML API endpoint that {@code gs://} uses unless another is configured. */
    public static final String GCS_ENDPOINT = "https://storage.googleapis.com";

    /**
     * A {@code gs://bucket/prefix} store: GCS's S3-compatible XML API at {@code endpoint} (default
     * {@link #GCS_ENDPOINT}) with an HMAC key of a service account.
     */
    public static S3StageStore gcs(URI uri, String endpoint, String hmacAccessId, String hmacSecret) {
        return new S3StageStore(uri, endpoint == null || endpoint.isBlank() ? GCS_ENDPOINT : endpoint, "auto",
                hmacAccessId, hmacSecret, "gs", "gcs");
    }

    /**
     * @param uri       {@code s3://bucket/prefix}
     * @param endpoint  an S3-compatible endpoint ({@code http://host:port}), or null for AWS
     * @param region    the bucket's region
     * @param accessKey null to use the default AWS credential chain (then ClickHouse needs its own access)
     */
    public S3StageStore(URI uri, String endpoint, String region, String accessKey, String secretKey) {
        this(uri, endpoint, region, accessKey, secretKey, "s3", "s3");
    }

    private S3StageStore(URI uri, String endpoint, String region, String accessKey, String secretKey, String scheme, String tableFunction) {
        this.scheme = scheme;
        this.tableFunction = tableFunction;
        this.bucket = uri.getHost();
        String path = uri.getPath() == null ? "" : uri.getPath();
        this.prefix = path.replaceAll("^/+", "").replaceAll("/+$", "");
        this.endpoint = endpoint == null || endpoint.isBlank() ? null : endpoint.replaceAll("/+$", "");
        this.accessKey = accessKey;
        this.secretKey = secretKey;
        AwsCredentialsProvider credentials = accessKey == null || accessKey.isBlank()
                ? DefaultCredentialsProvider.builder().build()
                : StaticCredentialsProvider.create(AwsBasicCredentials.create(accessKey, secretKey));
        var builder = S3Client.builder()
                // every call bounded, also on a connection that stops carrying data without closing: 10 s to
                // connect, 30 s without a byte from the store; the SDK retries a failed call (3 times, with backoff)
                .httpClientBuilder(UrlConnectionHttpClient.builder()
                        .connectionTimeout(java.time.Duration.ofSeconds(10))
                        .socketTimeout(java.time.Duration.ofSeconds(30)))
                .region(Region.of(region))
                .credentialsProvider(credentials);
        if (this.endpoint != null) {
            builder.endpointOverride(URI.create(this.endpoint)).forcePathStyle(true);
        }
        this.s3 = builder.build();
    }

    @Override
    public String upload(Path localFile, String key) throws IOException {
        String objectKey = objectKey(key);
        try {
            s3.putObject(b -> b.bucket(bucket).key(objectKey), RequestBody.fromFile(localFile));
        } catch (SdkException e) {
            throw new IOException("uploading " + scheme + "://" + bucket + "/" + objectKey + " failed: " + e.getMessage(), e);
        }
        return scheme + "://" + bucket + "/" + objectKey;
    }

    @Override
    public InputStream open(String uri) throws IOException {
        try {
            return s3.getObject(b -> b.bucket(bucket).key(keyOf(uri)));
        } catch (SdkException e) {
            throw new IOException("reading " + uri + " failed: " + e.getMessage(), e);
        }
    }

    @Override
    public boolean exists(String uri) throws IOException {
        try {
            s3.headObject(b -> b.bucket(bucket).key(keyOf(uri)));
            return true;
        } catch (NoSuchKeyException e) {
            return false;
        } catch (software.amazon.awssdk.services.s3.model.S3Exception e) {
            if (e.statusCode() == 404) {
                return false;
            }
            throw new IOException("checking " + uri + " failed: " + e.getMessage(), e);
        } catch (SdkException e) {
            throw new IOException("checking " + uri + " failed: " + e.getMessage(), e);
        }
    }

    @Override
    public void delete(String uri) throws IOException {
        try {
            s3.deleteObject(b -> b.bucket(bucket).key(keyOf(uri)));
        } catch (SdkException e) {
            throw new IOException("deleting " + uri + " failed: " + e.getMessage(), e);
        }
    }

    @Override
    public PullSource pullSource(String uri) {
        return source(keyOf(uri));
    }

    /**
     * Several files in one glob: their longest common folder, then {@code {rest 1,rest 2,…}} (ClickHouse reads every
     * object the glob matches, which are exactly these). Null when a file's name holds a character that a glob would
     * read as a pattern.
     */
    @Override
    public PullSource pullSource(java.util.List<String> uris) {
        if (uris.size() == 1) {
            return pullSource(uris.get(0));
        }
        java.util.List<String> keys = uris.stream().map(this::keyOf).toList();
        String common = keys.get(0).substring(0, keys.get(0).lastIndexOf('/') + 1);
        for (String key : keys) {
            while (!key.startsWith(common)) {
                common = common.substring(0, common.lastIndexOf('/', common.length() - 2) + 1);
            }
        }
        StringBuilder glob = new StringBuilder(common).append('{');
        for (int i = 0; i < keys.size(); i++) {
            String rest = keys.get(i).substring(common.length());
            if (rest.isEmpty() || rest.chars().anyMatch(c -> "*?{},\\[]".indexOf(c) >= 0)) {
                return null;
            }
            glob.append(i == 0 ? "" : ",").append(rest);
        }
        return source(glob.append('}').toString());
    }

    private PullSource source(String key) {
        String url = (endpoint != null ? endpoint + "/" + bucket : "https://" + bucket + ".s3.amazonaws.com") + "/" + key;
        Map<String, Object> params = new HashMap<>();
        params.put("stage_url", url);
        if (accessKey == null || accessKey.isBlank()) {
            return new PullSource(tableFunction + "({stage_url:String}, 'Avro')", params);
        }
        params.put("stage_access_key", accessKey);
        params.put("stage_secret_key", secretKey);
        return new PullSource(tableFunction + "({stage_url:String}, {stage_access_key:String}, {stage_secret_key:String}, 'Avro')", params);
    }

    private String objectKey(String key) {
        return prefix.isEmpty() ? key : prefix + "/" + key;
    }

    private String keyOf(String uri) {
        String expected = scheme + "://" + bucket + "/";
        if (!uri.startsWith(expected)) {
            throw new IllegalArgumentException(uri + " is not in the stage bucket " + bucket);
        }
        return uri.substring(expected.length());
    }

    @Override
    public void close() {
        s3.close();
    }
}
