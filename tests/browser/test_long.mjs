// tests/browser/test_long.mjs — a long tape in the browser UI (issue 11's
// quality bar: 10,000 events render without freezing). Run by
// tests/integration/test_browser_long.sh.
//
// A session gets 100 runs of 99 entries each (prompt, statuses, streamed
// text with a code block, four shell calls with output, usage): 9,901
// entries with session.created, appended over the bus by a Python client.
// The page opens it and must render every entry once within the deadline,
// never blocking its main thread for long (the longest task is measured
// with a PerformanceObserver), with every run, card and prompt there, and
// the view at the bottom. It prints the figures as one JSON line.

import path from 'node:path';
import { chromium } from 'playwright-core';
import { ROOT, CHROMIUM, PY, log, check, tmp, run, waitFor, shot, startServe, stopServe, runTest } from './lib.mjs';

const RUNS = 100;
const STEPS = 4;
const DELTAS = 15;
const OUTPUTS = 5;
const PER_RUN = 2 + STEPS * (DELTAS + 1 + 1 + OUTPUTS + 1 + 1) + 1;
const ENTRIES = 1 + RUNS * PER_RUN;
const REPLAY_MS = 60000;        // the whole tape on screen within this
const LONGEST_TASK_MS = 2000;   // no task of the page may block it longer

// The tape, written through the bus as a run's executor would (one atomic
// batch a run). sbtest is the integration tests' Python client.
const WRITER = `
import json, sys
sys.path.insert(0, sys.argv[1])
from sbtest import Client
c = Client("ipc://%s/bus-cmd" % sys.argv[2])
sid, runs, steps, deltas, outputs = sys.argv[3], *map(int, sys.argv[4:8])
for run in range(runs):
    rid = "01LONGRUN%017d" % run
    e = [{"kind": "prompt", "body": {"text": "prompt %d: make the tests pass" % run}},
         {"kind": "run.status", "body": {"run_id": rid, "status": "running"}}]
    for step in range(steps):
        for k in range(deltas):
            e.append({"kind": "text.delta", "body": {"text": "word%d " % k + ("\\n\\n\`\`\`c\\nint x = %d;\\n\`\`\`\\n" % k if k == 7 else "")}})
        e.append({"kind": "text.done", "body": {"text": ""}})
        cid = "call_%d_%d" % (run, step)
        e.append({"kind": "tool.call", "body": {"call_id": cid, "name": "shell", "arguments": json.dumps({"command": "make test %d" % step})}})
        for k in range(outputs):
            e.append({"kind": "tool.output", "body": {"call_id": cid, "text": "line %d\\n" % k * 5}})
        e.append({"kind": "tool.result", "body": {"call_id": cid, "ok": True, "output": "ok", "exit_code": 0, "duration_ms": 12}})
        e.append({"kind": "usage", "body": {"input_tokens": 100, "output_tokens": 10}})
    e.append({"kind": "run.status", "body": {"run_id": rid, "status": "completed"}})
    r = c.request("session.append", {"session_id": sid, "run_id": rid, "entries": e}, timeout=30)
    assert r.type == "session.append.ok", r.body
`;

async function main () {
  const { serve, data, token, base } = await startServe ();
  const repo = tmp ('sb-browser-long-');
  const made = await run ([process.env.SB_BIN, 'call', 'session.create', JSON.stringify ({ workspace: repo, title: 'long tape' }),
                           '--data', data]);
  check (made.code === 0, 'session.create: ' + made.stderr);
  const sid = JSON.parse (made.stdout).session.session_id;
  const w = await run ([PY, '-c', WRITER, path.join (ROOT, 'tests', 'integration'), data, sid, String (RUNS), String (STEPS),
                        String (DELTAS), String (OUTPUTS)], { timeout: 120000 });
  check (w.code === 0, 'the tape writer failed: ' + w.stderr);

  const browser = await chromium.launch ({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage ({ viewport: { width: 1440, height: 900 } });
    const problems = [];
    page.on ('pageerror', (e) => problems.push ('page error: ' + e.message));
    await page.addInitScript (() => {
      window.__longest = 0;
      new PerformanceObserver ((list) => {
        for (const e of list.getEntries ())
          window.__longest = Math.max (window.__longest, e.duration);
      }).observe ({ type: 'longtask', buffered: true });
    });
    await page.goto (base + '/?token=' + token);
    await page.waitForSelector ('#conn[data-state=live]');
    await page.evaluate (() => { window.__longest = 0; });
    const t0 = Date.now ();
    await page.evaluate ((s) => { location.hash = 's=' + s; }, sid);
    await waitFor ('the page to render all ' + ENTRIES + ' entries', () => page.evaluate ((n) =>
      Number (document.getElementById ('transcript').dataset.lastSeq) >= n, ENTRIES), REPLAY_MS, 100);
    const replayMs = Date.now () - t0;
    await page.evaluate (() => new Promise (r => requestAnimationFrame (() => requestAnimationFrame (r))));
    const s = await page.evaluate (() => {
      const root = document.getElementById ('transcript');
      const sc = document.getElementById ('scroll');
      return {
        applied: Number (root.dataset.applied), last: Number (root.dataset.lastSeq),
        runs: root.querySelectorAll ('.run-end.st-completed').length,
        cards: root.querySelectorAll ('.tool.ok').length,
        prompts: root.querySelectorAll ('.user').length,
        codes: root.querySelectorAll ('.assistant .code').length,
        gap: sc.scrollHeight - sc.scrollTop - sc.clientHeight,
        longest: Math.round (window.__longest),
        nodes: document.getElementsByTagName ('*').length,
      };
    });
    console.log (JSON.stringify ({ bench: 'ui.replay', entries: ENTRIES, replay_ms: replayMs, longest_task_ms: s.longest,
                                   dom_nodes: s.nodes }));
    check (s.applied === ENTRIES && s.last === ENTRIES, 'applied ' + s.applied + ' entries up to seq ' + s.last + ', want ' + ENTRIES);
    check (s.runs === RUNS, s.runs + ' run-end lines, want ' + RUNS);
    check (s.cards === RUNS * STEPS, s.cards + ' tool cards, want ' + RUNS * STEPS);
    check (s.prompts === RUNS, s.prompts + ' prompts, want ' + RUNS);
    check (s.codes === RUNS * STEPS, s.codes + ' code blocks, want ' + RUNS * STEPS);
    check (s.gap < 48, 'the view is not at the bottom after the replay (' + s.gap + ' px above)');
    check (s.longest < LONGEST_TASK_MS, 'the page froze for ' + s.longest + ' ms during the replay');
    check ((await page.innerText ('#head-usage')).includes (RUNS * STEPS + ' steps'), 'the header does not count every step');
    await shot (page, '08-long-tape');
    check (!problems.length, problems.join ('\n'));
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
}

await runTest (main);
