// A RocketMQ 5 client process for the tests: rocketmq-client-nodejs 1.0.8 under Node.js, pointed at a gRPC endpoint.
//   node grpc_driver.js ENDPOINT send TOPIC COUNT BODY [INTERVAL_MS]
//   node grpc_driver.js ENDPOINT receive TOPIC GROUP COUNT SECONDS
// Prints one JSON object per line: a send's receipt ({messageId, broker, queueId, offset}) or a received and
// acknowledged message ({body, messageId}). A receiver ends after COUNT messages or SECONDS. A send that fails is
// printed as {error, body, t} and the sends go on, INTERVAL_MS apart (a failover test counts them).
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const [endpoints, command, ...args] = process.argv.slice(2);
const print = value => process.stdout.write(JSON.stringify(value) + '\n');
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
// A receive long-polls 5 s: the least a proxy takes (grpcClientConsumerMinLongPollingTimeoutMillis); the client's
// deadline is its request timeout (3 s) plus this.

async function send(topic, count, body, interval) {
  const producer = new Producer({ endpoints, logger: quiet });
  await producer.startup();
  for (let n = 0; n < Number(count); n++) {
    try {
      const receipt = await producer.send({ topic, tag: 'node', body: Buffer.from(`${body}-${n}`) });
      const queue = receipt.messageQueue;
      print({ messageId: receipt.messageId, broker: queue.broker.name, queueId: queue.id, offset: Number(receipt.offset),
              body: `${body}-${n}`, t: Date.now() / 1000 });
    } catch (err) {
      print({ error: String(err && err.message || err), body: `${body}-${n}`, t: Date.now() / 1000 });
    }
    if (Number(interval)) await new Promise(resolve => setTimeout(resolve, Number(interval)));
  }
  await producer.shutdown();
}

async function receive(topic, group, count, seconds) {
  const consumer = new SimpleConsumer({
    consumerGroup: group, endpoints, subscriptions: new Map().set(topic, '*'), awaitDuration: 5000, logger: quiet,
  });
  await consumer.startup();
  const deadline = Date.now() + Number(seconds) * 1000;
  let got = 0;
  while (got < Number(count) && Date.now() < deadline) {
    const messages = await consumer.receive(32, 30000);
    for (const message of messages) {
      await consumer.ack(message);
      print({ body: message.body.toString(), messageId: message.messageId });
      got += 1;
    }
  }
  await consumer.shutdown();
}

const commands = { send, receive };
commands[command](...args).then(() => process.exit(0), err => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
