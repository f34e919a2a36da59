package dev.weir.itest;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the official Java client (kafka-clients) against a Weir broker for
 * the Rust integration tests. Every subcommand checks its own outcome and
 * exits non-zero with a message on stderr when something is wrong; on
 * success it prints machine-readable lines on stdout.
 *
 * <pre>
 * produce-consume BOOTSTRAP TOPIC COUNT VALUE_BYTES
 *     Producer with default settings (acks=all, idempotence on) sends COUNT
 *     records with keys, two headers and explicit timestamps; a consumer with
 *     assign() reads every partition back and compares key, value, headers
 *     and timestamp of each record. Prints "produced N" and "consumed N".
 * consume-from BOOTSTRAP TOPIC PARTITION OFFSET
 *     assign() + seek(OFFSET), reads until the end offset and prints
 *     "record OFFSET VALUE" for every delivered record, then "consumed N".
 * </pre>
 */
public final class ClientTool {
    private static final long BASE_TIMESTAMP_MS = 1_700_000_000_000L;
    private static final Duration DEADLINE = Duration.ofSeconds(180);

    private ClientTool() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            fail("usage: ClientTool produce-consume|consume-from ...");
        }
        switch (args[0]) {
            case "produce-consume" -> {
                requireArgs(args, 5);
                produceConsume(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            }
            case "consume-from" -> {
                requireArgs(args, 5);
                consumeFrom(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]));
            }
            default -> fail("unknown subcommand " + args[0]);
        }
    }

    private static void requireArgs(String[] args, int n) {
        if (args.length != n) {
            fail(args[0] + " takes " + (n - 1) + " arguments, got " + (args.length - 1));
        }
    }

    private static void fail(String message) {
        System.err.println("FAIL: " + message);
        System.exit(2);
    }

    private static byte[] key(int index) {
        return ("key-" + index).getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] value(int index, int size) {
        byte[] v = new byte[size];
        for (int i = 0; i < size; i++) {
            v[i] = (byte) ('a' + ((index * 31 + i) % 26));
        }
        return v;
    }

    private static List<Header> headers(int index) {
        List<Header> h = new ArrayList<>();
        h.add(new RecordHeader("index", ByteBuffer.allocate(4).putInt(index).array()));
        h.add(new RecordHeader("origin", "weir-itest".getBytes(StandardCharsets.UTF_8)));
        return h;
    }

    private static long timestamp(int index) {
        return BASE_TIMESTAMP_MS + index;
    }

    private static void produceConsume(String bootstrap, String topic, int count, int valueBytes)
            throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<Future<RecordMetadata>> acks = new ArrayList<>(count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                acks.add(producer.send(new ProducerRecord<>(
                        topic, null, timestamp(i), key(i), value(i, valueBytes), headers(i))));
            }
            producer.flush();
            for (Future<RecordMetadata> ack : acks) {
                ack.get();
            }
        }
        System.out.println("produced " + count);

        Properties c = consumerProperties(bootstrap);
        BitSet seen = new BitSet(count);
        int consumed = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> partitions = partitionsOf(consumer, topic);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (!reachedEnd(consumer, end)) {
                if (System.nanoTime() > deadline) {
                    fail("timed out after consuming " + consumed + " of " + count + " records");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    String k = new String(r.key(), StandardCharsets.UTF_8);
                    if (!k.startsWith("key-")) {
                        fail("unexpected key " + k + " at " + r.partition() + "/" + r.offset());
                    }
                    int index = Integer.parseInt(k.substring(4));
                    if (index < 0 || index >= count || seen.get(index)) {
                        fail("unexpected or duplicate record " + k + " at " + r.partition() + "/" + r.offset());
                    }
                    seen.set(index);
                    consumed++;
                    if (!Arrays.equals(r.value(), value(index, valueBytes))) {
                        fail("value of " + k + " differs at " + r.partition() + "/" + r.offset());
                    }
                    if (r.timestamp() != timestamp(index)) {
                        fail("timestamp of " + k + " is " + r.timestamp() + ", expected " + timestamp(index));
                    }
                    Header[] got = r.headers().toArray();
                    List<Header> want = headers(index);
                    if (got.length != want.size()) {
                        fail("record " + k + " has " + got.length + " headers, expected " + want.size());
                    }
                    for (int h = 0; h < got.length; h++) {
                        if (!got[h].key().equals(want.get(h).key())
                                || !Arrays.equals(got[h].value(), want.get(h).value())) {
                            fail("header " + h + " of " + k + " differs");
                        }
                    }
                }
            }
        }
        if (consumed != count || seen.cardinality() != count) {
            fail("consumed " + consumed + " records (" + seen.cardinality() + " distinct), expected " + count);
        }
        System.out.println("consumed " + consumed);
    }

    private static void consumeFrom(String bootstrap, String topic, int partition, long offset) {
        Properties c = consumerProperties(bootstrap);
        int consumed = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, partition);
            List<TopicPartition> partitions = List.of(tp);
            consumer.assign(partitions);
            consumer.seek(tp, offset);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (!reachedEnd(consumer, end)) {
                if (System.nanoTime() > deadline) {
                    fail("timed out at position " + consumer.position(tp) + ", end " + end.get(tp));
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    String v = r.value() == null ? "<null>" : new String(r.value(), StandardCharsets.UTF_8);
                    System.out.println("record " + r.offset() + " " + v);
                    consumed++;
                }
            }
        }
        System.out.println("consumed " + consumed);
    }

    private static Properties consumerProperties(String bootstrap) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        return c;
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<PartitionInfo> infos = consumer.partitionsFor(topic, DEADLINE);
        if (infos == null || infos.isEmpty()) {
            fail("topic " + topic + " has no partitions in metadata");
        }
        List<TopicPartition> out = new ArrayList<>();
        for (PartitionInfo info : infos) {
            out.add(new TopicPartition(topic, info.partition()));
        }
        return out;
    }

    private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
