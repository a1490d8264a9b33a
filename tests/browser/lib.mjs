// tests/browser/lib.mjs — what the browser tests share: the paths, the
// processes they start (logged to the output folder, stopped cleanly), a
// wait with a deadline, screenshots, and the runner that ends with the
// "N passed, N failed" line.

import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, existsSync, rmSync, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateSync } from 'node:zlib';

const HERE = path.dirname (fileURLToPath (import.meta.url));
export const ROOT = process.env.SB_ROOT || path.resolve (HERE, '..', '..');
export const SB_BIN = process.env.SB_BIN || path.join (ROOT, 'build', 'switchboard');
export const CHROMIUM = process.env.SB_CHROMIUM || '/usr/bin/chromium';
export const OUT = process.env.SB_BROWSER_OUT || path.join (path.dirname (SB_BIN), 'test-output', 'browser');
export const PY = '/usr/bin/python3';
export const STEP_MS = 20000;   // the longest any one step may take

const procs = [];
const tmps = [];

export function log (...a) {
  console.log ('[browser]', ...a);
}

export function fail (msg) {
  throw new Error (msg);
}

export function check (cond, msg) {
  if (!cond)
    fail (msg);
}

export function tmp (prefix) {
  const d = mkdtempSync (path.join (tmpdir (), prefix));
  tmps.push (d);
  return d;
}

