#!/usr/bin/env python3
"""Kafka's CLI tools against Weir (issue 5, area "java"): each tool is run by
its main class from the Maven artifacts (kafka_2.13 and kafka-tools), as
bin/kafka-*.sh would run it, and its output is checked exactly.

Usage: kafka_cli.py CHECK BOOTSTRAP CLASSPATH_FILE SUFFIX

Checks (SUFFIX makes topic and group names unique):
- kafka-topics: --create (3 partitions, a topic config), --list, --describe
  (partition count, leader/replicas/isr 0, the config), --alter --partitions
  5 (CreatePartitions) and --describe of the 5, --delete, then the topic
  leaves --list.
- kafka-console-producer-consumer: the console producer writes keyed lines
  to a 1-partition topic; the console consumer in a group (--group,
  --from-beginning, --max-messages) prints exactly them; after two more
  lines, the same group without --from-beginning prints exactly the two new
  ones (it resumed from its committed offset).
- kafka-consumer-groups: --list, --describe (current offset, log end, lag)
  of a group that consumed, --reset-offsets --to-offset --execute, then a
  consumer of the group reads exactly from the new offset; --delete, then
  the group leaves --list.
- kafka-configs-describe: --describe of a topic's dynamic configs and of
  broker 0's (--all) configs.
- kafka-configs-alter: --alter --add-config and --delete-config on a topic
  config, each change visible in --describe.
- kafka-broker-api-versions: the broker's APIs with version ranges; none
  the broker advertises is unusable by the 4.1 tools, and the core client
  APIs are all advertised.

Exits 0 when everything matched; otherwise prints what differed and exits 1.
"""

import re
import subprocess
import sys
import time

TOOL_TIMEOUT_S = 60
TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS = "kafka.admin.ConfigCommand"
API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"


class Mismatch(Exception):
    pass


