// tests/browser/test_providers.mjs — a first day in the browser UI (issue 21),
// in real Chromium. tests/integration/test_browser_providers.sh runs it.
//
// serve gets a providers file with two providers (a scripted one on
// tests/llm_server.py, the default, and the demo model), and then, as a
// person would:
//   - the New-session dialog offers both providers and the chosen one's
//     models (llm.models); the session made with a provider and model shows
//     them in the header and the sidebar, and the header changes provider;
//   - the model asks to write a file with a 600-character line: the
//     approval card sits above the tool card it allows, and the long diff
//     line wraps instead of being cut;
//   - every tool icon is inline SVG, with no glyph that needs a font;
//   - the Bus tab's type and sender columns fit what they show;
//   - the session is archived (session.close), then deleted
//     (session.delete), and is gone from the server and the list.
// Every check is made, and the failures are listed together at the end.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { SB_BIN, STEP_MS, log, check, tmp, run, waitFor, shot, startLlm, startServe, stopServe,
         runTest, launch, openUi } from './lib.mjs';

const LONG = 'x'.repeat (40) + ' ' + 'the-long-line-'.repeat (40) + 'END';
const TURNS = [
  { text: 'I write the file.',
    tool_calls: [{ name: 'write_file', arguments: { path: 'long.txt', content: 'short\n' + LONG + '\n' },
                   call_id: 'call_long' }],
    usage: { input_tokens: 100, output_tokens: 20 } },
  { text: 'Written.', usage: { input_tokens: 120, output_tokens: 10 } },
];

const failures = [];
function soft (cond, msg) {
  if (!cond) {
    failures.push (msg);
    log ('FAILED CHECK:', msg);
  }
  return !!cond;
}

async function cli (data, ...args) {
  return run ([SB_BIN, ...args, '--data', data]);
}

async function options (page, sel) {
  return page.$$eval (sel + ' option', (os) => os.map (o => o.value));
}

