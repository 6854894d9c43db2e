package io.tablecdc.e2e.objectstore;

import com.adobe.testing.s3mock.S3MockApplication;
import org.apache.catalina.connector.Connector;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * The object store of the local test stack: S3Mock (an S3-compatible server) started in this JVM on
 * 127.0.0.1 at an ephemeral HTTP port, with the bucket {@value #BUCKET} created.
 *
 * <p><b>Test fixture.</b> Deployments use a real object store. Set {@code TABLECDC_S3_ENDPOINT} (with
 * {@code TABLECDC_S3_BUCKET}, {@code TABLECDC_S3_ACCESS_KEY}, {@code TABLECDC_S3_SECRET_KEY},
 * {@code TABLECDC_S3_REGION}) to use an external S3-compatible store instead; {@link #start} then starts
 * nothing and assumes the bucket exists.
 */
public final class LocalObjectStore implements AutoCloseable {

    public static final String BUCKET = "tablecdc";
    // S3Mock accepts any credentials; these are what ClickHouse's s3() and the AWS SDK send
    private static final String LOCAL_ACCESS_KEY = "tablecdc";
    private static final String LOCAL_SECRET_KEY = "tablecdc-secret";
    private static final String LOCAL_REGION = "us-east-1";

    private final S3MockApplication s3Mock;
    private final String endpoint;
    private final String bucket;
    private final String region;
    private final String accessKey;
    private final String secretKey;

    private LocalObjectStore(S3MockApplication s3Mock, String endpoint, String bucket, String region,
                             String accessKey, String secretKey) {
        this.s3Mock = s3Mock;
        this.endpoint = endpoint;
        this.bucket = bucket;
        this.region = region;
        this.accessKey = accessKey;
        this.secretKey = secretKey;
    }

    /** Starts S3Mock keeping its objects under {@code workDir}, or points at {@code TABLECDC_S3_ENDPOINT}. */
    public static LocalObjectStore start(Path workDir) {
        String external = System.getenv("TABLECDC_S3_ENDPOINT");
        if (external != null && !external.isBlank()) {
            return new LocalObjectStore(null, external.replaceAll("/+$", ""),
                    env("TABLECDC_S3_BUCKET", BUCKET), env("TABLECDC_S3_REGION", LOCAL_REGION),
                    env("TABLECDC_S3_ACCESS_KEY", LOCAL_ACCESS_KEY), env("TABLECDC_S3_SECRET_KEY", LOCAL_SECRET_KEY));
        }
        Path root = workDir.resolve("s3mock");
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + root, e);
        }
        // S3Mock adds entries to this map, so it must be mutable.
        Map<String, Object> options = new HashMap<>();
        options.put("http.port", 0);
        options.put("server.port", 0); // its HTTPS port; unused, but must not collide with a neighbour's
        options.put("server.address", "127.0.0.1");
        options.put("spring.main.sources", LoopbackConnectors.class.getName());
        options.put("com.adobe.testing.s3mock.store.root", root.toAbsolutePath().toString());
        options.put("com.adobe.testing.s3mock.store.retainFilesOnExit", false);
        options.put("com.adobe.testing.s3mock.store.initialBuckets", BUCKET);
        options.put("com.adobe.testing.s3mock.store.region", LOCAL_REGION);
        options.put("silent", true);
        // keeps Spring Boot from installing a JVM shutdown hook and a second logging setup per start
        options.put("spring.main.register-shutdown-hook", false);
        S3MockApplication s3Mock = S3MockApplication.start(options);
        return new LocalObjectStore(s3Mock, "http://127.0.0.1:" + s3Mock.getHttpPort(), BUCKET, LOCAL_REGION,
                LOCAL_ACCESS_KEY, LOCAL_SECRET_KEY);
    }

    /** The S3 endpoint, e.g. {@code http://127.0.0.1:41234}; objects are addressed path-style below it. */
    public String endpoint() {
        return endpoint;
    }

    public String bucket() {
        return bucket;
    }

    public String region() {
        return region;
    }

    public String accessKey() {
        return accessKey;
    }

    public String secretKey() {
        return secretKey;
    }

    /** The path-style URL of {@code key}, the form ClickHouse's {@code s3()} takes. */
    public String url(String key) {
        return endpoint + "/" + bucket + "/" + key;
    }

    /** A new client for this store; the caller closes it. */
    public S3Client newClient() {
        return S3Client.builder()
                .endpointOverride(URI.create(endpoint))
                .region(Region.of(region))
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(accessKey, secretKey)))
                // S3Mock serves buckets only as paths, not as host names
                .forcePathStyle(true)
                .build();
    }

    @Override
    public void close() {
        if (s3Mock != null) {
            s3Mock.stop();
        }
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isBlank() ? fallback : value;
    }

    /**
     * Added to S3Mock's Spring context: its plain-HTTP connector is built without an address, so it would
     * listen on every interface; this binds it to loopback like everything else in the local stack.
     */
    @Configuration(proxyBeanMethods = false)
    public static class LoopbackConnectors {
        @Bean
        static BeanPostProcessor loopbackConnector() {
            return new BeanPostProcessor() {
                @Override
                public Object postProcessBeforeInitialization(Object bean, String beanName) {
                    if (bean instanceof Connector connector) {
                        connector.setProperty("address", "127.0.0.1");
                    }
                    return bean;
                }
            };
        }
    }
}
