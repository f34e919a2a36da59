"""confluent-kafka (librdkafka) producer that reports broker throttling.

Usage: throttled_producer.py BOOTSTRAP TOPIC CLIENT_ID COUNT

Produces COUNT records "r-<n>" to partition 0 of TOPIC with acks=1 as
client id CLIENT_ID, one Produce request each (it waits for each delivery
report before the next record). librdkafka calls its throttle_cb for
every response whose throttle_time_ms is above zero (KIP-219). Prints
"delivered N" (successful delivery reports) and "throttled K" (throttle_cb
calls with a throttle time above zero); exits non-zero when a record is not
delivered.
"""

import sys

from confluent_kafka import Producer


def main():
    bootstrap, topic, client_id, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    throttled = []
    delivered = []
    failed = []

    def on_throttle(event):
        if event.throttle_time > 0:
            throttled.append(event.throttle_time)

    def on_delivery(err, msg):
        if err is None:
            delivered.append(msg.offset())
        else:
            failed.append(str(err))

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": "1",
        "linger.ms": 0,
        "enable.idempotence": False,
        "message.timeout.ms": 120000,
        "throttle_cb": on_throttle,
    })
    for n in range(count):
        producer.produce(topic, value=f"r-{n}".encode(), partition=0, on_delivery=on_delivery)
        if producer.flush(120) != 0:
            sys.exit(f"FAIL: record {n} not delivered within 120 s")
    # Serve throttle events reported with the last response.
    producer.poll(0)
    print(f"delivered {len(delivered)}", flush=True)
    print(f"throttled {len(throttled)}", flush=True)
    if failed:
        sys.exit(f"FAIL: {failed}")


if __name__ == "__main__":
    main()