async function main () {
  const { port: llmPort, dir: llmDir } = await startLlm ('fd', TURNS, 'firstday_llm');

  const providers = path.join (llmDir, 'providers.json');
  writeFileSync (providers, JSON.stringify ({ default: 'scripted', providers: [
    { name: 'scripted', kind: 'responses', base_url: 'http://127.0.0.1:' + llmPort + '/script=fd/v1', model: 'test-model' },
    { name: 'demo', kind: 'demo', model: 'demo' },
  ] }));
  const repo = tmp ('sb-firstday-repo-');
  const { serve, data, token, base } = await startServe (['--providers', providers], 'firstday_serve');

  const browser = await launch ();
  try {
    const { page, problems } = await openUi (browser, base, token);

    // 1. the New-session dialog: both providers, and the chosen one's models
    await page.click ('#new-session-btn');
    await page.fill ('#new-form input[name=workspace]', repo);
    await page.fill ('#new-form input[name=title]', 'First day');
    await page.selectOption ('#new-form select[name=approval_policy]', 'auto');
    const hasProvider = soft (await page.$ ('#new-form select[name=provider]'), 'the New-session dialog has no provider choice');
    if (hasProvider) {
      await waitFor ('the providers in the dialog', async () => {
        const o = await options (page, '#new-form select[name=provider]');
        return o.includes ('scripted') && o.includes ('demo');
      }).catch (() => soft (false, 'the dialog does not offer both providers'));
      await page.selectOption ('#new-form select[name=provider]', 'demo');
      const demoModels = await options (page, '#new-form select[name=model]');
      soft (demoModels.includes ('demo') && !demoModels.includes ('test-model-2'),
        "the demo provider's models are not the dialog's: " + demoModels);
      await page.selectOption ('#new-form select[name=provider]', 'scripted');
      const ok = await waitFor ('the scripted provider\'s models (llm.models)', async () =>
        (await options (page, '#new-form select[name=model]')).includes ('test-model-2')).catch (() => false);
      if (soft (ok, 'the dialog does not list the scripted provider\'s models'))
        await page.selectOption ('#new-form select[name=model]', 'test-model-2');
    }
    await page.click ('#new-create');
    await page.waitForSelector ('#transcript .quiet >> text=Session created', { timeout: STEP_MS });
    const sid = await page.evaluate (() => window.sbApp.current);
    const made = JSON.parse ((await cli (data, 'sessions', 'show', sid, '--json')).stdout || '{}');
    soft (made.provider === 'scripted' && made.model === 'test-model-2',
      'the session was not made with the chosen provider and model: ' + JSON.stringify (made));

    // the header and the sidebar name the provider and model it runs with
    const head = await page.$ ('#head-effective');
    soft (head && (await head.innerText ()).includes ('scripted / test-model-2'),
      'the header does not name the provider and model: ' + (head ? await head.innerText () : 'no #head-effective'));
    const row = await page.innerText (`#sessions [data-session="${sid}"]`);
    soft (row.includes ('scripted / test-model-2'), 'the sidebar row does not name them: ' + row);

    // 2. the run asks before write_file: the approval card above the tool card
    await page.fill ('#composer-input', 'write the long file');
    await page.press ('#composer-input', 'Enter');
    const card = await page.waitForSelector ('#transcript .approval.pending[data-call=call_long]', { timeout: STEP_MS });
    await page.waitForSelector ('#transcript .tool[data-call=call_long]', { timeout: STEP_MS });
    await page.evaluate (() => window.sbApp.transcript.flush ());
    const above = await page.evaluate (() => {
      const a = document.querySelector ('#transcript .approval[data-call=call_long]');
      const t = document.querySelector ('#transcript .tool[data-call=call_long]');
      return !!(a.compareDocumentPosition (t) & Node.DOCUMENT_POSITION_FOLLOWING);
    });
    soft (above, 'the approval card is below the tool card it allows');

    // the long diff line wraps: nothing of it is cut or scrolled away
    const wrap = await card.$eval ('pre.diff', (pre) => {
      const line = [...pre.querySelectorAll ('.dl.add')].find (l => l.textContent.includes ('END'));
      const h = parseFloat (getComputedStyle (line).lineHeight) || 16;
      return { scroll: pre.scrollWidth, client: pre.clientWidth, rows: line.getBoundingClientRect ().height / h };
    });
    soft (wrap.scroll <= wrap.client + 1 && wrap.rows >= 2,
      'the long diff line is cut instead of wrapped: ' + JSON.stringify (wrap));
    await shot (page, 'firstday-01-approval-above');

    // 3. every tool icon is inline SVG, with no text glyph
    const icons = await page.$$eval ('#transcript .tool-icon', (ns) => ns.map (n => ({
      svg: !!n.querySelector ('svg path, svg rect, svg circle'), text: n.textContent.trim () })));
    soft (icons.length >= 2, 'no tool icons to look at: ' + icons.length);
    soft (icons.every (i => i.svg && i.text === ''), 'a tool icon is a font glyph, not SVG: ' + JSON.stringify (icons));
    const buttons = await page.$$eval ('#menu, #panel-toggle', (ns) => ns.map (n => ({
      svg: !!n.querySelector ('svg'), text: n.textContent.trim () })));
    soft (buttons.every (b => b.svg && b.text === ''), 'a header button is a font glyph: ' + JSON.stringify (buttons));

    await (await card.$ ('button.approve')).click ();
    await page.waitForSelector ('#transcript .run-end.st-completed', { timeout: STEP_MS });
    const endIcon = await page.$eval ('#transcript .run-end .icon', (n) => ({ svg: !!n.querySelector ('svg'),
      text: n.textContent.trim () }));
    soft (endIcon.svg && endIcon.text === '', 'the run\'s end mark is a font glyph: ' + JSON.stringify (endIcon));

    // 4. the header changes the provider; a model the new one lacks goes
    const headProvider = await page.$ ('#head-provider');
    if (soft (headProvider, 'the header has no provider choice')) {
      const o = await options (page, '#head-provider');
      soft (o.includes ('scripted') && o.includes ('demo'), 'the header does not offer both providers: ' + o);
      await page.selectOption ('#head-provider', 'demo');
      const now = await waitFor ('the session to take provider demo', async () => {
        const s = JSON.parse ((await cli (data, 'sessions', 'show', sid, '--json')).stdout || '{}');
        return s.provider === 'demo' ? s : null;
      }).catch (() => ({}));
      soft (now.provider === 'demo' && !now.model, 'the header did not change the provider: ' + JSON.stringify (now));
      await waitFor ('the header to name demo / demo', async () =>
        (await page.innerText ('#head-effective')).includes ('demo / demo')).catch (() =>
        soft (false, 'the header does not name demo / demo'));
      await waitFor ('the sidebar to name demo / demo', async () =>
        (await page.innerText (`#sessions [data-session="${sid}"]`)).includes ('demo / demo')).catch (() =>
        soft (false, 'the sidebar does not name demo / demo'));
    }

    // 5. the Bus tab: the type and sender columns fit their text
    await page.click ('#tab-bus');
    await page.waitForSelector ('#pane-bus .bus-status[data-tapping]', { timeout: STEP_MS });
    for (let k = 0; k < 3; k++)
      await page.evaluate ((s) => window.sbApp.conn.call ('session.queue.list', { session_id: s }), sid);
    await waitFor ('tap lines of session.queue.list.ok', async () =>
      page.$ ('#pane-bus .bus-line[data-type="session.queue.list.ok"]'));
    await page.waitForTimeout (100);    // the next animation frame's lines
    const cut = await page.$$eval ('#pane-bus .bus-line summary', (ss) => ss.flatMap (s =>
      ['.bus-type', '.bus-from'].map (c => s.querySelector (c)).filter (n => n.scrollWidth > n.clientWidth + 1)
        .map (n => n.className + ': ' + n.textContent)));
    soft (!cut.length, 'bus columns cut their text: ' + cut.slice (0, 5).join (', '));
    await shot (page, 'firstday-02-bus');
    await page.click ('#tab-changes');

    // 6. archive, then delete
    const archive = await page.$ ('#archive-btn');
    if (soft (archive, 'the header has no Archive button')) {
      await archive.click ();
      const closed = await waitFor ('the session to be closed', async () => {
        const s = JSON.parse ((await cli (data, 'sessions', 'show', sid, '--json')).stdout || '{}');
        return s.status === 'closed';
      }).catch (() => false);
      soft (closed, 'Archive did not close the session');
      await page.waitForSelector ('#head-archived:not([hidden])', { timeout: STEP_MS }).catch (() =>
        soft (false, 'the header does not say the session is archived'));
      soft (await page.$eval ('#composer-input', (n) => n.disabled), 'an archived session still takes prompts');
    }
    const del = await page.$ ('#delete-btn');
    if (soft (del, 'the header has no Delete button')) {
      await del.click ();
      await page.waitForSelector ('#delete-dialog[open]', { timeout: STEP_MS });
      await page.click ('#delete-confirm');
      await page.waitForSelector ('#welcome:not([hidden])', { timeout: STEP_MS });
      const gone = await cli (data, 'sessions', 'show', sid, '--json');
      soft (gone.code !== 0 && /not_found/.test (gone.stderr), 'the session is still on the server: ' + gone.stdout);
      soft (!(await page.$ (`#sessions [data-session="${sid}"]`)), 'the deleted session is still listed');
    }
    soft (!problems.length, 'the page reported errors: ' + problems.join ('; '));
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
  check (!failures.length, failures.length + ' checks failed:\n  ' + failures.join ('\n  '));
}

runTest (main);
