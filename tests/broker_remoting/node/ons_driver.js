// A RocketMQ 4 client process for the tests: ali-ons 3.12.0 under Node.js, pointed at mqgate's NameServer.
//   node ons_driver.js NAMESRV send TOPIC TAGS COUNT BODY [INTERVAL_MS]
//   node ons_driver.js NAMESRV consume TOPIC GROUP EXPRESSION EXPECT SECONDS [IDLE]
// Prints one JSON object per line: a send's result ({status, msgId, brokerName, queueId, queueOffset, body, t}, or
// {error, body, t} for a send that failed: the sends go on, INTERVAL_MS apart) or a consumed
// message ({body, tags, queueId, queueOffset, reconsumeTimes, t}), and {closing: t} as a consumer closes. A consumer
// ends after EXPECT messages (0: any number),
// or IDLE seconds without a message after the first, or SECONDS, closing as an application does, which commits its
// offsets.
'use strict';

const { Producer, Consumer, Message } = require('ali-ons');

const [namesrv, command, ...args] = process.argv.slice(2);
const quiet = { info() {}, warn() {}, error(...a) { process.stderr.write(a.join(' ') + '\n'); }, debug() {} };
const common = { nameSrv: namesrv, httpclient: {}, logger: quiet };
const print = value => process.stdout.write(JSON.stringify(value) + '\n');

async function send(topic, tags, count, body, interval) {
  const producer = new Producer({ ...common, producerGroup: 'ons_producer' });
  await producer.ready();
  for (let n = 0; n < Number(count); n++) {
    try {
      const result = await producer.send(new Message(topic, tags, `${body}-${n}`));
      print({ status: result.sendStatus, msgId: result.msgId, brokerName: result.messageQueue.brokerName,
              queueId: result.messageQueue.queueId, queueOffset: Number(result.queueOffset), body: `${body}-${n}`,
              t: Date.now() / 1000 });
    } catch (err) {
      print({ error: String(err && err.message || err), body: `${body}-${n}`, t: Date.now() / 1000 });
    }
    if (Number(interval)) await new Promise(resolve => setTimeout(resolve, Number(interval)));
  }
  // Closing unregisters the producer at every broker it knew: one that is down refuses the connection, which an
  // application logs and passes over (the sends are done).
  try {
    await producer.close();
  } catch (err) {
    process.stderr.write(`closing: ${err && err.message || err}\n`);
  }
}

async function consume(topic, group, expression, expect, seconds, idle) {
  const consumer = new Consumer({ ...common, consumerGroup: group,
                                  consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  let got = 0;
  let last = 0;
  let done;
  const finished = new Promise(resolve => { done = resolve; });
  consumer.subscribe(topic, expression, async msg => {
    print({ body: msg.body.toString(), tags: msg.tags, queueId: msg.queueId, queueOffset: Number(msg.queueOffset),
            reconsumeTimes: msg.reconsumeTimes, t: Date.now() / 1000 });
    got += 1;
    last = Date.now();
    if (Number(expect) && got >= Number(expect)) done();
  });
  if (Number(idle)) {
    const watch = setInterval(() => {
      if (last && Date.now() - last > Number(idle) * 1000) { clearInterval(watch); done(); }
    }, 200);
  }
  consumer.on('error', err => process.stderr.write(`consumer error: ${err.stack}\n`));
  await consumer.ready();
  await Promise.race([finished, new Promise(resolve => setTimeout(resolve, Number(seconds) * 1000))]);
  await new Promise(resolve => setTimeout(resolve, 500)); // the last message's consumption is recorded
  print({ closing: Date.now() / 1000 });
  await consumer.close();
}

const commands = { send, consume };
commands[command](...args).then(() => process.exit(0), err => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
