package io.tablecdc.e2e.flows;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.storage.Converter;

/**
 * Writes Connect records to Kafka exactly as a source task's worker would with JsonConverter (schemas on), or with
 * the converters given: used by tests and benchmarks to feed the sink without a source connector.
 */
public final class RecordProducer implements AutoCloseable {
    private final String bootstrap;
    private final KafkaProducer<byte[], byte[]> producer;
    private final Converter keyConverter;
    private final Converter valueConverter;
    private volatile Exception failure;

    public RecordProducer(String bootstrap) {
        this(bootstrap, json(true), json(false));
    }

    /** A producer whose records' keys and values are written by the given (configured) converters. */
    public RecordProducer(String bootstrap, Converter keyConverter, Converter valueConverter) {
        this.bootstrap = bootstrap;
        this.producer = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap, "linger.ms", "20", "batch.size", "262144", "enable.idempotence", "true"),
                new ByteArraySerializer(), new ByteArraySerializer());
        this.keyConverter = keyConverter;
        this.valueConverter = valueConverter;
    }

    private static Converter json(boolean isKey) {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), isKey);
        return converter;
    }

    /** Creates a one-partition topic if it does not exist. */
    public RecordProducer topic(String topic) throws Exception {
        try (Admin admin = Admin.create(Map.<String, Object>of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
        return this;
    }

    /** Sends one record; {@code headers} are written as UTF-8 text, {@code key} may be null. */
    public void send(String topic, Struct key, Struct value, Map<String, String> headers) throws Exception {
        RecordHeaders kafkaHeaders = new RecordHeaders();
        headers.forEach((k, v) -> kafkaHeaders.add(k, v.getBytes(StandardCharsets.UTF_8)));
        byte[] keyBytes = key == null ? null : keyConverter.fromConnectData(topic, key.schema(), key);
        byte[] valueBytes = value == null ? null : valueConverter.fromConnectData(topic, value.schema(), value);
        producer.send(new ProducerRecord<>(topic, null, keyBytes, valueBytes, kafkaHeaders)).get(30, TimeUnit.SECONDS);
    }

    /** Sends one record without waiting for the acknowledgement; {@link #flush()} waits for all. */
    public void sendAsync(String topic, Struct key, Struct value, Map<String, String> headers) {
        RecordHeaders kafkaHeaders = new RecordHeaders();
        headers.forEach((k, v) -> kafkaHeaders.add(k, v.getBytes(StandardCharsets.UTF_8)));
        byte[] keyBytes = key == null ? null : keyConverter.fromConnectData(topic, key.schema(), key);
        byte[] valueBytes = value == null ? null : valueConverter.fromConnectData(topic, value.schema(), value);
        producer.send(new ProducerRecord<>(topic, null, keyBytes, valueBytes, kafkaHeaders), (metadata, error) -> {
            if (error != null) {
                failure = error;
            }
        });
    }

    /** Waits until every record sent so far is acknowledged; fails with the first send error. */
    public void flush() {
        producer.flush();
        if (failure != null) {
            throw new IllegalStateException("a record could not be sent: " + failure.getMessage(), failure);
        }
    }

    /** Sends raw bytes (for records no converter would accept). */
    public void sendRaw(String topic, byte[] key, byte[] value) throws Exception {
        producer.send(new ProducerRecord<>(topic, key, value)).get(30, TimeUnit.SECONDS);
    }

    /** Sends raw bytes with {@code headers} written as UTF-8 text (a block record, for one). */
    public void sendRaw(String topic, byte[] key, byte[] value, Map<String, String> headers) throws Exception {
        RecordHeaders kafkaHeaders = new RecordHeaders();
        headers.forEach((k, v) -> kafkaHeaders.add(k, v.getBytes(StandardCharsets.UTF_8)));
        producer.send(new ProducerRecord<>(topic, null, key, value, kafkaHeaders)).get(30, TimeUnit.SECONDS);
    }

    /** As {@link #sendRaw(String, byte[], byte[], Map)}, without waiting for the acknowledgement; {@link #flush()} waits for all. */
    public void sendRawAsync(String topic, byte[] key, byte[] value, Map<String, String> headers) {
        RecordHeaders kafkaHeaders = new RecordHeaders();
        headers.forEach((k, v) -> kafkaHeaders.add(k, v.getBytes(StandardCharsets.UTF_8)));
        producer.send(new ProducerRecord<>(topic, null, key, value, kafkaHeaders), (metadata, error) -> {
            if (error != null) {
                failure = error;
            }
        });
    }

    @Override
    public void close() {
        producer.close();
    }
}
