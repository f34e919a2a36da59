// A KafkaJS round trip: admin-created topic, acks=-1 producer, group consumer.
//
// Usage: node round_trip.js BOOTSTRAP TOPIC COUNT PARTITIONS [KEY=VALUE ...]
//
// Options (all optional); any ssl.* option turns TLS on (`ssl` of the
// Kafka client config, passed to Node's tls.connect, which checks the
// server certificate against the host, `127.0.0.1`):
//   ssl.ca=PATH     PEM file of the CA(s) that sign the broker certificate
//   ssl.cert=PATH   PEM client certificate (mutual TLS)
//   ssl.key=PATH    PEM private key of the client certificate
// Any sasl.* option turns SASL on (`sasl` of the Kafka client config: a
// SaslHandshake, then SaslAuthenticate); all three are then required:
//   sasl.mechanism=plain   the mechanism (KafkaJS spells it in lower case)
//   sasl.username=NAME
//   sasl.password=SECRET
// With both, SASL runs inside TLS (a SASL_SSL listener).
//
// Creates TOPIC with PARTITIONS partitions, sends COUNT records
// (key-N/value-N) with acks=-1 in batches of 500, then reads the topic
// from the beginning in a fresh consumer group until every record arrived,
// and compares the multiset of key/value pairs. Prints "delivered N" and
// "consumed N"; any failure or mismatch exits non-zero with `FAIL: ...`.
"use strict";

const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");
const { fail, parseOptions, stderrLogCreator } = require("./harness");

const DEADLINE_MS = 180000;

const [bootstrap, topic, countText, partitionsText, ...rest] = process.argv.slice(2);
if (!partitionsText) {
  fail("usage: round_trip.js BOOTSTRAP TOPIC COUNT PARTITIONS [KEY=VALUE ...]");
}
const count = Number(countText);
const partitions = Number(partitionsText);
const options = parseOptions(rest, {
  "ssl.ca": null,
  "ssl.cert": null,
  "ssl.key": null,
  "sasl.mechanism": null,
  "sasl.username": null,
  "sasl.password": null,
});

let ssl = false;
const given = (prefix) => Object.keys(options).filter((key) => key.startsWith(prefix) && options[key] !== null);
if (given("ssl.").length > 0) {
  ssl = { rejectUnauthorized: true };
  if (options["ssl.ca"] !== null) {
    ssl.ca = [fs.readFileSync(options["ssl.ca"], "utf-8")];
  }
  if (options["ssl.cert"] !== null) {
    ssl.cert = fs.readFileSync(options["ssl.cert"], "utf-8");
  }
  if (options["ssl.key"] !== null) {
    ssl.key = fs.readFileSync(options["ssl.key"], "utf-8");
  }
}

let sasl;
if (given("sasl.").length > 0) {
  const missing = ["sasl.mechanism", "sasl.username", "sasl.password"].filter((key) => options[key] === null);
  if (missing.length > 0) {
    fail(`SASL needs ${missing.join(", ")} too`);
  }
  sasl = {
    mechanism: options["sasl.mechanism"],
    username: options["sasl.username"],
    password: options["sasl.password"],
  };
}

const kafka = new Kafka({
  clientId: "weir-itest-kafkajs",
  brokers: [bootstrap],
  ssl,
  sasl,
  logLevel: logLevel.INFO,
  logCreator: stderrLogCreator(),
  retry: { retries: 8 },
});

function key(i) {
  return `key-${i}`;
}

function value(i) {
  return `value-${i}-${"x".repeat(i % 50)}`;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
  });
  if (!created) {
    fail(`createTopics(${topic}) reported that the topic already existed`);
  }
  await admin.disconnect();

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let start = 0; start < count; start += 500) {
    const messages = [];
    for (let i = start; i < Math.min(count, start + 500); i++) {
      messages.push({ key: key(i), value: value(i) });
    }
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();
  console.log(`delivered ${count}`);

  const expected = new Map();
  for (let i = 0; i < count; i++) {
    const pair = `${key(i)}/${value(i)}`;
    expected.set(pair, (expected.get(pair) || 0) + 1);
  }
  const consumer = kafka.consumer({ groupId: `weir-itest-${topic}`, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  let consumed = 0;
  let done;
  const finished = new Promise((resolve) => {
    done = resolve;
  });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      const pair = `${message.key}/${message.value}`;
      const left = expected.get(pair) || 0;
      if (left === 0) {
        fail(`unexpected or duplicate record ${pair} at offset ${message.offset}`);
      }
      expected.set(pair, left - 1);
      consumed += 1;
      if (consumed === count) {
        done();
      }
    },
  });
  const timer = setTimeout(() => fail(`timed out after consuming ${consumed} of ${count} records`), DEADLINE_MS);
  await finished;
  clearTimeout(timer);
  await consumer.disconnect();
  console.log(`consumed ${consumed}`);
}

main().catch((error) => fail(error && error.stack ? error.stack : String(error)));
