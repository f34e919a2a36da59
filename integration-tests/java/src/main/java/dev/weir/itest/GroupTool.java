package dev.weir.itest;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Consumer-group programs for the Rust group tests (issue 4, point 4), run as
 * {@code ClientTool group-consume|assignor-churn|join-timing ...}. Each prints
 * one event per line on stdout, {@code <event> key=value ...}, the format of
 * integration-tests/python/group_consumer.py:
 *
 * <pre>
 * assigned [member=M] partitions=0,2 generation=G
 * revoked [member=M] partitions=0,2
 * record [member=M] partition=P offset=O value=V
 * committed [member=M] partition=P offset=O   (acknowledged; O = next offset)
 * closed [member=M]
 * </pre>
 *
 * <pre>
 * group-consume BOOTSTRAP TOPIC GROUP [KEY=VALUE ...]
 *     One member; options session.timeout.ms, assignor (range, roundrobin,
 *     cooperative-sticky), stop.after=N, commit=poll|none. Reads `stop` from
 *     stdin to commit and leave.
 * assignor-churn BOOTSTRAP TOPIC GROUP ASSIGNOR
 *     A producer writes "v-N" records (acks=all) while members a, b and c join
 *     one by one (each waits until every member holds partitions of one
 *     generation) and then c and b leave one by one; a reads to the end,
 *     commits and leaves. Members commit after every poll and in
 *     onPartitionsRevoked. Prints "produced N" at the end.
 * join-timing BOOTSTRAP TOPIC GROUP
 *     Members a, b, c and d join one at a time; after each join the time from
 *     the new member's start until every member holds one newer generation
 *     (and together all 3 partitions) is printed as "rebalance members=N ms=T".
 * </pre>
 */
final class GroupTool {
    static final Duration DEADLINE = Duration.ofSeconds(120);
    private static final Object OUT = new Object();
    /** The highest acknowledged commit per partition, over every member of this JVM. */
    static final Map<Integer, Long> COMMITTED = new ConcurrentHashMap<>();

    private GroupTool() {}

