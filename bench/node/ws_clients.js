// bench/node/ws_clients.js — N WebSocket clients for bench/bench_ws.py.
//   node ws_clients.js URL N MODE SESSION EXPECTED ORIGIN
// MODE sb: each client subscribes to SESSION (switchboard's protocol);
// MODE relay: each client only listens (the Node relay sends everything).
// Prints "ready" once every client is connected (and subscribed), then one
// JSON line when every client has EXPECTED events, or at the deadline:
// {"delivered", "first_ms", "last_ms", "lat_us": [samples]}.
// Latency: the producer writes t=<epoch µs> into each event's text; a
// sample is taken from every 8th frame of each client (a regex, no parse).
'use strict';
const WebSocket = require('ws');
const { performance } = require('perf_hooks');
const [url, nArg, mode, session, expArg, origin] = process.argv.slice(2);
const n = parseInt(nArg, 10), expected = parseInt(expArg, 10);
const nowUs = () => (performance.timeOrigin + performance.now()) * 1000;
let ready = 0, done = 0, delivered = 0, first = 0, last = 0;
const lat = [];
const re = /t=(\d+)/;

function open(i) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { origin, perMessageDeflate: false });
    let got = 0, subscribed = mode !== 'sb';
    ws.on('open', () => {
      if (mode === 'sb')
        ws.send(JSON.stringify({ op: 'subscribe', tx: i, session_id: session, after_seq: 0 }));
      else resolve();
    });
    ws.on('message', (data) => {
      const s = data.toString();
      if (!subscribed) {
        if (s.includes('"subscribed"')) { subscribed = true; resolve(); }
        return;
      }
      if (!s.startsWith('{"op":"event"') || s.includes('"kind":"session.created"')) return;
      got++; delivered++;
      const t = nowUs();
      if (!first) first = t;
      last = t;
      if ((got & 7) === 0) {
        const m = re.exec(s);
        if (m) lat.push(t - parseInt(m[1], 10));
      }
      if (got === expected && ++done === n) finish();
    });
    ws.on('error', reject);
  });
}

function finish() {
  process.stdout.write(JSON.stringify({ delivered, first_ms: first / 1000, last_ms: last / 1000,
                                        lat_us: lat }) + '\n', () => process.exit(0));
}

(async () => {
  for (let i = 0; i < n; i += 50) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 50); k++) batch.push(open(k));
    await Promise.all(batch);
  }
  process.stdout.write('ready\n');
  setTimeout(finish, parseInt(process.env.BENCH_WS_DEADLINE_MS || '180000', 10));
})().catch((e) => { console.error('ws_clients:', e.message); process.exit(1); });
