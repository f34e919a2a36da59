package dev.weir.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client checks of Weir's compatibility matrix (issue 5, area
 * "java"). Compiled against each pinned kafka-clients version; each mode is
 * one row of the matrix and exits non-zero with a message on the first
 * mismatch.
 *
 * <p>Usage: {@code ClientCheck <produce-consume|admin> <bootstrap> <suffix>},
 * where suffix makes the topic and group names unique to the run.
 *
 * <ul>
 *   <li>{@code produce-consume}: an idempotent producer (acks=all) writes
 *       records to chosen partitions of a new topic; a consumer in a new group
 *       reads exactly them, commits, and the committed offsets read back
 *       through {@code committed()} and {@code Admin.listConsumerGroupOffsets}.
 *   <li>{@code admin}: createTopics with a topic config, describeTopics,
 *       describeConfigs of the topic and of the broker, listOffsets
 *       (earliest, latest, max-timestamp) after writing records with chosen
 *       timestamps, describeCluster, deleteTopics.
 * </ul>
 */
public final class ClientCheck {
    private static final long TIMEOUT_S = 30;

    private ClientCheck() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            throw new IllegalArgumentException("usage: ClientCheck <produce-consume|admin> <bootstrap> <suffix>");
        }
        String bootstrap = args[1];
        String suffix = args[2];
        switch (args[0]) {
            case "produce-consume" -> produceConsume(bootstrap, suffix);
            case "admin" -> admin(bootstrap, suffix);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        System.out.println("ok: " + args[0]);
    }

    /** Fails the check with {@code message}. */
    static void check(boolean ok, String message) {
        if (!ok) {
            System.err.println("FAIL: " + message);
            System.exit(1);
        }
    }

    static void checkEq(Object expected, Object actual, String what) {
        check(expected.equals(actual), what + ": expected " + expected + ", got " + actual);
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static KafkaProducer<String, String> producer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static void createTopic(Admin admin, NewTopic topic) throws Exception {
        admin.createTopics(List.of(topic)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    static void produceConsume(String bootstrap, String suffix) throws Exception {
        String topic = "java-pc-" + suffix;
        String group = "java-pc-group-" + suffix;
        int partitions = 3;
        int perPartition = 10;
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, new NewTopic(topic, partitions, (short) 1));

            // What was written, as "partition/offset key=value".
            Set<String> written = new TreeSet<>();
            try (KafkaProducer<String, String> producer = producer(bootstrap)) {
                List<java.util.concurrent.Future<RecordMetadata>> sends = new ArrayList<>();
                List<ProducerRecord<String, String>> records = new ArrayList<>();
                for (int i = 0; i < partitions * perPartition; i++) {
                    ProducerRecord<String, String> r =
                            new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i);
                    records.add(r);
                    sends.add(producer.send(r));
                }
                producer.flush();
                Map<Integer, Long> next = new HashMap<>();
                for (int i = 0; i < sends.size(); i++) {
                    RecordMetadata md = sends.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                    ProducerRecord<String, String> r = records.get(i);
                    long expectedOffset = next.merge(r.partition(), 1L, Long::sum) - 1;
                    checkEq(expectedOffset, md.offset(), "offset of record " + i + " in partition " + r.partition());
                    written.add(md.partition() + "/" + md.offset() + " " + r.key() + "=" + r.value());
                }
            }

            Properties c = new Properties();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            Set<String> read = new TreeSet<>();
            Set<TopicPartition> tps = new HashSet<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            Map<TopicPartition, OffsetAndMetadata> expectedCommitted = new TreeMap<>(
                    (a, b) -> Integer.compare(a.partition(), b.partition()));
            for (TopicPartition tp : tps) {
                // The consumer commits its positions with the leader epoch of the
                // last record it read (0: the topic's partitions never changed leader).
                expectedCommitted.put(tp, new OffsetAndMetadata(perPartition, java.util.Optional.of(0), ""));
            }
            try (KafkaConsumer<String, String> consumer =
                    new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (read.size() < written.size() && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        check(read.add(r.partition() + "/" + r.offset() + " " + r.key() + "=" + r.value()),
                                "record read twice: " + r);
                    }
                }
                checkEq(written, read, "records read by group " + group);
                // Nothing beyond them.
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    check(false, "unexpected extra record " + r);
                }
                checkEq(tps, consumer.assignment(), "assignment");
                consumer.commitSync(Duration.ofSeconds(TIMEOUT_S));
                Map<TopicPartition, OffsetAndMetadata> committed =
                        consumer.committed(tps, Duration.ofSeconds(TIMEOUT_S));
                checkEq(new HashMap<>(expectedCommitted), new HashMap<>(committed), "consumer.committed()");
            }
            Map<TopicPartition, OffsetAndMetadata> listed = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(TIMEOUT_S, TimeUnit.SECONDS);
            checkEq(new HashMap<>(expectedCommitted), new HashMap<>(listed), "Admin.listConsumerGroupOffsets");
            System.out.println("read and committed " + read.size() + " records; offsets " + listed);
        }
    }

    static void admin(String bootstrap, String suffix) throws Exception {
        String topic = "java-admin-" + suffix;
        try (Admin admin = admin(bootstrap)) {
            // describeCluster: the one broker, node 0 (run.py's node.id=0) at the bootstrap address.
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get(TIMEOUT_S, TimeUnit.SECONDS);
            checkEq(1, nodes.size(), "describeCluster node count (" + nodes + ")");
            Node node = nodes.iterator().next();
            checkEq(0, node.id(), "describeCluster node id");
            checkEq(bootstrap, node.host() + ":" + node.port(), "describeCluster node address");
            String clusterId = cluster.clusterId().get(TIMEOUT_S, TimeUnit.SECONDS);
            check(clusterId != null && !clusterId.isEmpty(), "describeCluster cluster id is empty");
            Node controller = cluster.controller().get(TIMEOUT_S, TimeUnit.SECONDS);
            checkEq(0, controller.id(), "describeCluster controller id");

            // createTopics with a topic config.
            createTopic(admin, new NewTopic(topic, 2, (short) 1)
                    .configs(Map.of("retention.ms", "123456789", "cleanup.policy", "delete")));
            check(admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS).contains(topic),
                    "listTopics lacks " + topic);

            // describeTopics.
            TopicDescription desc = admin.describeTopics(List.of(topic)).allTopicNames()
                    .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
            checkEq(topic, desc.name(), "describeTopics name");
            check(!desc.isInternal(), "describeTopics: topic is internal");
            check(desc.topicId() != null && !desc.topicId().toString().isEmpty(), "describeTopics: no topic id");
            checkEq(2, desc.partitions().size(), "describeTopics partition count");
            for (int p = 0; p < 2; p++) {
                TopicPartitionInfo info = desc.partitions().get(p);
                checkEq(p, info.partition(), "describeTopics partition index");
                checkEq(0, info.leader().id(), "describeTopics leader of partition " + p);
                checkEq(List.of(0), info.replicas().stream().map(Node::id).toList(), "replicas of partition " + p);
                checkEq(List.of(0), info.isr().stream().map(Node::id).toList(), "isr of partition " + p);
            }

            // describeConfigs of the topic: the configs set at creation, as dynamic topic configs.
            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config topicConfig = admin.describeConfigs(List.of(topicResource)).all()
                    .get(TIMEOUT_S, TimeUnit.SECONDS).get(topicResource);
            ConfigEntry retention = topicConfig.get("retention.ms");
            check(retention != null, "describeConfigs(topic) lacks retention.ms");
            checkEq("123456789", retention.value(), "topic retention.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "topic retention.ms source");
            ConfigEntry segment = topicConfig.get("segment.bytes");
            check(segment != null && segment.value() != null, "describeConfigs(topic) lacks segment.bytes");
            check(segment.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "segment.bytes (not set on the topic) is reported as a topic config");

            // describeConfigs of the broker: num.partitions=4 as run.py starts it.
            ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, "0");
            Config brokerConfig = admin.describeConfigs(List.of(brokerResource)).all()
                    .get(TIMEOUT_S, TimeUnit.SECONDS).get(brokerResource);
            ConfigEntry numPartitions = brokerConfig.get("num.partitions");
            check(numPartitions != null, "describeConfigs(broker 0) lacks num.partitions");
            checkEq("4", numPartitions.value(), "broker num.partitions");

            // listOffsets after records with chosen timestamps in partition 0.
            long base = System.currentTimeMillis() - 60_000;
            long[] timestamps = {base + 1000, base + 5000, base + 3000, base + 2000, base + 4000};
            try (KafkaProducer<String, String> producer = producer(bootstrap)) {
                List<java.util.concurrent.Future<RecordMetadata>> sends = new ArrayList<>();
                for (int i = 0; i < timestamps.length; i++) {
                    sends.add(producer.send(new ProducerRecord<>(topic, 0, timestamps[i], "k" + i, "v" + i)));
                }
                producer.flush();
                for (int i = 0; i < sends.size(); i++) {
                    checkEq((long) i, sends.get(i).get(TIMEOUT_S, TimeUnit.SECONDS).offset(), "offset of record " + i);
                }
            }
            TopicPartition tp0 = new TopicPartition(topic, 0);
            TopicPartition tp1 = new TopicPartition(topic, 1);
            checkEq(0L, listOffset(admin, tp0, OffsetSpec.earliest()).offset(), "earliest offset of partition 0");
            checkEq(5L, listOffset(admin, tp0, OffsetSpec.latest()).offset(), "latest offset of partition 0");
            ListOffsetsResultInfo max = listOffset(admin, tp0, OffsetSpec.maxTimestamp());
            checkEq(1L, max.offset(), "max-timestamp offset of partition 0");
            checkEq(base + 5000, max.timestamp(), "max timestamp of partition 0");
            ListOffsetsResultInfo byTime = listOffset(admin, tp0, OffsetSpec.forTimestamp(base + 2500));
            checkEq(1L, byTime.offset(), "offset for timestamp base+2500 (first record at or after it)");
            checkEq(0L, listOffset(admin, tp1, OffsetSpec.earliest()).offset(), "earliest offset of partition 1");
            checkEq(0L, listOffset(admin, tp1, OffsetSpec.latest()).offset(), "latest offset of partition 1");

            // deleteTopics, then the topic is gone from listTopics and describeTopics.
            admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS).contains(topic)) {
                check(System.nanoTime() < deadline, "topic " + topic + " still listed 30 s after deleteTopics");
                Thread.sleep(100);
            }
            try {
                admin.describeTopics(List.of(topic)).allTopicNames().get(TIMEOUT_S, TimeUnit.SECONDS);
                check(false, "describeTopics of the deleted topic succeeded");
            } catch (java.util.concurrent.ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                        "describeTopics of the deleted topic: expected UnknownTopicOrPartitionException, got "
                                + e.getCause());
            }
        }
    }

    static ListOffsetsResultInfo listOffset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get(TIMEOUT_S, TimeUnit.SECONDS);
    }
}
