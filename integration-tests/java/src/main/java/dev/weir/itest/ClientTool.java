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
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
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
 * produce-consume BOOTSTRAP TOPIC COUNT VALUE_BYTES [KEY=VALUE ...]
 *     Producer with default settings (acks=all, idempotence on) sends COUNT
 *     records with keys, two headers and explicit timestamps; a consumer with
 *     assign() reads every partition back and compares key, value, headers
 *     and timestamp of each record. Prints "produced N" and "consumed N".
 *     Every KEY=VALUE is a client property given to the producer and the
 *     consumer alike (for example security.protocol=SSL,
 *     ssl.truststore.type=PEM, ssl.truststore.location=PATH).
 * consume-from BOOTSTRAP TOPIC PARTITION OFFSET
 *     assign() + seek(OFFSET), reads until the end offset and prints
 *     "record OFFSET VALUE" for every delivered record, then "consumed N".
 * admin BOOTSTRAP TOPIC CLUSTER_ID PORT
 *     AdminClient: createTopics (3 partitions, retention.ms and cleanup.policy
 *     set), describeTopics, describeConfigs (topic and broker "1"),
 *     describeCluster (CLUSTER_ID, one node 1 on PORT), listOffsets
 *     earliest/latest/max-timestamp after the producer wrote five records to
 *     partition 0, deleteTopics. Prints "admin ok".
 * reauth-produce BOOTSTRAP TOPIC SECONDS [KEY=VALUE ...]
 *     One producer (KEY=VALUE client properties, e.g. SASL) sends one record
 *     to partition 0 and waits for its ack, again and again for SECONDS
 *     seconds, on one connection whose SASL session the broker limits
 *     (connections.max.reauth.ms, KIP-368): the client re-authenticates on
 *     it by itself. Prints "produced N" and "reauthenticated R", R the
 *     producer's successful-reauthentication-total metric.
 * group-consume | assignor-churn | join-timing ...
 *     Consumer-group programs, see {@link GroupTool}.
 * </pre>
 */
public final class ClientTool {
    private static final long BASE_TIMESTAMP_MS = 1_700_000_000_000L;
    private static final Duration DEADLINE = Duration.ofSeconds(180);

