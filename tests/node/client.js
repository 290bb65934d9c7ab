// A foreign client of flowclass.v1: Node's @grpc/grpc-js loads the .proto at
// run time (no generated code), streams rule batches and reads stats and
// rules back, and decodes the rich errors (google.rpc.Status with
// BadRequest / ErrorInfo details, in acks and in grpc-status-details-bin)
// with protobufjs.  Proves the API is usable outside C++.
//
//   NODE_PATH=BUILD/node-client/node_modules \
//     node tests/node/client.js 127.0.0.1:PORT PROTO_ROOT GOOGLEAPIS_ROOT
//
// GOOGLEAPIS_ROOT holds google/rpc/*.proto (Debian's
// golang-github-gogo-googleapis-dev: /usr/share/gocode/src/github.com/gogo/googleapis).
//
// Prints one JSON object on stdout; exits 1 (message on stderr) on any
// transport error.  Plaintext only (the test server listens on loopback).
'use strict';

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const fs = require('fs');
const path = require('path');

const [target, protoRoot, googleapisRoot] = process.argv.slice(2);
if (!target || !protoRoot || !googleapisRoot) {
  console.error('usage: client.js HOST:PORT PROTO_ROOT GOOGLEAPIS_ROOT');
  process.exit(2);
}

const def = protoLoader.loadSync(path.join(protoRoot, 'flowclass/v1/flowclass.proto'), {
  includeDirs: [protoRoot, googleapisRoot],
  keepCase: true,  // field names as in the .proto (batch_id, not batchId)
  longs: String,   // uint64 as decimal strings
  enums: String,
  defaults: true,
  oneofs: true,
});
const v1 = grpc.loadPackageDefinition(def).flowclass.v1;
const client = new v1.ClassifierService(target, grpc.credentials.createInsecure());

// google.rpc's error details, decoded with protobufjs (what proto-loader
// builds on): Status, BadRequest, ErrorInfo.
const rpcRoot = new protobuf.Root();
rpcRoot.resolvePath = (origin, file) => {
  const local = path.join(googleapisRoot, file);
  return fs.existsSync(local) ? local : file;  // google/protobuf/*: protobufjs' own
};
rpcRoot.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
const RpcStatus = rpcRoot.lookupType('google.rpc.Status');
const BadRequest = rpcRoot.lookupType('google.rpc.BadRequest');
const ErrorInfo = rpcRoot.lookupType('google.rpc.ErrorInfo');

// {path, description, reason, op_index, field} of a google.rpc.Status's
// details ({type_url, value} pairs), or null.
function violation(details) {
  let out = null;
  for (const any of details || []) {
    const type = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
    if (type === 'google.rpc.BadRequest') {
      const fv = BadRequest.decode(any.value).field_violations[0];
      out = Object.assign(out || {}, { path: fv.field, description: fv.description });
    } else if (type === 'google.rpc.ErrorInfo') {
      const info = ErrorInfo.decode(any.value);
      out = Object.assign(out || {}, { reason: info.reason, op_index: info.metadata.op_index,
                                       field: info.metadata.field });
    }
  }
  return out;
}
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
    call.on('data', (resp) => acks.push(resp.ack));
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
    call.on('data', (page) => rules.push(...page.rules));
    call.on('error', reject);
    call.on('end', () => resolve(rules));
  });
}

// ApplyRules with raw messages: `middle` (bytes that are not an ApplyRulesRequest)
// between two good batches.  Resolves to the acks and the stream's status.
function applyRaw(first, middle, last) {
  const m = v1.ClassifierService.service.ApplyRules;
  return new Promise((resolve) => {
    const acks = [];
    const call = client.makeBidiStreamRequest(m.path, (b) => b, m.responseDeserialize, null,
                                              { deadline: deadline() });
    call.on('data', (resp) => acks.push(resp.ack.batch_id));
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
  for (const a of acks) {
    console.error(`ack ${a.batch_id}: ${a.status ? `${a.status.code} ${a.status.message}` : "OK"}`);
  }
  const stats = await unary('GetStats', { include_rule_hits: true });
  const cookie1 = await listRules({ cookie: '1' });
  const one = (await unary('GetRule', { id: '7' })).rule;
  let missing = null;
  try {
    await unary('GetRule', { id: '2' });
  } catch (e) {
    missing = e.code;
  }
  // A page token that is none of the server's: INVALID_ARGUMENT, with the
  // google.rpc.Status in the grpc-status-details-bin trailer.
  let badToken = null;
  try {
    await listRules({ page_token: 'not-a-token' });
  } catch (e) {
    const bin = e.metadata.get('grpc-status-details-bin')[0];
    const st = bin ? RpcStatus.decode(bin) : null;
    badToken = { code: e.code, status_code: st ? st.code : null,
                 path: st ? (violation(st.details) || {}).path : null };
  }
  const out = {
    acks: acks.map((a) => {
      const v = violation(a.status && a.status.details);
      return {
        batch_id: a.batch_id,
        status_code: a.status ? a.status.code : 0,
        generation: a.generation,
        inserted: a.inserted,
        deleted: a.deleted,
        error_index: v ? v.op_index : null,
        error_field: v ? v.field : null,
        error_path: v ? v.path : null,
        error_reason: v ? v.reason : null,
      };
    }),
    stats: { rules: stats.rules, generation: stats.generation, pmds: stats.pmds.length,
             total_packets: stats.total.packets },
    bad_token: badToken,
    listed_cookie1: cookie1.length,
    rule7: { ipv4_src: one.match.ipv4_src, tp_dst_hi: one.match.tp_dst.range.hi,
             output_port: one.action.output_port },
    missing_code: missing,
  };
  // Bytes that are not an ApplyRulesRequest end the stream with INVALID_ARGUMENT (not
  // OK with the batches after them silently dropped): a truncated message, and
  // a rule text that is not UTF-8 (proto3 strings must be).
  const m = v1.ClassifierService.service.ApplyRules;
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