export function start (argv, logFile, env) {
  const p = spawn (argv [0], argv.slice (1), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const chunks = [];
  const file = createWriteStream (logFile);
  for (const s of [p.stdout, p.stderr])
    s.on ('data', (d) => {
      chunks.push (d);
      file.write (d);
    });
  p.exited = new Promise ((resolve) => p.on ('exit', (code, signal) => resolve ({ code, signal })));
  p.logText = () => Buffer.concat (chunks).toString ();
  procs.push (p);
  return p;
}

// Stops a process with SIGTERM and waits for it (SIGKILL after ms).
export async function stop (p, ms = 10000) {
  if (p.exitCode !== null || p.signalCode !== null)
    return p.exited;
  p.kill ('SIGTERM');
  const timer = setTimeout (() => p.kill ('SIGKILL'), ms);
  const r = await p.exited;
  clearTimeout (timer);
  return r;
}

export function run (argv, { timeout = 15000 } = {}) {
  return new Promise ((resolve) => {
    execFile (argv [0], argv.slice (1), { timeout }, (err, stdout, stderr) =>
      resolve ({ code: err ? (err.code ?? 1) : 0, stdout, stderr }));
  });
}

export async function waitFor (what, fn, timeout = STEP_MS, interval = 50) {
  const end = Date.now () + timeout;
  let last;
  for (;;) {
    try {
      last = await fn ();
      if (last)
        return last;
    } catch (e) {
      last = e;
    }
    if (Date.now () > end)
      fail ('timed out waiting for ' + what + (last instanceof Error ? ': ' + last.message : ''));
    await new Promise (r => setTimeout (r, interval));
  }
}

export async function shot (page, name) {
  const file = path.join (OUT, name + '.png');
  await page.screenshot ({ path: file });
  log ('screenshot', file);
}

// tests/llm_server.py on a free loopback port, scripting `turns` as `script`;
// resolves with {port, dir} (dir holds its requests.jsonl), logging to
// OUT/<name>.log.
export async function startLlm (script, turns, name = 'llm_server') {
  const dir = tmp ('sb-browser-llm-');
  const llm = start ([PY, path.join (ROOT, 'tests', 'llm_server.py'), '--port', '0',
                      '--portfile', path.join (dir, 'port'), '--log', path.join (dir, 'requests.jsonl'),
                      '--fixtures', path.join (ROOT, 'tests', 'fixtures', 'llm')], path.join (OUT, name + '.log'));
  const port = await waitFor ('llm_server to listen', () => {
    check (llm.exitCode === null, 'llm_server exited: ' + llm.logText ());
    return existsSync (path.join (dir, 'port')) && Number (readFileSync (path.join (dir, 'port'), 'utf8'));
  });
  const ctl = await fetch ('http://127.0.0.1:' + port + '/_control', {
    method: 'POST', body: JSON.stringify ({ op: 'script', name: script, turns }) });
  check (ctl.ok, 'llm_server refused the script');
  return { port, dir };
}

// serve on a fresh data folder with the gateway on a free port; resolves
// with {serve, data, base, token} once DATA/http.port is written.
export async function startServe (args = [], name = 'serve') {
  const data = tmp ('sb-browser-data-');
  const serve = start ([SB_BIN, 'serve', '--data', data, '--http', '127.0.0.1:0', ...args], path.join (OUT, name + '.log'));
  const port = await waitFor ('serve to write DATA/http.port', () => {
    check (serve.exitCode === null, 'serve exited: ' + serve.logText ());
    return existsSync (path.join (data, 'http.port')) && Number (readFileSync (path.join (data, 'http.port'), 'utf8'));
  });
  const token = readFileSync (path.join (data, 'token'), 'utf8').trim ();
  return { serve, data, token, base: 'http://127.0.0.1:' + port };
}

// serve stops cleanly, and (under ASan) reported nothing.
export async function stopServe (serve) {
  const end = await stop (serve);
  check (end.code === 0, 'serve exited with ' + JSON.stringify (end) + ':\n' + serve.logText ().slice (-3000));
  check (!/AddressSanitizer|LeakSanitizer|runtime error:/.test (serve.logText ()), 'serve reported a sanitizer error');
}

// Runs the test, stops what it started, prints the closing line, exits.
export async function runTest (main) {
  mkdirSync (OUT, { recursive: true });
  let code = 0;
  try {
    check (existsSync (SB_BIN), 'no binary at ' + SB_BIN + ' (make first)');
    await main ();
    log ('PASS');
  } catch (e) {
    code = 1;
    console.error ('[browser] FAIL:', e.message);
  }
  await Promise.all (procs.map (p => stop (p, 5000)));
  if (!process.env.SB_KEEP_DATA)
    for (const d of tmps)
      rmSync (d, { recursive: true, force: true });
  console.log ((code ? 0 : 1) + ' passed, ' + code + ' failed');
  process.exit (code);
}

// A temporary git repository with `files` ({path: text}) in one commit.
export async function gitRepo (prefix, files) {
  const repo = tmp (prefix);
  for (const args of [['init', '-q'], ['config', 'user.email', 't@example.com'], ['config', 'user.name', 't']]) {
    const r = await run (['git', '-C', repo, ...args]);
    check (r.code === 0, 'git ' + args.join (' ') + ': ' + r.stderr);
  }
  for (const [p, text] of Object.entries (files))
    writeFileSync (path.join (repo, p), text);
  check ((await run (['git', '-C', repo, 'add', '.'])).code === 0, 'git add');
  check ((await run (['git', '-C', repo, 'commit', '-qm', 'init'])).code === 0, 'git commit');
  return repo;
}

// Headless Chromium, as every test here runs it.
export async function launch () {
  return chromium.launch ({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
}

// A 1440x900 page on the UI, in with the token and live; `problems`
// collects the page's uncaught errors.
export async function openUi (browser, base, token) {
  const page = await browser.newPage ({ viewport: { width: 1440, height: 900 } });
  const problems = [];
  page.on ('pageerror', (e) => problems.push ('page error: ' + e.message));
  await page.goto (base + '/?token=' + token);
  await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
  return { page, problems };
}

// A real w x h RGB PNG (a gradient), built here.
export function png (w, h) {
  const crcTable = [...Array (256)].map ((_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++)
      c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf)
      c = crcTable [(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc (4);
    len.writeUInt32BE (data.length);
    const td = Buffer.concat ([Buffer.from (type), data]);
    const c = Buffer.alloc (4);
    c.writeUInt32BE (crc (td));
    return Buffer.concat ([len, td, c]);
  };
  const ihdr = Buffer.alloc (13);
  ihdr.writeUInt32BE (w, 0);
  ihdr.writeUInt32BE (h, 4);
  ihdr [8] = 8;
  ihdr [9] = 2;
  const raw = Buffer.alloc ((w * 3 + 1) * h);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const o = y * (w * 3 + 1) + 1 + x * 3;
      raw [o] = x * 5;
      raw [o + 1] = y * 7;
      raw [o + 2] = 128;
    }
  return Buffer.concat ([Buffer.from ([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk ('IHDR', ihdr),
                         chunk ('IDAT', deflateSync (raw)), chunk ('IEND', Buffer.alloc (0))]);
}