    private ClientTool() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            fail("usage: ClientTool produce-consume|consume-from|admin|group-consume|assignor-churn|join-timing ...");
        }
        switch (args[0]) {
            case "produce-consume" -> {
                if (args.length < 5) {
                    fail("produce-consume BOOTSTRAP TOPIC COUNT VALUE_BYTES [KEY=VALUE ...]");
                }
                produceConsume(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        GroupTool.options(args, 5));
            }
            case "consume-from" -> {
                requireArgs(args, 5);
                consumeFrom(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]));
            }
            case "admin" -> {
                requireArgs(args, 5);
                admin(args[1], args[2], args[3], Integer.parseInt(args[4]));
            }
            case "reauth-produce" -> {
                if (args.length < 4) {
                    fail("reauth-produce BOOTSTRAP TOPIC SECONDS [KEY=VALUE ...]");
                }
                reauthProduce(args[1], args[2], Integer.parseInt(args[3]), GroupTool.options(args, 4));
            }
            case "group-consume" -> {
                if (args.length < 4) {
                    fail("group-consume BOOTSTRAP TOPIC GROUP [KEY=VALUE ...]");
                }
                groupLogsAtInfo();
                GroupTool.groupConsume(args);
            }
            case "assignor-churn" -> {
                requireArgs(args, 5);
                groupLogsAtInfo();
                GroupTool.assignorChurn(args);
            }
            case "join-timing" -> {
                requireArgs(args, 4);
                groupLogsAtInfo();
                GroupTool.joinTiming(args);
            }
            default -> fail("unknown subcommand " + args[0]);
        }
    }

    /**
     * Logs the consumer's group coordination at INFO on stderr, where the
     * tests look for UNKNOWN_MEMBER_ID (set before the first logger exists).
     */
    private static void groupLogsAtInfo() {
        System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals", "info");
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

    /** {@code reauth-produce}: see the class comment. */
    private static void reauthProduce(String bootstrap, String topic, int seconds,
            Map<String, String> clientProperties) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.putAll(clientProperties);
        long end = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
        long produced = 0;
        double reauthenticated = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            while (System.nanoTime() < end) {
                byte[] value = ("record " + produced).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
                produced++;
            }
            for (var metric : producer.metrics().entrySet()) {
                if (metric.getKey().name().equals("successful-reauthentication-total")
                        && metric.getKey().group().equals("producer-metrics")) {
                    reauthenticated += ((Number) metric.getValue().metricValue()).doubleValue();
                }
            }
        }
        System.out.println("produced " + produced);
        System.out.println("reauthenticated " + (long) reauthenticated);
    }

    private static void produceConsume(String bootstrap, String topic, int count, int valueBytes,
            Map<String, String> clientProperties) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.putAll(clientProperties);
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
        c.putAll(clientProperties);
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

    private static void check(boolean ok, String message) {
        if (!ok) {
            fail(message);
        }
    }

    private static void checkConfig(Config config, String what, String key, String value, ConfigEntry.ConfigSource source) {
        ConfigEntry entry = config.get(key);
        check(entry != null, what + " lacks " + key + ": " + config);
        check(value.equals(entry.value()), what + " " + key + " = " + entry.value() + ", expected " + value);
        check(entry.source() == source, what + " " + key + " source " + entry.source() + ", expected " + source);
    }

    /** Timestamps (ms after BASE_TIMESTAMP_MS) of the five admin records: the largest is at offset 1. */
    private static final long[] ADMIN_TIMESTAMPS = {1_000, 5_000, 2_000, 4_000, 3_000};

    private static void admin(String bootstrap, String topic, String clusterId, int port) throws Exception {
        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        a.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(a)) {
            NewTopic newTopic = new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
            CreateTopicsResult created = admin.createTopics(List.of(newTopic));
            created.all().get();
            check(created.numPartitions(topic).get() == 3, "created partitions " + created.numPartitions(topic).get());
            check(created.replicationFactor(topic).get() == 1, "created replication factor " + created.replicationFactor(topic).get());
            Uuid topicId = created.topicId(topic).get();
            check(topicId != null && !Uuid.ZERO_UUID.equals(topicId), "created topic id " + topicId);
            Config createdConfig = created.config(topic).get();
            checkConfig(createdConfig, "createTopics", "retention.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            checkConfig(createdConfig, "createTopics", "segment.bytes", "1073741824", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
                fail("creating " + topic + " twice succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof TopicExistsException, "second createTopics failed with " + e.getCause());
            }
            System.out.println("created " + topic + " " + topicId);

            TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            check(description != null, "describeTopics lacks " + topic);
            check(topicId.equals(description.topicId()), "describeTopics id " + description.topicId() + ", created " + topicId);
            check(!description.isInternal(), topic + " is not internal");
            check(description.partitions().size() == 3, "described partitions " + description.partitions());
            for (int i = 0; i < 3; i++) {
                TopicPartitionInfo p = description.partitions().get(i);
                check(p.partition() == i, "partition order " + description.partitions());
                check(p.leader() != null && p.leader().id() == 1, "leader of " + i + ": " + p.leader());
                check(p.replicas().size() == 1 && p.replicas().get(0).id() == 1, "replicas of " + i + ": " + p.replicas());
                check(p.isr().size() == 1 && p.isr().get(0).id() == 1, "isr of " + i + ": " + p.isr());
            }

            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, "1");
            Map<ConfigResource, Config> configs = admin.describeConfigs(List.of(topicResource, brokerResource)).all().get();
            Config topicConfig = configs.get(topicResource);
            checkConfig(topicConfig, "topic config", "retention.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            checkConfig(topicConfig, "topic config", "cleanup.policy", "delete", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            checkConfig(topicConfig, "topic config", "segment.bytes", "1073741824", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            checkConfig(topicConfig, "topic config", "max.message.bytes", "1048588", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            Config brokerConfig = configs.get(brokerResource);
            checkConfig(brokerConfig, "broker config", "log.segment.bytes", "1073741824", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            checkConfig(brokerConfig, "broker config", "node.id", "1", ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG);

            DescribeClusterResult cluster = admin.describeCluster();
            check(clusterId.equals(cluster.clusterId().get()), "cluster id " + cluster.clusterId().get() + ", expected " + clusterId);
            Node controller = cluster.controller().get();
            check(controller != null && controller.id() == 1, "controller " + controller);
            List<Node> nodes = new ArrayList<>(cluster.nodes().get());
            check(nodes.size() == 1, "nodes " + nodes);
            check(nodes.get(0).id() == 1 && nodes.get(0).port() == port && "127.0.0.1".equals(nodes.get(0).host()),
                    "node " + nodes.get(0) + ", expected 1 at 127.0.0.1:" + port);

            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = 0; i < ADMIN_TIMESTAMPS.length; i++) {
                    acks.add(producer.send(new ProducerRecord<>(topic, 0, BASE_TIMESTAMP_MS + ADMIN_TIMESTAMPS[i],
                            key(i), value(i, 16))));
                }
                producer.flush();
                for (int i = 0; i < acks.size(); i++) {
                    long offset = acks.get(i).get().offset();
                    check(offset == i, "record " + i + " written at offset " + offset);
                }
            }

            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            ListOffsetsResultInfo earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).partitionResult(p0).get();
            check(earliest.offset() == 0, "earliest offset " + earliest.offset());
            ListOffsetsResultInfo latest = admin.listOffsets(Map.of(p0, OffsetSpec.latest())).partitionResult(p0).get();
            check(latest.offset() == ADMIN_TIMESTAMPS.length, "latest offset " + latest.offset());
            ListOffsetsResultInfo max = admin.listOffsets(Map.of(p0, OffsetSpec.maxTimestamp())).partitionResult(p0).get();
            check(max.offset() == 1 && max.timestamp() == BASE_TIMESTAMP_MS + 5_000,
                    "max timestamp at offset " + max.offset() + " ts " + max.timestamp() + ", expected 1 ts " + (BASE_TIMESTAMP_MS + 5_000));
            ListOffsetsResultInfo emptyLatest = admin.listOffsets(Map.of(p1, OffsetSpec.latest())).partitionResult(p1).get();
            check(emptyLatest.offset() == 0, "latest offset of empty partition 1: " + emptyLatest.offset());
            System.out.println("offsets earliest=" + earliest.offset() + " latest=" + latest.offset() + " max=" + max.offset());

            admin.deleteTopics(List.of(topic)).all().get();
            Set<String> names = admin.listTopics().names().get();
            check(!names.contains(topic), "listTopics still has " + topic + ": " + names);
            try {
                admin.describeTopics(List.of(topic)).allTopicNames().get();
                fail("describeTopics of deleted " + topic + " succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof UnknownTopicOrPartitionException, "describeTopics after delete failed with " + e.getCause());
            }
        }
        System.out.println("admin ok");
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
