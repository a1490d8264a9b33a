// tests/browser/test_budget.mjs — a budget question in the browser UI
// (docs/usage.md), in real Chromium. tests/integration/test_browser.sh
// test_budget.mjs runs it.
//
// A session with a budget of 500 tokens a run, on a scripted model whose
// calls take 300 tokens each (tests/llm_server.py on loopback): the header
// shows the budget; the first call leaves a 50 % warning in the transcript;
// the second reaches the budget, and the run waits with a budget card (which
// budget, what was spent, the limit). The card refuses a raise that is not
// an amount; raised by 1000 from the card, the run goes on, the transcript
// says the new limit (1500), and the run completes.

import { chromium } from 'playwright-core';
import { SB_BIN, CHROMIUM, STEP_MS, check, tmp, run, waitFor, shot, startLlm, startServe, stopServe,
         runTest } from './lib.mjs';

const read = (n) => ({ tool_calls: [{ name: 'list_dir', arguments: { path: '.' }, call_id: 'c' + n }],
                       usage: { input_tokens: 200, output_tokens: 100 } });
const TURNS = [read (1), read (2), read (3), { text: 'All read.', usage: { input_tokens: 200, output_tokens: 100 } }];

async function main () {
  const { port: llmPort } = await startLlm ('budget', TURNS, 'llm_server_budget');
  const url = 'http://127.0.0.1:' + llmPort + '/script=budget/v1';
  const { serve, data, token, base } = await startServe (['--llm', 'responses', '--model', 'test-model',
                                                        '--llm-url', url], 'serve-budget');
  const repo = tmp ('sb-browser-budget-');
  const made = await run ([SB_BIN, 'sessions', 'new', '--workspace', repo, '--title', 'budget', '--budget-tokens', '500',
                           '--json', '--data', data]);
  check (made.code === 0, 'sessions new: ' + made.stderr);
  const sid = JSON.parse (made.stdout).session_id;

  const browser = await chromium.launch ({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage ({ viewport: { width: 1440, height: 900 } });
    const problems = [];
    page.on ('pageerror', (e) => problems.push ('page error: ' + e.message));
    page.on ('console', (m) => { if (m.type () === 'error') problems.push ('console error: ' + m.text ()); });
    await page.goto (base + '/?token=' + token + '#s=' + sid);
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
    await waitFor ('the header to show the budget', async () =>
      (await page.innerText ('#head-budget')).includes ('500 tokens per run'));

    const p = await run ([SB_BIN, 'prompt', sid, 'read everything', '--data', data]);
    check (p.code === 0, 'prompt: ' + p.stderr);
    const card = await page.waitForSelector ('#transcript .approval.budget.pending', { timeout: STEP_MS });
    const text = await card.innerText ();
    check (text.includes ('600 tokens') && text.includes ('500 tokens') && /budget reached/i.test (text),
      'the budget card does not say what was spent of which limit: ' + text);
    const warning = await page.innerText ('#transcript .budget-note.warning');
    check (warning.includes ('50 %') && warning.includes ('300 tokens'), 'no 50 % warning: ' + warning);
    await shot (page, '20-budget-card');

    // not an amount: the card keeps its question
    await page.fill ('#transcript .approval.budget .raise', 'lots');
    await page.click ('#transcript .approval.budget button.approve');
    check (await page.$ ('#transcript .approval.budget.pending'), 'a raise of "lots" answered the question');

    await page.fill ('#transcript .approval.budget .raise', '1000');
    await page.click ('#transcript .approval.budget button.approve');
    await page.waitForSelector ('#transcript .approval.budget.approved >> text=browser', { timeout: STEP_MS });
    const raised = await page.waitForSelector ('#transcript .budget-note.raised', { timeout: STEP_MS });
    check ((await raised.innerText ()).includes ('1500 tokens'), 'the raise is not 1500: ' + await raised.innerText ());
    await page.waitForSelector ('#transcript .assistant >> text=All read.', { timeout: STEP_MS });
    check ((await page.innerText ('#transcript .approval.budget')).includes ('raised by 1000 tokens'),
      'the card does not say the raise');
    await shot (page, '21-budget-raised');

    const ia = await run ([SB_BIN, 'interactions', '--session', sid, '--json', '--data', data]);
    const rec = JSON.parse (ia.stdout.trim ().split ('\n') [0]);
    check (rec.kind === 'budget' && rec.raise === 1000 && rec.resolved_by === 'browser', 'the record: ' + ia.stdout);
    check (!problems.length, problems.join ('\n'));
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
}

await runTest (main);