    static void emit(String line) {
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static void fail(String message) {
        System.err.println("FAIL: " + message);
        System.err.flush();
        Runtime.getRuntime().halt(2);
    }

    static String partitions(Collection<TopicPartition> tps) {
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        StringBuilder b = new StringBuilder();
        for (int p : sorted) {
            if (b.length() > 0) {
                b.append(',');
            }
            b.append(p);
        }
        return b.toString();
    }

    /** Waits until {@code condition} holds, failing after {@link #DEADLINE}. */
    static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + DEADLINE + " waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    /** One group member running its poll loop on its own thread. */
    static final class Member implements Runnable {
        final String name;
        final String prefix;
        final String topic;
        final Properties props;
        final boolean commitEachPoll;
        final long stopAfter;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicReference<Set<Integer>> assigned = new AtomicReference<>(Set.of());
        final AtomicInteger generation = new AtomicInteger(-1);
        final AtomicInteger read = new AtomicInteger();
        final Map<Integer, Long> lastRead = new ConcurrentHashMap<>();
        final Thread thread;
        volatile boolean closed;

        Member(String name, String bootstrap, String topic, String group, Map<String, String> options) {
            this.name = name;
            this.prefix = name == null ? "" : " member=" + name;
            this.topic = topic;
            this.commitEachPoll = !"none".equals(options.getOrDefault("commit", "poll"));
            this.stopAfter = Long.parseLong(options.getOrDefault("stop.after", "-1"));
            int session = Integer.parseInt(options.getOrDefault("session.timeout.ms", "10000"));
            Properties c = new Properties();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(session));
            c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Math.min(3000, session / 3)));
            c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor(options.getOrDefault("assignor", "range")));
            c.put(ConsumerConfig.CLIENT_ID_CONFIG, "weir-itest-" + (name == null ? "member" : name));
            this.props = c;
            this.thread = new Thread(this, "member-" + name);
        }

        static String assignor(String name) {
            return switch (name) {
                case "range" -> RangeAssignor.class.getName();
                case "roundrobin" -> RoundRobinAssignor.class.getName();
                case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
                default -> {
                    fail("unknown assignor " + name);
                    yield "";
                }
            };
        }

        /**
         * Commits the positions after the records read from {@code which}
         * and prints the acknowledged ones. A commit refused because a
         * rebalance is under way (the Java client's RebalanceInProgressException)
         * is retried after the next poll; any other failure ends the program.
         */
        void commit(KafkaConsumer<byte[], byte[]> consumer, Collection<TopicPartition> which) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : which) {
                Long last = lastRead.get(tp.partition());
                if (last != null) {
                    offsets.put(tp, new OffsetAndMetadata(last + 1));
                }
            }
            if (offsets.isEmpty()) {
                return;
            }
            try {
                consumer.commitSync(offsets, DEADLINE);
            } catch (RebalanceInProgressException e) {
                return;
            } catch (RuntimeException e) {
                fail("member " + name + " commit " + offsets + ": " + e);
            }
            List<TopicPartition> sorted = new ArrayList<>(offsets.keySet());
            sorted.sort((x, y) -> Integer.compare(x.partition(), y.partition()));
            for (TopicPartition tp : sorted) {
                long offset = offsets.get(tp).offset();
                lastRead.remove(tp.partition(), offset - 1);
                COMMITTED.merge(tp.partition(), offset, Math::max);
                emit("committed" + prefix + " partition=" + tp.partition() + " offset=" + offset);
            }
        }

        @Override
        public void run() {
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                        if (commitEachPoll) {
                            commit(consumer, revoked);
                        }
                        for (TopicPartition tp : revoked) {
                            lastRead.remove(tp.partition());
                        }
                        emit("revoked" + prefix + " partitions=" + partitions(revoked));
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> newlyAssigned) {
                        Set<Integer> now = new TreeSet<>();
                        for (TopicPartition tp : consumer.assignment()) {
                            now.add(tp.partition());
                        }
                        int gen = consumer.groupMetadata().generationId();
                        generation.set(gen);
                        assigned.set(now);
                        emit("assigned" + prefix + " partitions=" + partitions(consumer.assignment())
                                + " generation=" + gen);
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> lost) {
                        emit("lost" + prefix + " partitions=" + partitions(lost));
                    }
                });
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        String v = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                        emit("record" + prefix + " partition=" + r.partition() + " offset=" + r.offset() + " value=" + v);
                        lastRead.put(r.partition(), r.offset());
                        read.incrementAndGet();
                    }
                    // Also retries a commit refused during a rebalance.
                    if (!lastRead.isEmpty() && commitEachPoll) {
                        commit(consumer, consumer.assignment());
                    }
                    if (stopAfter >= 0 && read.get() >= stopAfter) {
                        break;
                    }
                }
                if (commitEachPoll) {
                    commit(consumer, consumer.assignment());
                }
                assigned.set(Set.of());
            } catch (RuntimeException e) {
                fail("member " + name + ": " + e);
            }
            closed = true;
            emit("closed" + prefix);
        }
    }

    static Map<String, String> options(String[] args, int from) {
        Map<String, String> options = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                fail("option " + args[i] + " is not KEY=VALUE");
            }
            options.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return options;
    }

    /** {@code group-consume}: one member until stop.after or `stop` on stdin. */
    static void groupConsume(String[] args) throws Exception {
        Member member = new Member(null, args[1], args[2], args[3], options(args, 4));
        Thread stdin = new Thread(() -> {
            try (java.io.BufferedReader in = new java.io.BufferedReader(
                    new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        member.stop.set(true);
                        return;
                    }
                }
            } catch (java.io.IOException e) {
                // stdin closed: keep running until stop.after
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        member.thread.start();
        member.thread.join();
    }

    /** True when every member in {@code members} holds partitions of one generation, covering 3 partitions in all. */
    static boolean settled(List<Member> members, int minGeneration) {
        int gen = -2;
        Set<Integer> all = new TreeSet<>();
        for (Member m : members) {
            Set<Integer> held = m.assigned.get();
            if (held.isEmpty() || m.generation.get() < minGeneration) {
                return false;
            }
            if (gen != -2 && m.generation.get() != gen) {
                return false;
            }
            gen = m.generation.get();
            for (int p : held) {
                if (!all.add(p)) {
                    return false;
                }
            }
        }
        return all.size() == 3;
    }

    static int maxGeneration(List<Member> members) {
        int gen = -1;
        for (Member m : members) {
            gen = Math.max(gen, m.generation.get());
        }
        return gen;
    }

    /** {@code assignor-churn}: three members join and leave one by one while a producer writes. */
    static void assignorChurn(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        String group = args[3];
        Map<String, String> options = Map.of("assignor", args[4], "session.timeout.ms", "10000");
        AtomicBoolean churnDone = new AtomicBoolean();
        AtomicInteger produced = new AtomicInteger();
        Thread producer = new Thread(() -> {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
            try (KafkaProducer<byte[], byte[]> out = new KafkaProducer<>(p)) {
                // One acknowledged record at a time, round-robin over the three
                // partitions, at most about 200 a second (a rate, not a
                // synchronisation), until the churn is over: at least 300
                // records, at most 5000 to keep the test small.
                for (int i = 0; (!churnDone.get() || i < 300) && i < 5000; i++) {
                    byte[] value = ("v-" + i).getBytes(StandardCharsets.UTF_8);
                    out.send(new ProducerRecord<>(topic, i % 3, null, value)).get();
                    produced.set(i + 1);
                    Thread.sleep(5);
                }
            } catch (Exception e) {
                fail("producer: " + e);
            }
        }, "producer");
        producer.start();
        List<Member> members = new ArrayList<>();
        for (String name : List.of("a", "b", "c")) {
            int before = maxGeneration(members);
            Member m = new Member(name, bootstrap, topic, group, options);
            members.add(m);
            m.thread.start();
            await(name + " joining " + members.size() + " members", () -> settled(members, before + 1));
        }
        for (String name : List.of("c", "b")) {
            Member m = members.remove(members.size() - 1);
            int before = maxGeneration(members);
            m.stop.set(true);
            m.thread.join(DEADLINE.toMillis());
            if (!m.closed) {
                fail("member " + name + " did not close");
            }
            await("the group after " + name + " left", () -> settled(members, before + 1));
        }
        churnDone.set(true);
        producer.join(DEADLINE.toMillis());
        int total = produced.get();
        Member last = members.get(0);
        // a holds every partition now; it reads to the end of each and commits.
        await("commits at the end of every partition", () -> endReached(total));
        last.stop.set(true);
        last.thread.join(DEADLINE.toMillis());
        emit("produced " + total);
    }

    /** True when the commits of every partition reached the end of a round-robin write of {@code total} records. */
    static boolean endReached(int total) {
        for (int p = 0; p < 3; p++) {
            long records = total / 3 + (p < total % 3 ? 1 : 0);
            if (COMMITTED.getOrDefault(p, 0L) < records) {
                return false;
            }
        }
        return true;
    }

    /** {@code join-timing}: how long a fourth member's join takes to settle a group of three. */
    static void joinTiming(String[] args) throws Exception {
        Map<String, String> options = Map.of("session.timeout.ms", "10000", "commit", "none");
        List<Member> members = new ArrayList<>();
        for (String name : List.of("a", "b", "c", "d")) {
            int before = maxGeneration(members);
            Member m = new Member(name, args[1], args[2], args[3], options);
            members.add(m);
            long start = System.nanoTime();
            m.thread.start();
            await(name + " joining", () -> settledAll(members, before + 1));
            long ms = (System.nanoTime() - start) / 1_000_000;
            emit("rebalance members=" + members.size() + " ms=" + ms);
        }
        for (Member m : members) {
            m.stop.set(true);
        }
        for (Member m : members) {
            m.thread.join(DEADLINE.toMillis());
        }
    }

    /** Every member holds a generation at least {@code minGeneration}, all the same, and together all 3 partitions (members may hold none when there are more members than partitions). */
    static boolean settledAll(List<Member> members, int minGeneration) {
        int gen = members.get(0).generation.get();
        Set<Integer> all = new TreeSet<>();
        for (Member m : members) {
            if (m.generation.get() < minGeneration || m.generation.get() != gen) {
                return false;
            }
            for (int p : m.assigned.get()) {
                if (!all.add(p)) {
                    return false;
                }
            }
        }
        return all.size() == 3;
    }
}
