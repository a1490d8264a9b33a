// tests/browser/test_artifacts.mjs — the Artifacts panel beside Changes, in
// real Chromium (docs/images.md). tests/integration/test_browser_artifacts.sh
// runs it.
//
// serve (no model needed); a session made with the CLI, a text file
// attached to it with `switchboard attach` (a person's, from the CLI);
// then in the page, as a person would:
//   - the Artifacts tab lists it with its origin and the head of its text
//     as text (a "<b>" in it stays two characters, never markup);
//   - the Attach button's file input takes a PNG: it is stored and
//     attached (POST /api/blobs/, session.attach), and the panel lists it
//     with its preview, loaded from GET /api/blobs/SESSION/SHA256;
//   - `switchboard artifacts --json` lists both, origin person, at the
//     seqs the panel shows.

import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { SB_BIN, CHROMIUM, STEP_MS, check, tmp, run, waitFor, shot, startServe, stopServe, runTest,
         png } from './lib.mjs';

async function main () {
  const { serve, data, token, base } = await startServe ([], 'artifacts_serve');
  const made = await run ([SB_BIN, 'sessions', 'new', '--workspace', tmp ('sb-artifacts-ws-'), '--json', '--data', data]);
  const sid = JSON.parse (made.stdout).session_id;
  const notes = path.join (tmp ('sb-artifacts-files-'), 'notes.txt');
  const text = 'line one: <b>not bold</b>\nline two\n';
  writeFileSync (notes, text);
  const at = await run ([SB_BIN, 'attach', sid, notes, '--data', data]);
  check (at.code === 0, 'switchboard attach: ' + at.stderr);
  const image = png (48, 32);
  const imagePath = path.join (tmp ('sb-artifacts-img-'), 'shot.png');
  writeFileSync (imagePath, image);
  const browser = await chromium.launch ({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage ({ viewport: { width: 1280, height: 800 } });
    const problems = [];
    page.on ('pageerror', (e) => problems.push ('page error: ' + e.message));
    await page.goto (base + '/?token=' + token + '#s=' + sid);
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
    await waitFor ('the session to open', async () => (await page.evaluate (() => window.sbApp.current)) === sid);
    await page.click ('#tab-artifacts');
    check (await page.$eval ('#pane-changes', (n) => n.hidden), 'the Changes pane still shows');

    // the person's text file, attached from the CLI, with its text
    const first = await page.waitForSelector ('#pane-artifacts .artifact[data-origin=person]', { timeout: STEP_MS });
    const textSha = createHash ('sha256').update (text).digest ('hex');
    check (await first.evaluate ((n) => n.dataset.sha256) === textSha, 'the panel lists another blob');
    check ((await first.textContent ()).includes ('notes.txt'), 'the name is not shown');
    await waitFor ('the text preview', async () => (await first.$eval ('pre', (p) => p.textContent)).includes ('line two'));
    check (await first.$eval ('pre', (p) => p.textContent.startsWith ('line one: <b>not bold</b>') && !p.querySelector ('b')),
      'the preview is not the file\'s text as text');

    // a PNG through the Attach button
    await page.setInputFiles ('#attach-input', imagePath);
    const sha = createHash ('sha256').update (image).digest ('hex');
    const shown = await page.waitForSelector (`#pane-artifacts .artifact[data-sha256="${sha}"] img`, { timeout: STEP_MS });
    await waitFor ('the preview to load', () => shown.evaluate ((img) => img.complete && img.naturalWidth > 0))
      .catch (() => check (false, 'the image preview did not load from /api/blobs/'));
    check (await shown.evaluate ((img) => img.naturalWidth === 48 && img.naturalHeight === 32),
      'the preview shows another image');
    check (await page.$$eval ('#pane-artifacts .artifact', (n) => n.length) === 2, 'the panel does not list two');
    await shot (page, 'artifacts_panel');

    // the CLI sees what the panel shows
    const listed = await run ([SB_BIN, 'artifacts', sid, '--json', '--data', data]);
    check (listed.code === 0, 'switchboard artifacts: ' + listed.stderr);
    const rows = listed.stdout.split ('\n').filter (Boolean).map ((l) => JSON.parse (l));
    check (rows.length === 2 && rows.every ((r) => r.origin === 'person'), 'artifacts --json: ' + listed.stdout);
    check (rows [0].sha256 === textSha && rows [1].sha256 === sha && rows [1].name === 'shot.png',
      'artifacts --json in another order: ' + listed.stdout);
    const origins = await page.$$eval ('#pane-artifacts .artifact-origin', (n) => n.map ((x) => x.textContent));
    check (origins.join ('|') === rows.map ((r) => 'attached by a person · seq ' + r.seq).join ('|'),
      'the panel\'s origins ' + JSON.stringify (origins) + ' are not the tape\'s');
    check (!problems.length, 'the page reported errors: ' + problems.join ('; '));
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
}

runTest (main);
