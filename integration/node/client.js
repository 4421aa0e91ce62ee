'use strict';
// Drives the official RocketMQ 5 Node.js client (rocketmq-client-nodejs, pinned in package.json)
// against the proxy for the Go integration tests (integration/node_test.go).
//
//   node client.js <mode> --endpoint=127.0.0.1:8081 --topic=T [--group=G] [--count=N]
//                  [--timeout=ms] [--prefix=p] [--fail=prefix] [--linger=ms] [--tag=*] ...
//
// Every mode prints one JSON object per line on stdout, {"event": ...}, which the Go test
// parses: "ready" once the client has started, "recv" per message received (body, id, tag,
// keys, properties, delivery attempt, offset), "sent" per message sent, "result" for raw RPC
// answers, "done" at the end, "error" on failure (then the exit code is 1). The client's own log
// goes to stderr. Every mode stops by itself: after --count distinct messages or at --timeout,
// whichever comes first, and a watchdog exits the process if shutting down hangs. Consumers count
// only bodies starting with --prefix (other messages, e.g. the tests' warm-up messages, are
// received and settled like any other) and keep running --linger ms after reaching --count.
//
// Modes (more, e.g. FIFO or transactional variants, can be added to the table at the bottom):
//   simple-consume  SimpleConsumer: receive and ack until --count distinct bodies were seen; a
//                   body starting with --dlq is instead handed to ForwardMessageToDeadLetterQueue.
//   push-consume    PushConsumer (QueryAssignment): consume until --count distinct bodies
//                   succeeded; a body starting with --fail makes the listener fail (redelivery).
//   produce         Producer: send --count messages "<prefix>-<i>" with a tag, keys and a property.
//   offsets         Raw gRPC calls: QueryOffset, PullMessage, UpdateOffset, GetOffset on one queue.
//   fifo-produce    Producer: --groups message groups "<mgroup>-<g>", --count messages each,
//                   sent interleaved (g0 m0, g1 m0, ..., g0 m1, ...) as "<prefix>-<g>-<i>".
//   txn-produce     Producer with a transaction checker: --count transactions "<prefix>-<i>";
//                   i%4 = 0 committed, 1 rolled back, 2 and 3 left unknown; the checker answers
//                   COMMIT for 2, ROLLBACK for 3 ("check" events). Ends once every unknown one
//                   was checked, --linger ms later (its answer is sent after the check).

const {
  SimpleConsumer, PushConsumer, Producer, ConsumeResult,
} = require('rocketmq-client-nodejs');

