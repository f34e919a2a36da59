// What the KafkaJS test programs share (round_trip.js, group_consumer.js):
// failing, KEY=VALUE options and KafkaJS's log on stderr.
"use strict";

const { logLevel } = require("kafkajs");

// Prints `FAIL: message` on stderr and exits 2.
function fail(message) {
  process.stderr.write(`FAIL: ${message}\n`);
  process.exit(2);
}

// Reads `KEY=VALUE` arguments into a copy of `defaults`, whose keys are the
// only ones accepted (a value is split from its key at the first "=");
// anything else fails.
function parseOptions(args, defaults) {
  const options = { ...defaults };
  for (const arg of args) {
    const at = arg.indexOf("=");
    const key = arg.slice(0, at);
    if (at < 0 || !(key in options)) {
      fail(`unknown option ${arg}`);
    }
    options[key] = arg.slice(at + 1);
  }
  return options;
}

// A KafkaJS `logCreator` that writes every log line to stderr as
// `[LEVEL] namespace: message {extra}` and calls `onError()` for each
// ERROR line.
function stderrLogCreator(onError = () => {}) {
  const names = { [logLevel.ERROR]: "ERROR", [logLevel.WARN]: "WARN", [logLevel.INFO]: "INFO", [logLevel.DEBUG]: "DEBUG" };
  return () => ({ namespace, level, log }) => {
    const { message, ...extra } = log;
    process.stderr.write(`[${names[level]}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`);
    if (level === logLevel.ERROR) {
      onError();
    }
  };
}

module.exports = { fail, parseOptions, stderrLogCreator };
