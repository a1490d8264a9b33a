// bench/node/ws_relay.js — the baseline of bench/bench_ws.py: the relay
// many teams would write instead of a gateway. It reads JSON lines (one
// event each) on stdin and sends each to every connected client with the
// `ws` package. Prints its port on stdout.
'use strict';
const WebSocket = require('ws');
const readline = require('readline');
const wss = new WebSocket.Server({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
wss.on('listening', () => process.stdout.write(wss.address().port + '\n'));
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  for (const c of wss.clients)
    if (c.readyState === WebSocket.OPEN) c.send(line);
});
