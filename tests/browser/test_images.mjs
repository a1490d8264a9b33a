// tests/browser/test_images.mjs — an image pasted into the composer, in real
// Chromium (docs/images.md). tests/integration/test_browser_images.sh runs it.
//
// serve on tests/llm_server.py (Responses, gen=1); a session made with the
// CLI is opened in the page, and then, as a person would:
//   - a PNG is pasted into the composer: it is uploaded (POST /api/blobs/)
//     and its thumbnail shows in the composer's tray;
//   - the prompt is sent: the tray empties, the prompt in the transcript
//     shows the image, loaded from GET /api/blobs/SESSION/SHA256;
//   - the model's request carried the pasted bytes (input_image, a data URL).

import { existsSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { ROOT, SB_BIN, CHROMIUM, OUT, PY, STEP_MS, check, tmp, start, run, waitFor, shot,
         startServe, stopServe, runTest, png } from './lib.mjs';

async function main () {
  const llmDir = tmp ('sb-images-llm-');
  const log = path.join (llmDir, 'requests.jsonl');
  const llm = start ([PY, path.join (ROOT, 'tests', 'llm_server.py'), '--port', '0',
                      '--portfile', path.join (llmDir, 'port'), '--log', log,
                      '--fixtures', path.join (ROOT, 'tests', 'fixtures', 'llm')], path.join (OUT, 'images_llm.log'));
  const llmPort = await waitFor ('llm_server to listen', () => {
    check (llm.exitCode === null, 'llm_server exited: ' + llm.logText ());
    return existsSync (path.join (llmDir, 'port')) && Number (readFileSync (path.join (llmDir, 'port'), 'utf8'));
  });
  const { serve, data, token, base } = await startServe (
    ['--llm', 'responses', '--llm-url', 'http://127.0.0.1:' + llmPort + '/gen=1/tag=img/v1', '--model', 'm'],
    'images_serve');
  const made = await run ([SB_BIN, 'sessions', 'new', '--workspace', tmp ('sb-images-ws-'), '--json', '--data', data]);
  const sid = JSON.parse (made.stdout).session_id;
  const image = png (48, 32);
  const browser = await chromium.launch ({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage ({ viewport: { width: 1280, height: 800 } });
    const problems = [];
    page.on ('pageerror', (e) => problems.push ('page error: ' + e.message));
    await page.goto (base + '/?token=' + token + '#s=' + sid);
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
    await page.waitForSelector (`#sessions [data-session="${sid}"]`, { timeout: STEP_MS });
    if (await page.evaluate (() => window.sbApp.current) !== sid)
      await page.click (`#sessions [data-session="${sid}"]`);
    await waitFor ('the session to open', async () => (await page.evaluate (() => window.sbApp.current)) === sid);

    // paste: a ClipboardEvent whose data holds the PNG as a file
    await page.evaluate ((b64) => {
      const bytes = Uint8Array.from (atob (b64), (c) => c.charCodeAt (0));
      const dt = new DataTransfer ();
      dt.items.add (new File ([bytes], 'pasted.png', { type: 'image/png' }));
      const input = document.getElementById ('composer-input');
      input.focus ();
      input.dispatchEvent (new ClipboardEvent ('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    }, image.toString ('base64'));
    const thumb = await page.waitForSelector ('#composer-images .thumb img', { timeout: STEP_MS });
    const sha = createHash ('sha256').update (image).digest ('hex');
    check (await page.$eval ('#composer-images .thumb', (n) => n.dataset.sha256) === sha,
      'the tray holds another blob than the pasted one');
    await waitFor ('the composer thumbnail to load', () => thumb.evaluate ((img) => img.complete && img.naturalWidth === 48))
      .catch (() => check (false, 'the composer thumbnail did not load'));
    await shot (page, 'images_composer');

    await page.fill ('#composer-input', 'what is in the picture?');
    await page.press ('#composer-input', 'Enter');
    const shown = await page.waitForSelector ('#transcript .user .prompt-images img', { timeout: STEP_MS });
    await waitFor ('the transcript image to load', () => shown.evaluate ((img) => img.complete && img.naturalWidth > 0))
      .catch (() => check (false, 'the transcript image did not load from /api/blobs/'));
    check (await shown.evaluate ((img) => img.naturalWidth === 48 && img.naturalHeight === 32),
      'the transcript shows another image');
    check (await page.$eval ('#composer-images', (n) => n.hidden && !n.children.length), 'the tray kept the image');
    await shot (page, 'images_transcript');

    // what the model got: the pasted bytes, as an input_image data URL
    const req = await waitFor ('the model request', () => {
      if (!existsSync (log))
        return null;
      const lines = readFileSync (log, 'utf8').split ('\n').filter (Boolean).map ((l) => JSON.parse (l));
      return lines.find ((r) => r.endpoint === 'responses') || null;
    });
    const user = req.json.input.filter ((i) => i.role === 'user').pop ();
    const part = user.content.find ((p) => p.type === 'input_image');
    check (part && part.image_url === 'data:image/png;base64,' + image.toString ('base64'),
      'the model did not get the pasted image byte for byte');
    check (!problems.length, 'the page reported errors: ' + problems.join ('; '));
  } finally {
    await browser.close ();
    llm.kill ();
  }
  await stopServe (serve);
}

runTest (main);