function parseArgs(argv) {
  const opts = { mode: argv[0] };
  for (const a of argv.slice(1)) {
    const m = /^--([^=]+)=(.*)$/s.exec(a);
    if (!m) throw new Error(`bad argument ${a}: want --key=value`);
    opts[m[1]] = m[2];
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const timeoutMs = Number(opts.timeout || 60000);
const count = Number(opts.count || 1);
const countPrefix = opts.prefix || '';
const lingerMs = Number(opts.linger || 0);
const started = Date.now();

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

// The client's log, to stderr (the default writes under $HOME/logs).
const { format } = require('node:util');

const logger = {
  // Transaction.commit and rollback call debug unconditionally.
  debug: (...a) => console.error('DEBUG', format(...a)),
  info: (...a) => console.error('INFO', format(...a)),
  warn: (...a) => console.error('WARN', format(...a)),
  error: (...a) => console.error('ERROR', format(...a)),
};

function required(name) {
  if (!opts[name]) throw new Error(`--${name} is required`);
  return opts[name];
}

function viewFields(mv) {
  return {
    body: mv.body.toString('utf8'),
    id: mv.messageId,
    tag: mv.tag || '',
    keys: mv.keys || [],
    props: Object.fromEntries(mv.properties || new Map()),
    attempt: mv.deliveryAttempt,
    group: mv.messageGroup || '',
    offset: mv.offset,
    corrupted: !!mv.corrupted,
  };
}

function remaining() {
  return timeoutMs - (Date.now() - started);
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function simpleConsume() {
  const c = new SimpleConsumer({
    endpoints: required('endpoint'),
    namespace: '',
    consumerGroup: required('group'),
    subscriptions: new Map([[ required('topic'), opts.tag || '*' ]]),
    awaitDuration: Number(opts.await || 3000),
    logger,
  });
  await c.startup();
  emit('ready', {});
  const seen = new Set();
  try {
    let until = Infinity; // set once --count is reached: receive --linger ms longer
    while (remaining() > 0 && Date.now() < until) {
      if (seen.size >= count && until === Infinity) {
        until = Date.now() + lingerMs;
        if (lingerMs <= 0) break;
      }
      let msgs = [];
      try {
        msgs = await c.receive(16, Number(opts.invisible || 15000));
      } catch (e) {
        // MESSAGE_NOT_FOUND is an exception: nothing new in the await time.
        if (!/not.?found|40401/i.test(String(e && (e.code || e.message)))) {
          logger.warn('receive: %s', e);
          await sleep(200);
        }
        continue;
      }
      for (const mv of msgs) {
        emit('recv', viewFields(mv));
        const body = mv.body.toString('utf8');
        if (opts.dlq && body.startsWith(opts.dlq)) {
          await forwardToDLQ(c, mv);
        } else {
          await c.ack(mv);
        }
        if (body.startsWith(countPrefix)) seen.add(body);
      }
    }
  } finally {
    emit('done', { distinct: seen.size });
    await c.shutdown();
  }
}

// forwardToDLQ is what a FIFO push consumer does with a message out of attempts, done by hand.
async function forwardToDLQ(c, mv) {
  const pb = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb');
  const def = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
  const req = new pb.ForwardMessageToDeadLetterQueueRequest()
    .setGroup(new def.Resource().setName(required('group')))
    .setTopic(new def.Resource().setName(mv.topic))
    .setReceiptHandle(mv.receiptHandle)
    .setMessageId(mv.messageId)
    .setDeliveryAttempt(mv.deliveryAttempt || 1)
    .setMaxDeliveryAttempts(1);
  const res = await c.forwardMessageToDeadLetterQueueViaRpc(mv.endpoints, req, 5000);
  const st = res.getStatus();
  emit('result', { rpc: 'ForwardMessageToDeadLetterQueue', body: mv.body.toString('utf8'), code: st ? st.getCode() : -1, message: st ? st.getMessage() : '' });
}

async function pushConsume() {
  const failPrefix = opts.fail || '';
  const succeeded = new Set();
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const c = new PushConsumer({
    endpoints: required('endpoint'),
    namespace: '',
    consumerGroup: required('group'),
    subscriptions: new Map([[ required('topic'), opts.tag || '*' ]]),
    logger,
    messageListener: {
      async consume(mv) {
        const f = viewFields(mv);
        const failed = failPrefix !== '' && f.body.startsWith(failPrefix);
        emit('recv', { ...f, failed });
        if (failed) return ConsumeResult.FAILURE;
        if (f.body.startsWith(countPrefix)) succeeded.add(f.body);
        if (succeeded.size >= count) finish();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await c.startup();
  emit('ready', {});
  await Promise.race([ finished, sleep(Math.max(remaining(), 0)) ]);
  await sleep(Math.min(lingerMs, Math.max(remaining(), 0)));
  emit('done', { distinct: succeeded.size });
  // A graceful shutdown first waits for the receive calls in flight, up to the long-polling
  // time (20 s); give it 3 s, then exit: messages popped by an abandoned receive come back after
  // their invisible time.
  await Promise.race([ c.shutdown(), sleep(3000) ]);
}

async function produce() {
  const topic = required('topic');
  const p = new Producer({ endpoints: required('endpoint'), namespace: '', topic, logger });
  await p.startup();
  emit('ready', {});
  const prefix = opts.prefix || 'node';
  try {
    for (let i = 0; i < count && remaining() > 0; i++) {
      const body = `${prefix}-${String(i).padStart(3, '0')}`;
      const receipt = await p.send({
        topic,
        tag: opts.tag || 'NodeTag',
        keys: [ `nk-${i}` ],
        properties: new Map([[ 'seq', String(i) ]]),
        body: Buffer.from(body),
      });
      emit('sent', { body, id: receipt.messageId, offset: Number(receipt.offset) });
    }
  } finally {
    emit('done', {});
    await p.shutdown();
  }
}

// offsets exercises the RPCs the client library has no high-level API for, on queue --queue
// (default 0) of --broker: the queue's bounds, a pull of up to --count messages from its start,
// committing the next offset for --group and reading it back.
async function offsets() {
  const grpc = require('@grpc/grpc-js');
  const { MessagingServiceClient } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_grpc_pb');
  const pb = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb');
  const def = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
  const { Duration } = require('google-protobuf/google/protobuf/duration_pb');
  const { Timestamp } = require('google-protobuf/google/protobuf/timestamp_pb');
  const client = new MessagingServiceClient(required('endpoint'), grpc.credentials.createInsecure());
  const deadline = () => new Date(Date.now() + 10000);
  const unary = (method, req) => new Promise((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: deadline() }, (e, res) => (e ? reject(e) : resolve(res)));
  });
  const mq = new def.MessageQueue()
    .setTopic(new def.Resource().setName(required('topic')))
    .setId(Number(opts.queue || 0))
    .setBroker(new def.Broker().setName(opts.broker || ''));
  const group = new def.Resource().setName(required('group'));
  const status = s => ({ code: s ? s.getCode() : -1, message: s ? s.getMessage() : '' });

  emit('ready', {});
  const query = async (policy, ts) => {
    const req = new pb.QueryOffsetRequest().setMessageQueue(mq).setQueryOffsetPolicy(policy);
    if (ts !== undefined) req.setTimestamp(Timestamp.fromDate(new Date(ts)));
    const res = await unary('queryOffset', req);
    return { ...status(res.getStatus()), offset: res.getOffset() };
  };
  emit('result', { rpc: 'QueryOffset', policy: 'BEGINNING', ...(await query(def.QueryOffsetPolicy.BEGINNING)) });
  const end = await query(def.QueryOffsetPolicy.END);
  emit('result', { rpc: 'QueryOffset', policy: 'END', ...end });
  emit('result', { rpc: 'QueryOffset', policy: 'TIMESTAMP', ...(await query(def.QueryOffsetPolicy.TIMESTAMP, Date.now() + 3600000)) });
  emit('result', { rpc: 'GetOffset', when: 'before', ...(await (async () => {
    const res = await unary('getOffset', new pb.GetOffsetRequest().setGroup(group).setMessageQueue(mq));
    return { ...status(res.getStatus()), offset: res.getOffset() };
  })()) });

  // Pull from the start until --count messages or the end of the queue.
  let offset = Number(opts.from || 0);
  let pulled = 0;
  while (pulled < count && remaining() > 0) {
    const req = new pb.PullMessageRequest()
      .setGroup(group).setMessageQueue(mq).setOffset(offset).setBatchSize(Math.min(count - pulled, 32))
      .setFilterExpression(new def.FilterExpression().setType(def.FilterType.TAG).setExpression(opts.tag || '*'))
      .setLongPollingTimeout(new Duration().setSeconds(1));
    const responses = await new Promise((resolve, reject) => {
      const out = [];
      const call = client.pullMessage(req, new grpc.Metadata(), { deadline: deadline() });
      call.on('data', r => out.push(r));
      call.on('error', reject);
      call.on('end', () => resolve(out));
    });
    let st;
    let next = offset;
    for (const r of responses) {
      switch (r.getContentCase()) {
        case pb.PullMessageResponse.ContentCase.STATUS:
          st = status(r.getStatus());
          break;
        case pb.PullMessageResponse.ContentCase.MESSAGE: {
          const m = r.getMessage();
          const sp = m.getSystemProperties();
          emit('recv', {
            body: Buffer.from(m.getBody_asU8()).toString('utf8'), id: sp.getMessageId(), tag: sp.getTag(),
            offset: sp.getQueueOffset(), queue: sp.getQueueId(), props: Object.fromEntries(m.getUserPropertiesMap().entries()),
          });
          pulled++;
          break;
        }
        case pb.PullMessageResponse.ContentCase.NEXT_OFFSET:
          next = r.getNextOffset();
          break;
        default:
      }
    }
    emit('result', { rpc: 'PullMessage', from: offset, next, ...st });
    if (!st || st.code !== def.Code.OK) break;
    offset = next;
  }
  const upd = await unary('updateOffset', new pb.UpdateOffsetRequest().setGroup(group).setMessageQueue(mq).setOffset(offset));
  emit('result', { rpc: 'UpdateOffset', offset, ...status(upd.getStatus()) });
  const got = await unary('getOffset', new pb.GetOffsetRequest().setGroup(group).setMessageQueue(mq));
  emit('result', { rpc: 'GetOffset', when: 'after', ...status(got.getStatus()), offset: got.getOffset() });
  emit('done', { pulled });
  client.close();
}

async function fifoProduce() {
  const topic = required('topic');
  const groups = Number(opts.groups || 1);
  const mgroup = required('mgroup');
  const prefix = opts.prefix || 'fifo';
  const p = new Producer({ endpoints: required('endpoint'), namespace: '', topic, logger });
  await p.startup();
  emit('ready', {});
  try {
    for (let i = 0; i < count && remaining() > 0; i++) {
      for (let g = 0; g < groups; g++) {
        const body = `${prefix}-${g}-${i}`;
        const receipt = await p.send({ topic, tag: 'FifoTag', messageGroup: `${mgroup}-${g}`, body: Buffer.from(body) });
        emit('sent', { body, id: receipt.messageId, group: `${mgroup}-${g}` });
      }
    }
  } finally {
    emit('done', {});
    await p.shutdown();
  }
}

async function txnProduce() {
  const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
  const topic = required('topic');
  const prefix = opts.prefix || 'txn';
  const fate = body => Number(body.slice(body.lastIndexOf('-') + 1)) % 4;
  const unknown = new Set();
  const checked = new Set();
  let allChecked;
  const everyChecked = new Promise(resolve => { allChecked = resolve; });
  const checker = {
    async check(mv) {
      const body = mv.body.toString('utf8');
      emit('check', { body, id: mv.messageId });
      if (unknown.has(body)) checked.add(body);
      if (unknown.size > 0 && checked.size === unknown.size) allChecked();
      switch (fate(body)) {
        case 0: case 2: return TransactionResolution.COMMIT;
        case 1: case 3: return TransactionResolution.ROLLBACK;
        default: return TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED;
      }
    },
  };
  const p = new Producer({ endpoints: required('endpoint'), namespace: '', topic, checker, logger });
  await p.startup();
  emit('ready', {});
  try {
    for (let i = 0; i < count; i++) {
      const body = `${prefix}-${i}`;
      if (fate(body) >= 2) unknown.add(body);
    }
    for (let i = 0; i < count && remaining() > 0; i++) {
      const body = `${prefix}-${i}`;
      const tx = p.beginTransaction();
      const receipt = await p.send({ topic, tag: 'TxnTag', body: Buffer.from(body) }, tx);
      emit('sent', { body, id: receipt.messageId, txid: receipt.transactionId });
      if (fate(body) === 0) await tx.commit();
      if (fate(body) === 1) await tx.rollback();
      if (fate(body) < 2) emit('ended', { body, commit: fate(body) === 0 });
    }
    await Promise.race([ everyChecked, sleep(Math.max(remaining(), 0)) ]);
    await sleep(Math.min(lingerMs, Math.max(remaining(), 0)));
  } finally {
    emit('done', { checked: checked.size, unknown: unknown.size });
    await p.shutdown();
  }
}

const modes = {
  'simple-consume': simpleConsume,
  'push-consume': pushConsume,
  produce,
  offsets,
  'fifo-produce': fifoProduce,
  'txn-produce': txnProduce,
};

async function main() {
  const run = modes[opts.mode];
  if (!run) throw new Error(`unknown mode ${opts.mode}: want one of ${Object.keys(modes).join(', ')}`);
  // Watchdog: whatever happens, the process ends 15 s after its time is up.
  setTimeout(() => {
    emit('error', { message: 'watchdog: still running after the timeout' });
    process.exit(2);
  }, timeoutMs + 15000).unref();
  await run();
}

main().then(() => process.exit(0), e => {
  emit('error', { message: String(e && e.stack ? e.stack : e) });
  process.exit(1);
});
