// A foreign client of flowclass.v1: Node's @grpc/grpc-js loads the .proto at
// run time (no generated code), streams rule batches and reads stats and
// rules back.  Proves the API is usable outside C++.
//
//   NODE_PATH=BUILD/node-client/node_modules \
//     node tests/node/client.js 127.0.0.1:PORT PROTO_ROOT
//
// Prints one JSON object on stdout; exits 1 (message on stderr) on any
// transport error.  Plaintext only (the test server listens on loopback).
'use strict';

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const path = require('path');

const [target, protoRoot] = process.argv.slice(2);
if (!target || !protoRoot) {
  console.error('usage: client.js HOST:PORT PROTO_ROOT');
  process.exit(2);
}

const def = protoLoader.loadSync(path.join(protoRoot, 'flowclass/v1/flowclass.proto'), {
  includeDirs: [protoRoot],
  keepCase: true,  // field names as in the .proto (batch_id, not batchId)
  longs: String,   // uint64 as decimal strings
  enums: String,
  defaults: true,
  oneofs: true,
});
const v1 = grpc.loadPackageDefinition(def).flowclass.v1;
const client = new v1.Classifier(target, grpc.credentials.createInsecure());
const deadline = () => new Date(Date.now() + 10000);

function rule(id, cookie) {
  return {
    id: String(id),
    priority: 100 + (id % 5),
    cookie: String(cookie),
    match: {
      ipv4_src: `10.${id % 200}.0.0/16`,
      ip_proto: { value: '6' },
      tp_dst: { range: { lo: 1000, hi: 2000 + id } },
    },
    action: { output_port: 1 + (id % 3) },
  };
}

function applyBatches(batches) {
  return new Promise((resolve, reject) => {
    const acks = [];
    const call = client.ApplyRules({ deadline: deadline() });
    call.on('data', (ack) => acks.push(ack));
    call.on('error', reject);
    call.on('end', () => resolve(acks));
    for (const b of batches) call.write(b);
    call.end();
  });
}

function unary(method, req) {
  return new Promise((resolve, reject) =>
    client[method](req, { deadline: deadline() }, (err, resp) => (err ? reject(err) : resolve(resp))));
}

function listRules(req) {
  return new Promise((resolve, reject) => {
    const rules = [];
    const call = client.ListRules(req, { deadline: deadline() });
    call.on('data', (r) => rules.push(r));
    call.on('error', reject);
    call.on('end', () => resolve(rules));
  });
}

// ApplyRules with raw messages: `middle` (bytes that are not a RuleBatch)
// between two good batches.  Resolves to the acks and the stream's status.
function applyRaw(first, middle, last) {
  const m = v1.Classifier.service.ApplyRules;
  return new Promise((resolve) => {
    const acks = [];
    const call = client.makeBidiStreamRequest(m.path, (b) => b, m.responseDeserialize, null,
                                              { deadline: deadline() });
    call.on('data', (ack) => acks.push(ack.batch_id));
    call.on('error', (e) => resolve({ acks, code: e.code, details: e.details }));
    call.on('end', () => resolve({ acks, code: 0, details: '' }));
    call.write(m.requestSerialize(first));
    call.write(middle);
    call.write(m.requestSerialize(last));
    call.end();
  });
}

async function main() {
  const batches = [];
  // Batches 1..5: 100 rules each, cookie 1 for odd ids, 2 for even ids.
  for (let b = 0; b < 5; b++) {
    const ops = [];
    for (let i = 1; i <= 100; i++) {
      const id = b * 100 + i;
      ops.push({ insert: rule(id, id % 2 ? 1 : 2) });
    }
    batches.push({ batch_id: String(b + 1), ops });
  }
  // Batch 6: one good rule, one with a malformed address: rejected whole.
  const bad = rule(1001, 3);
  bad.match.ipv4_src = '10.0.0.999';
  batches.push({ batch_id: '6', ops: [{ insert: rule(1000, 3) }, { insert: bad }] });
  // Batch 7: delete every cookie-2 rule.
  batches.push({ batch_id: '7', ops: [{ delete_cookie: '2' }] });

  const acks = await applyBatches(batches);
  // Diagnostics for the C++ test's failure output.
  for (const a of acks) console.error(`ack ${a.batch_id}: ${a.status_code} ${a.status_message}`);
  const stats = await unary('GetStats', { include_rule_hits: true });
  const cookie1 = await listRules({ cookie: '1' });
  const one = await unary('GetRule', { id: '7' });
  let missing = null;
  try {
    await unary('GetRule', { id: '2' });
  } catch (e) {
    missing = e.code;
  }
  const out = {
    acks: acks.map((a) => ({
      batch_id: a.batch_id,
      status_code: a.status_code,
      generation: a.generation,
      inserted: a.inserted,
      deleted: a.deleted,
      error_index: a.errors.length ? a.errors[0].op_index : null,
      error_field: a.errors.length ? a.errors[0].field : null,
    })),
    stats: { rules: stats.rules, generation: stats.generation, pmds: stats.pmd.length,
             total_packets: stats.total.packets },
    listed_cookie1: cookie1.length,
    rule7: { ipv4_src: one.match.ipv4_src, tp_dst_hi: one.match.tp_dst.range.hi,
             output_port: one.action.output_port },
    missing_code: missing,
  };
  // Bytes that are not a RuleBatch end the stream with INVALID_ARGUMENT (not
  // OK with the batches after them silently dropped): a truncated message, and
  // a rule text that is not UTF-8 (proto3 strings must be).
  const m = v1.Classifier.service.ApplyRules;
  const text = m.requestSerialize({ batch_id: '102', ops: [{ insert: { text: 'id=5002,udp,actions=drop_Z' } }] });
  const notUtf8 = Buffer.from(text);
  notUtf8[notUtf8.indexOf('_Z')] = 0xe9;
  out.raw = [];
  for (const middle of [Buffer.from([0x12, 0x7f, 0x0a]), notUtf8]) {
    const r = await applyRaw(
      { batch_id: '101', ops: [{ insert: { text: 'id=5001,priority=1,udp,actions=drop' } }] }, middle,
      { batch_id: '103', ops: [{ insert: { text: 'id=5003,priority=1,udp,actions=drop' } }] });
    let later = null;
    try {
      await unary('GetRule', { id: '5003' });
      later = 'applied';
    } catch (e) {
      later = e.code;
    }
    out.raw.push({ acks: r.acks, code: r.code, message2: /message 2 of the stream/.test(r.details),
                   later });
    await applyBatches([{ batch_id: '104', ops: [{ delete_id: '5001' }] }]);
  }
  console.log(JSON.stringify(out));
  client.close();
}

main().catch((e) => {
  console.error(`client.js: ${e.code !== undefined ? `code ${e.code}: ` : ''}${e.message}`);
  process.exit(1);
});
