"""kafka-python's admin client grows a topic and replaces its configs.

Usage: kafka_python_admin.py BOOTSTRAP TOPIC

Creates TOPIC with 1 partition and retention.ms set, grows it to 3
partitions with KafkaAdminClient.create_partitions (CreatePartitions),
replaces its configs with alter_configs (legacy AlterConfigs: only
max.message.bytes remains), then produces one record to partition 2 and
consumes it back. Prints "partitions [..]", "configs {..}" and
"consumed <value> from partition 2 offset N"; exits non-zero on failure.
"""

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    admin.create_topics(
        [NewTopic(topic, 1, 1, topic_configs={"retention.ms": "86400000"})]
    )
    admin.create_partitions({topic: NewPartitions(total_count=3)})
    described = admin.describe_topics([topic])
    partitions = sorted(p["partition"] for p in described[0]["partitions"])
    print(f"partitions {partitions}", flush=True)
    if partitions != [0, 1, 2]:
        sys.exit(f"FAIL: expected partitions [0, 1, 2], got {partitions}")

    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "65536"})]
    )
    response = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    dynamic = {}
    for result in response:
        for resource in result.resources:
            for entry in resource[4]:
                name, value, source = entry[0], entry[1], entry[3]
                if source == 1:  # DYNAMIC_TOPIC_CONFIG
                    dynamic[name] = value
    print(f"configs {dynamic}", flush=True)
    if dynamic != {"max.message.bytes": "65536"}:
        sys.exit(f"FAIL: expected only max.message.bytes, got {dynamic}")
    admin.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    sent = producer.send(topic, b"in-new-partition", partition=2).get(timeout=60)
    producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=20000)
    tp = TopicPartition(topic, 2)
    consumer.assign([tp])
    consumer.seek(tp, sent.offset)
    for record in consumer:
        print(
            f"consumed {record.value.decode()} from partition {record.partition} "
            f"offset {record.offset}",
            flush=True,
        )
        break
    else:
        sys.exit("FAIL: nothing consumed from partition 2")
    consumer.close()


if __name__ == "__main__":
    main()
