// A KafkaJS consumer-group member for the group tests (issue 4, point 4).
//
// Usage: node group_consumer.js BOOTSTRAP TOPIC GROUP [KEY=VALUE ...]
//
// Options (all optional):
//   session.timeout.ms=MS   the member's session timeout (default 10000)
//   stop.after=N            commit and leave the group once N records were read
//
// Subscribes to TOPIC from the beginning in GROUP with auto-commit off and
// prints one event per line on stdout, `<event> key=value ...`, as
// integration-tests/python/group_consumer.py does:
//   assigned partitions=0,2 generation=-1   after each join (KafkaJS does not
//                                           expose the generation)
//   record partition=P offset=O value=V
//   committed partition=P offset=O          a commit the broker acknowledged
//   closed                                  after disconnect() (LeaveGroup)
// Reads commands from stdin: `stop` commits and leaves.
// Every KafkaJS log line goes to stderr; an ERROR line makes the program exit
// 3 after it closed, and any failure exits non-zero with `FAIL: ...`.
"use strict";

const readline = require("readline");
const { Kafka, logLevel } = require("kafkajs");
const { fail, parseOptions, stderrLogCreator } = require("./harness");

const [bootstrap, topic, group, ...rest] = process.argv.slice(2);
if (!group) {
  fail("usage: group_consumer.js BOOTSTRAP TOPIC GROUP [KEY=VALUE ...]");
}
const options = parseOptions(rest, { "session.timeout.ms": "10000", "stop.after": null });

let errorLines = 0;
const logCreator = stderrLogCreator(() => {
  errorLines += 1;
});

const kafka = new Kafka({
  clientId: "weir-itest-kafkajs",
  brokers: [bootstrap],
  logLevel: logLevel.INFO,
  logCreator,
  retry: { retries: 8 },
});
const session = Number(options["session.timeout.ms"]);
const consumer = kafka.consumer({
  groupId: group,
  sessionTimeout: session,
  heartbeatInterval: Math.min(3000, Math.floor(session / 3)),
  rebalanceTimeout: Math.max(session, 10000),
  maxWaitTimeInMs: 500,
});

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
  const partitions = (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
  console.log(`assigned partitions=${partitions.join(",")} generation=-1`);
});

let read = 0;
let stopping = null;
const stopAfter = options["stop.after"] === null ? null : Number(options["stop.after"]);

async function stop() {
  if (stopping === null) {
    stopping = (async () => {
      await consumer.disconnect();
      console.log("closed");
      process.exit(errorLines > 0 ? 3 : 0);
    })().catch((e) => fail(`disconnect: ${e.stack || e}`));
  }
  return stopping;
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "stop") {
    stop();
  }
});

async function main() {
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (stopping !== null) {
        return;
      }
      for (const message of batch.messages) {
        const value = message.value === null ? "" : message.value.toString();
        console.log(`record partition=${batch.partition} offset=${message.offset} value=${value}`);
        read += 1;
      }
      if (batch.messages.length > 0) {
        const next = (BigInt(batch.lastOffset()) + 1n).toString();
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: next }]);
        console.log(`committed partition=${batch.partition} offset=${next}`);
      }
      if (stopAfter !== null && read >= stopAfter) {
        // Leave from outside the batch handler: disconnect() waits for it.
        setImmediate(stop);
      }
    },
  });
}

main().catch((e) => fail(`consumer: ${e.stack || e}`));
