// Asks a server's reflection service (grpc.reflection.v1alpha) for the file
// that defines each SYMBOL, with hand-encoded messages (no .proto needed:
// ServerReflectionRequest field 4 is file_containing_symbol; in the response,
// field 4 is a file_descriptor_response and field 7 an error_response).
//
//   NODE_PATH=BUILD/node-client/node_modules node tests/node/reflect.js HOST:PORT SYMBOL...
//
// Prints one JSON object {SYMBOL: "found" | "error" | "?"} on stdout; exits 1
// on a transport error.  Plaintext only.
'use strict';

const grpc = require('@grpc/grpc-js');

const [target, ...symbols] = process.argv.slice(2);
if (!target || symbols.length === 0) {
  console.error('usage: reflect.js HOST:PORT SYMBOL...');
  process.exit(2);
}

function varint(n) {
  const out = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

// Field numbers at the top level of one message.
function topFields(buf) {
  const fields = [];
  let i = 0;
  const readVarint = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = buf[i++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
      shift += 7;
    }
  };
  while (i < buf.length) {
    const key = readVarint();
    const wire = key & 7;
    fields.push(Math.floor(key / 8));
    if (wire === 0) {
      readVarint();
    } else if (wire === 2) {
      const len = readVarint();  // (not `i += readVarint()`: i is read before the call)
      i += len;
    }
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else break;
  }
  return fields;
}

const client = new grpc.Client(target, grpc.credentials.createInsecure());
const call = client.makeBidiStreamRequest(
  '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo', (b) => b, (b) => b, null,
  { deadline: new Date(Date.now() + 10000) });
const out = {};
let next = 0;
call.on('data', (resp) => {
  const f = topFields(resp);
  out[symbols[next++]] = f.includes(4) ? 'found' : f.includes(7) ? 'error' : '?';
  if (next === symbols.length) call.end();
});
call.on('error', (e) => {
  console.error(`reflect.js: code ${e.code}: ${e.details}`);
  process.exit(1);
});
call.on('end', () => {
  console.log(JSON.stringify(out));
  client.close();
});
for (const s of symbols) {
  const name = Buffer.from(s);
  call.write(Buffer.from([0x22, ...varint(name.length), ...name]));
}