class Tools:
    def __init__(self, bootstrap: str, classpath: str):
        self.bootstrap = bootstrap
        self.classpath = classpath

    def run(self, main: str, *args: str, stdin: str = "", ok: bool = True) -> subprocess.CompletedProcess:
        argv = ["java", "-cp", self.classpath, main, "--bootstrap-server", self.bootstrap, *args]
        print("$", main.rsplit(".", 1)[1], *args, flush=True)
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        print(p.stdout + p.stderr, flush=True)
        if ok and p.returncode != 0:
            raise Mismatch(f"{main} {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
        return p


def expect(cond: bool, message: str):
    if not cond:
        raise Mismatch(message)


def expect_eq(expected, actual, what: str):
    expect(expected == actual, f"{what}: expected {expected!r}, got {actual!r}")


def wait_until(what: str, predicate, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise Mismatch(f"{what} not within {seconds:.0f} s")
        time.sleep(0.2)


def list_topics(t: Tools) -> list:
    return t.run(TOPICS, "--list").stdout.split()


def create_topic(t: Tools, topic: str, partitions: int, *configs: str):
    args = ["--create", "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1"]
    for c in configs:
        args += ["--config", c]
    expect_eq(f"Created topic {topic}.", t.run(TOPICS, *args).stdout.strip(), "kafka-topics --create output")


def produce(t: Tools, topic: str, lines: list):
    t.run(PRODUCER, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
          "--producer-property", "acks=all", stdin="".join(line + "\n" for line in lines))


def consume(t: Tools, topic: str, group: str, count: int, from_beginning: bool) -> list:
    args = ["--topic", topic, "--group", group, "--max-messages", str(count), "--timeout-ms", "30000",
            "--property", "print.key=true", "--property", "key.separator=:"]
    if from_beginning:
        args.append("--from-beginning")
    p = t.run(CONSUMER, *args)
    expect(f"Processed a total of {count} messages" in p.stderr,
           f"console consumer did not report {count} messages: {p.stderr.strip()}")
    return p.stdout.splitlines()


def check_topics(t: Tools, suffix: str):
    topic = f"cli-topics-{suffix}"
    create_topic(t, topic, 3, "retention.ms=3600000")
    expect(topic in list_topics(t), f"--list lacks {topic}")
    out = t.run(TOPICS, "--describe", "--topic", topic).stdout.splitlines()
    expect_eq(4, len(out), "--describe line count (topic line + 3 partitions)")
    head = dict(re.findall(r"(\w+): (\S*)", out[0]))
    expect_eq(topic, head.get("Topic"), "--describe Topic")
    expect(len(head.get("TopicId", "")) == 22, f"--describe TopicId {head.get('TopicId')!r}")
    expect_eq("3", head.get("PartitionCount"), "--describe PartitionCount")
    expect_eq("1", head.get("ReplicationFactor"), "--describe ReplicationFactor")
    expect_eq("retention.ms=3600000", head.get("Configs"), "--describe Configs")
    for p, line in enumerate(out[1:]):
        fields = dict(re.findall(r"(\w+): (\S*)", line))
        got = {k: fields.get(k) for k in ("Topic", "Partition", "Leader", "Replicas", "Isr")}
        expect_eq({"Topic": topic, "Partition": str(p), "Leader": "0", "Replicas": "0", "Isr": "0"},
                  got, f"--describe partition line {p}")
    t.run(TOPICS, "--alter", "--topic", topic, "--partitions", "5")
    out = t.run(TOPICS, "--describe", "--topic", topic).stdout.splitlines()
    expect_eq(6, len(out), "--describe line count after --alter (topic line + 5 partitions)")
    head = dict(re.findall(r"(\w+): (\S*)", out[0]))
    expect_eq("5", head.get("PartitionCount"), "--describe PartitionCount after --alter")
    for p, line in enumerate(out[1:]):
        fields = dict(re.findall(r"(\w+): (\S*)", line))
        got = {k: fields.get(k) for k in ("Partition", "Leader", "Replicas", "Isr")}
        expect_eq({"Partition": str(p), "Leader": "0", "Replicas": "0", "Isr": "0"},
                  got, f"--describe partition line {p} after --alter")
    t.run(TOPICS, "--delete", "--topic", topic)
    wait_until(f"{topic} gone from --list", lambda: topic not in list_topics(t))


def check_console(t: Tools, suffix: str):
    topic = f"cli-console-{suffix}"
    group = f"cli-console-group-{suffix}"
    create_topic(t, topic, 1)
    first = [f"k{i}:value {i}" for i in range(5)]
    produce(t, topic, first)
    expect_eq(first, consume(t, topic, group, 5, from_beginning=True), "records read --from-beginning")
    more = ["k5:value 5", "k6:value 6"]
    produce(t, topic, more)
    expect_eq(more, consume(t, topic, group, 2, from_beginning=False),
              "records read by the group after its commit")


def describe_group(t: Tools, group: str) -> list:
    """(topic, partition, current offset, log end offset, lag) rows."""
    rows = []
    for line in t.run(GROUPS, "--describe", "--group", group).stdout.splitlines():
        cols = line.split()
        if cols and cols[0] == group:
            rows.append(tuple(cols[1:6]))
    return sorted(rows)


def check_groups(t: Tools, suffix: str):
    topic = f"cli-groups-{suffix}"
    group = f"cli-groups-group-{suffix}"
    create_topic(t, topic, 1)
    lines = [f"k{i}:v{i}" for i in range(6)]
    produce(t, topic, lines)
    expect_eq(lines, consume(t, topic, group, 6, from_beginning=True), "records read by the group")
    expect(group in t.run(GROUPS, "--list").stdout.split(), f"--list lacks {group}")
    expect_eq([(topic, "0", "6", "6", "0")], describe_group(t, group), "--describe after consuming")
    out = t.run(GROUPS, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "2",
                "--execute").stdout
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    expect_eq([[group, topic, "0", "2"]], rows, "--reset-offsets output")
    expect_eq([(topic, "0", "2", "6", "4")], describe_group(t, group), "--describe after the reset")
    expect_eq(lines[2:], consume(t, topic, group, 4, from_beginning=False), "records read after the reset")
    out = t.run(GROUPS, "--delete", "--group", group).stdout
    expect(f"Deletion of requested consumer groups ('{group}') was successful." in out,
           f"--delete output: {out.strip()}")
    wait_until(f"{group} gone from --list", lambda: group not in t.run(GROUPS, "--list").stdout.split())


def topic_configs(t: Tools, topic: str) -> dict:
    out = t.run(CONFIGS, "--entity-type", "topics", "--entity-name", topic, "--describe").stdout
    lines = out.splitlines()
    expect_eq(f"Dynamic configs for topic {topic} are:", lines[0] if lines else "", "--describe header")
    return dict(re.findall(r"^  ([\w.]+)=(\S*) sensitive=false", out, re.M))


def check_configs_describe(t: Tools, suffix: str):
    topic = f"cli-configs-describe-{suffix}"
    create_topic(t, topic, 1, "retention.ms=3600000", "cleanup.policy=compact")
    expect_eq({"retention.ms": "3600000", "cleanup.policy": "compact"}, topic_configs(t, topic),
              "the topic's dynamic configs")
    out = t.run(CONFIGS, "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all").stdout
    expect("All configs for broker 0 are:" in out, "broker --describe --all header")
    expect(re.search(r"^  num.partitions=4 sensitive=false synonyms=\{STATIC_BROKER_CONFIG:num.partitions=4",
                     out, re.M) is not None, "broker 0 num.partitions=4 (a static broker config)")


def check_configs_alter(t: Tools, suffix: str):
    topic = f"cli-configs-alter-{suffix}"
    create_topic(t, topic, 1, "retention.ms=3600000")
    t.run(CONFIGS, "--entity-type", "topics", "--entity-name", topic, "--alter",
          "--add-config", "retention.ms=86400000,max.message.bytes=2000000")
    expect_eq({"retention.ms": "86400000", "max.message.bytes": "2000000"}, topic_configs(t, topic),
              "configs after --add-config")
    t.run(CONFIGS, "--entity-type", "topics", "--entity-name", topic, "--alter",
          "--delete-config", "max.message.bytes")
    expect_eq({"retention.ms": "86400000"}, topic_configs(t, topic), "configs after --delete-config")


# What every client relies on (produce, fetch, groups, admin basics).
CORE_APIS = ["Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
             "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups",
             "ListGroups", "ApiVersions", "CreateTopics", "DeleteTopics", "InitProducerId",
             "DescribeConfigs", "DeleteGroups", "DescribeCluster"]


def check_api_versions(t: Tools, suffix: str):
    out = t.run(API_VERSIONS).stdout
    expect(re.search(rf"^{re.escape(t.bootstrap)} \(id: 0 rack: null", out, re.M) is not None,
           "no section for broker 0 at the bootstrap address")
    apis = dict(re.findall(r"^\t(\w+\(\d+\)): (.*?),?$", out, re.M))
    expect(len(apis) > 0, "no APIs listed")
    advertised = {k: v for k, v in apis.items() if v != "UNSUPPORTED"}
    bad = {k: v for k, v in advertised.items() if not re.fullmatch(r"\d+( to \d+)? \[usable: \d+\]", v)}
    expect(not bad, f"advertised APIs the tools cannot use: {bad}")
    names = {k.split("(")[0] for k in advertised}
    missing = [a for a in CORE_APIS if a not in names]
    expect(not missing, f"core APIs not advertised: {missing}")
    print(f"{len(advertised)} APIs advertised and usable; not advertised: "
          f"{sorted(k for k, v in apis.items() if v == 'UNSUPPORTED')}")


CHECKS = {
    "kafka-topics": check_topics,
    "kafka-console-producer-consumer": check_console,
    "kafka-consumer-groups": check_groups,
    "kafka-configs-describe": check_configs_describe,
    "kafka-configs-alter": check_configs_alter,
    "kafka-broker-api-versions": check_api_versions,
}


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in CHECKS:
        sys.exit(f"usage: kafka_cli.py {{{'|'.join(CHECKS)}}} BOOTSTRAP CLASSPATH_FILE SUFFIX")
    name, bootstrap, classpath_file, suffix = sys.argv[1:]
    with open(classpath_file) as f:
        tools = Tools(bootstrap, f.read().strip())
    try:
        CHECKS[name](tools, suffix)
    except Mismatch as e:
        print(f"FAIL: {name}: {e}", flush=True)
        sys.exit(1)
    print(f"ok: {name}")


if __name__ == "__main__":
    main()
