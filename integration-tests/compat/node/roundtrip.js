// KafkaJS check of the node area: creates a topic of PARTITIONS partitions,
// produces PER_PARTITION records to each, consumes them all in a new group
// from the beginning, commits, and reads the committed offsets back through
// the admin client. Asserts exact records and offsets; any KafkaJS log line
// at level ERROR fails the check. Every wait has a deadline.
//
// Usage: node roundtrip.js BOOTSTRAP
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Kafka, logLevel } = require('kafkajs');

const PARTITIONS = 3;
const PER_PARTITION = 10;
const DEADLINE_MS = 60000;

const errorLines = [];
// Prints every KafkaJS log line at INFO and above; keeps the ERROR ones.
const logCreator = () => ({ namespace, level, label, log }) => {
  const line = `${label} [${namespace}] ${log.message} ${JSON.stringify(log)}`;
  console.log(line);
  if (level === logLevel.ERROR) errorLines.push(line);
};

function expect(what, got, want) {
  assert.deepStrictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  console.log(`ok: ${what} = ${JSON.stringify(got)}`);
}

function withDeadline(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${DEADLINE_MS} ms`)), DEADLINE_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main() {
  const bootstrap = process.argv[2];
  if (!bootstrap) throw new Error('usage: node roundtrip.js BOOTSTRAP');
  const suffix = crypto.randomBytes(4).toString('hex');
  const topic = `compat-kafkajs-${suffix}`;
  const groupId = `compat-kafkajs-group-${suffix}`;
  console.log(`kafkajs: topic ${topic}, group ${groupId}`);

  const kafka = new Kafka({ clientId: 'compat-kafkajs', brokers: [bootstrap], logLevel: logLevel.INFO, logCreator });
  const admin = kafka.admin();
  await admin.connect();
  expect('createTopics', await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true,
  }), true);
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  expect('topic metadata (partition, leader, replicas)',
    metadata.topics[0].partitions.map((p) => [p.partitionId, p.leader, p.replicas]).sort((a, b) => a[0] - b[0]),
    [...Array(PARTITIONS).keys()].map((p) => [p, 0, [0]]));

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const produced = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const messages = [...Array(PER_PARTITION).keys()].map((i) => ({ partition: p, key: `k${p}-${i}`, value: `v${p}-${i}` }));
    const meta = await producer.send({ topic, acks: -1, messages });
    produced.push(...meta.map((m) => [m.partition, m.errorCode, m.baseOffset]));
  }
  await producer.disconnect();
  expect('produced (partition, error, baseOffset)', produced,
    [...Array(PARTITIONS).keys()].map((p) => [p, 0, '0']));

  const consumer = kafka.consumer({ groupId });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const consumed = [];
  let allConsumed;
  const done = new Promise((resolve) => { allConsumed = resolve; });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      consumed.push([partition, Number(message.offset), message.key.toString(), message.value.toString()]);
      if (consumed.length === PARTITIONS * PER_PARTITION) allConsumed();
    },
  });
  await withDeadline(done, `consuming ${PARTITIONS * PER_PARTITION} records`);
  const want = [];
  for (let p = 0; p < PARTITIONS; p++) {
    for (let i = 0; i < PER_PARTITION; i++) want.push([p, i, `k${p}-${i}`, `v${p}-${i}`]);
  }
  expect('consumed (partition, offset, key, value)',
    [...consumed].sort((a, b) => a[0] - b[0] || a[1] - b[1]), want);
  await consumer.commitOffsets([...Array(PARTITIONS).keys()].map((p) => ({ topic, partition: p, offset: String(PER_PARTITION) })));

  const fetched = await admin.fetchOffsets({ groupId, topics: [topic] });
  expect('admin.fetchOffsets (partition, offset)',
    fetched[0].partitions.map((p) => [p.partition, p.offset]).sort((a, b) => a[0] - b[0]),
    [...Array(PARTITIONS).keys()].map((p) => [p, String(PER_PARTITION)]));
  const described = await admin.describeGroups([groupId]);
  expect('describeGroups (state, protocolType, members)',
    described.groups.map((g) => [g.groupId, g.state, g.protocolType, g.members.length]),
    [[groupId, 'Stable', 'consumer', 1]]);
  await consumer.disconnect();
  const after = await admin.describeGroups([groupId]);
  expect('describeGroups after leaving (state, members)',
    after.groups.map((g) => [g.state, g.members.length]), [['Empty', 0]]);
  await admin.disconnect();

  expect('KafkaJS ERROR log lines', errorLines, []);
  console.log('kafkajs: all checks passed');
}

main().catch((e) => {
  console.error(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
