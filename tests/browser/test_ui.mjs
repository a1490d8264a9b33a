// tests/browser/test_ui.mjs — the browser UI end to end, in real Chromium
// (issue 11). tests/integration/test_browser.sh runs it with SB_BIN and
// SB_ROOT set; it starts everything itself:
//
//   - tests/llm_server.py on loopback, scripting three model turns: text and
//     a shell call, text and a write_file, then the final answer;
//   - `switchboard serve` on a fresh data folder with the gateway on a free
//     port, the model pointed at that server;
//   - a temporary git repository as the workspace;
//   - headless /usr/bin/chromium through playwright-core.
//
// Then, as a person would: open the UI with the token, create a session
// (policy auto), send the goal, see the text stream in and the shell card
// appear, approve the shell call from its card, see its output; drop the
// WebSocket mid-run and reload the page while the write_file waits, and
// check the transcript has no duplicate and no gap; resolve that approval
// from the CLI and see the card say who did; see the final answer, and the
// diff of the written file in the Changes panel; then the narrow layout.
// Screenshots go to BUILD/test-output/browser/.

import { writeFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { ROOT, SB_BIN, CHROMIUM, OUT, PY, STEP_MS, log, check, tmp, start, run, waitFor, shot,
         startServe, stopServe, runTest } from './lib.mjs';

// ---- the scripted model -----------------------------------------------

const INTRO = 'I will start by looking at the repository, so that I know what is there. '
  + 'Then I will write a short notes file that says what I found, and check that it reads well. '
  + 'Nothing here needs a network.';
const FINAL = 'Done: the shell printed **hello-from-shell** and `notes.md` is written.\n\n'
  + '```sh\ncat notes.md\n```\n\nSome hostile text that must stay text: <img src=x onerror="window.pwned=1"> '
  + '[click](javascript:window.pwned=2)';
const TURNS = [
  { reasoning: 'The user wants a look around and a notes file.', text: INTRO,
    tool_calls: [{ name: 'shell', arguments: { command: 'echo hello-from-shell && ls' }, call_id: 'call_shell' }],
    usage: { input_tokens: 1200, output_tokens: 80 } },
  { text: 'Now I write the notes file.',
    tool_calls: [{ name: 'write_file', arguments: { path: 'notes.md', content: '# Notes\n\nwritten by the agent\n' },
                   call_id: 'call_write' }],
    usage: { input_tokens: 1500, output_tokens: 60 } },
  { text: FINAL, usage: { input_tokens: 1700, output_tokens: 90 } },
];

// ---- helpers ----------------------------------------------------------

// What the transcript shows, for comparing two renderings of one tape.
async function snapshot (page) {
  // the text blocks and what is kept up to date once a frame (the
  // transcript's data-last-seq among them), brought up to date now
  await page.evaluate (() => {
    window.sbApp.transcript && window.sbApp.transcript.flush ();
    window.sbApp.flushUi ();
  });
  return page.evaluate (() => {
    const root = document.getElementById ('transcript');
    const seqs = [...root.querySelectorAll ('[data-seq]')].map (n => Number (n.dataset.seq));
    return {
      text: root.innerText,
      seqs,
      lastSeq: Number (root.dataset.lastSeq || 0),
      applied: Number (root.dataset.applied || 0),
      prompts: root.querySelectorAll ('.user:not(.queued):not(.steer)').length,
      tools: [...root.querySelectorAll ('.tool')].map (n => n.dataset.call),
      approvals: [...root.querySelectorAll ('.approval')].map (n => n.dataset.interaction),
      assistants: [...root.querySelectorAll ('.assistant')].map (n => n.innerText),
    };
  });
}

// No entry twice, none missing: every seq from 1 to the head was applied
// once, and no two blocks claim the same entry.
function checkExact (s, where) {
  check (s.applied === s.lastSeq, where + ': ' + s.applied + ' entries applied for a head of ' + s.lastSeq);
  check (new Set (s.seqs).size === s.seqs.length, where + ': a tape entry is rendered twice: ' + s.seqs.join (','));
  check (new Set (s.tools).size === s.tools.length, where + ': a tool card is duplicated: ' + s.tools.join (','));
  check (new Set (s.approvals).size === s.approvals.length, where + ': an approval card is duplicated');
  check (s.prompts === 1, where + ': ' + s.prompts + ' prompt bubbles, want 1');
}

// The tape as the CLI reads it.
async function tape (data, sid) {
  const r = await run ([SB_BIN, 'events', '--data', data, '--session', sid, '--json']);
  check (r.code === 0, 'switchboard events failed: ' + r.stderr);
  return r.stdout.trim ().split ('\n').filter (Boolean).map (l => JSON.parse (l));
}

// ---- the test -----------------------------------------------------------

async function main () {

  // the model
  const llmDir = tmp ('sb-browser-llm-');
  const llm = start ([PY, path.join (ROOT, 'tests', 'llm_server.py'), '--port', '0',
                      '--portfile', path.join (llmDir, 'port'), '--log', path.join (llmDir, 'requests.jsonl'),
                      '--fixtures', path.join (ROOT, 'tests', 'fixtures', 'llm')], path.join (OUT, 'llm_server.log'));
  const llmPort = await waitFor ('llm_server to listen', () => {
    check (llm.exitCode === null, 'llm_server exited: ' + llm.logText ());
    return existsSync (path.join (llmDir, 'port')) && Number (readFileSync (path.join (llmDir, 'port'), 'utf8'));
  });
  const ctl = await fetch ('http://127.0.0.1:' + llmPort + '/_control', {
    method: 'POST', body: JSON.stringify ({ op: 'script', name: 'ui', turns: TURNS }) });
  check (ctl.ok, 'llm_server refused the script');

  // the workspace: a git repository with one commit
  const repo = tmp ('sb-browser-repo-');
  for (const args of [['init', '-q'], ['config', 'user.email', 't@example.com'], ['config', 'user.name', 't']]) {
    const r = await run (['git', '-C', repo, ...args]);
    check (r.code === 0, 'git ' + args.join (' ') + ': ' + r.stderr);
  }
  writeFileSync (path.join (repo, 'README.md'), '# demo\n');
  check ((await run (['git', '-C', repo, 'add', '.'])).code === 0, 'git add');
  check ((await run (['git', '-C', repo, 'commit', '-qm', 'init'])).code === 0, 'git commit');

  // the server; delay_ms makes the model stream slowly enough to watch
  const url = 'http://127.0.0.1:' + llmPort + '/script=ui/delay_ms=15/v1';
  const { serve, data, token, base } = await startServe (['--llm', 'responses', '--model', 'test-model',
                                                        '--llm-url', url]);
  log ('serve on', base);

  const browser = await chromium.launch ({ executablePath: CHROMIUM, headless: true,
                                           args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const context = await browser.newContext ({ viewport: { width: 1440, height: 900 } });
    const problems = [];
    const watch = (page, name) => {
      page.on ('pageerror', (e) => problems.push (name + ': page error: ' + e.message));
      page.on ('console', (m) => {
        if (m.type () === 'error')
          problems.push (name + ': console error: ' + m.text ());
      });
    };
    const page = await context.newPage ();
    watch (page, 'tab 1');

    // 1. open the UI with the token: the token leaves the address bar
    await page.goto (base + '/?token=' + token);
    check (!page.url ().includes ('token='), 'the token is still in the URL: ' + page.url ());
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });

    // the Markdown renderer keeps hostile model text as text
    const md = await page.evaluate (async () => {
      const { renderMarkdown } = await import ('./markdown.js');
      const inputs = [
        '<script>window.pwned=1</script>', '<img src=x onerror="window.pwned=1">', '[a](javascript:window.pwned=1)',
        '[a](JAVASCRIPT:x)', '[a]( javascript:x)', '![i](x.png)', '<a href="javascript:x">a</a>', 'javascript:alert(1)',
        '```html\n<b onclick="x">b</b>\n```', '**<i>x</i>**', '| <b>h</b> |\n|---|\n| <svg onload=x> |',
        '[ok](https://example.com/a_(b)) and https://example.com/x?y=1', '> <iframe src=x>', '- [x] <u>t</u>',
        '<!-- c --> &lt;amp&gt; &amp;', 'a\\<b>c',
      ];
      const allowed = new Set (['P', 'BR', 'CODE', 'PRE', 'STRONG', 'EM', 'DEL', 'A', 'UL', 'OL', 'LI', 'BLOCKQUOTE',
        'H3', 'H4', 'H5', 'H6', 'HR', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'DIV', 'SPAN', 'BUTTON', 'INPUT']);
      const bad = [];
      const div = document.createElement ('div');
      for (const text of inputs) {
        div.replaceChildren (renderMarkdown (text));
        for (const n of div.querySelectorAll ('*')) {
          if (!allowed.has (n.tagName))
            bad.push (text + ' -> <' + n.tagName + '>');
          for (const a of n.attributes)
            if (/^on/i.test (a.name) || (a.name === 'href' && !/^(https?:|mailto:)/i.test (a.value)) || a.name === 'src')
              bad.push (text + ' -> ' + n.tagName + ' ' + a.name + '=' + a.value);
        }
      }
      div.replaceChildren (renderMarkdown ('[ok](https://example.com/a_(b))'));
      return { bad, link: div.querySelector ('a') && div.querySelector ('a').href, pwned: !!window.pwned };
    });
    check (!md.bad.length && !md.pwned, 'the Markdown renderer made markup of model text:\n' + md.bad.join ('\n'));
    check (md.link === 'https://example.com/a_(b)', 'a link lost its target: ' + md.link);

    // 2. a session on the repository, policy auto
    await page.click ('#new-session-btn');
    await page.fill ('#new-form input[name=workspace]', repo);
    await page.fill ('#new-form input[name=title]', 'Browser test');
    await page.selectOption ('#new-form select[name=approval_policy]', 'auto');
    await page.click ('#new-create');
    await page.waitForSelector ('#transcript .quiet >> text=Session created', { timeout: STEP_MS });
    const sid = await page.evaluate (() => window.sbApp.current);
    check (/^[0-9A-Z]{26}$/.test (sid), 'no session id: ' + sid);
    await page.waitForSelector (`#sessions [data-session="${sid}"][aria-selected=true]`);
    check ((await page.textContent (`#sessions [data-session="${sid}"]`)).includes ('Browser test'),
      'the sidebar does not list the new session');
    await shot (page, '01-session-list');

    // the sandbox: serve has one (no warning), and the session's network
    // is off until the header's switch turns it on (docs/sandbox.md)
    check (await page.isHidden ('#sandbox-warning'), 'the no-sandbox warning shows under a sandbox');
    check ((await page.inputValue ('#head-network')) === 'off', 'a new session\'s network is not off');
    await page.selectOption ('#head-network', 'on');
    await waitFor ('the session\'s network to be on', async () =>
      page.evaluate (() => window.sbApp.session && window.sbApp.session.network === true), STEP_MS);
    await page.selectOption ('#head-network', 'off');
    await waitFor ('the session\'s network to be off again', async () =>
      page.evaluate (() => window.sbApp.session && !window.sbApp.session.network), STEP_MS);
    // what a serve --sandbox none answers to exec.info (test_sandbox.py checks
    // the answer): a standing warning, gone once a sandbox is reported
    await page.evaluate (() => window.sbApp._sandbox ('none'));
    check ((await page.innerText ('#sandbox-warning')).includes ('without a sandbox'),
      'no warning for --sandbox none');
    await shot (page, '01b-no-sandbox-warning');
    await page.evaluate (() => window.sbApp._sandbox ('bwrap'));
    check (await page.isHidden ('#sandbox-warning'), 'the no-sandbox warning stays under a sandbox');

    // 3. the goal, sent with Enter
    await page.fill ('#composer-input', 'Look around, then write notes.md');
    await page.press ('#composer-input', 'Enter');

    // 4. text streams in: the block grows while it is marked streaming
    const lengths = new Set ();
    await waitFor ('the first answer to stream in', async () => {
      const n = await page.evaluate (() => {
        const b = document.querySelector ('#transcript .assistant.streaming');
        return b ? b.innerText.length : -1;
      });
      if (n > 0 && n < INTRO.length)
        lengths.add (n);
      return lengths.size >= 2;
    }, STEP_MS, 10);
    log ('saw the text at', [...lengths].join (', '), 'characters while streaming');
    await shot (page, '02-streaming');
    await page.waitForSelector ('#transcript .tool[data-tool=shell]', { timeout: STEP_MS });
    const introShown = await page.innerText ('#transcript .assistant');
    check (introShown.trim () === INTRO, 'the streamed text differs from the model\'s: ' + introShown);

    // 5. approve the shell call from its card
    const card1 = await page.waitForSelector ('#transcript .approval.pending', { timeout: STEP_MS });
    check ((await card1.innerText ()).includes ('echo hello-from-shell'), 'the approval card does not show the command');
    await shot (page, '03-approval-card');
    await card1.$eval ('textarea.feedback', (t) => { t.value = 'fine'; });
    await (await card1.$ ('button.approve')).click ();
    await page.waitForSelector ('#transcript .approval.approved >> text=browser', { timeout: STEP_MS });
    await page.waitForSelector ('#transcript .tool.ok[data-tool=shell]', { timeout: STEP_MS });
    check ((await page.innerText ('#transcript .tool[data-tool=shell] pre.output')).includes ('hello-from-shell'),
      'the shell card does not show the command\'s output');

    // a dropped socket mid-run reconnects from the last seq by itself
    await page.evaluate (() => window.sbApp.conn.drop ());
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });

    // 6. the write_file waits for approval: reload mid-run
    const card2 = await page.waitForSelector ('#transcript .approval.pending[data-call=call_write]', { timeout: STEP_MS });
    const ia2 = await card2.getAttribute ('data-interaction');
    check ((await card2.innerText ()).includes ('written by the agent'), 'the write_file approval shows no diff');

    // while the run works, Enter queues (shown, removable) and Steer steers
    check ((await page.textContent ('#send-btn')).trim () === 'Queue', 'the composer does not offer to queue');
    await page.fill ('#composer-input', 'Also list the files');
    await page.press ('#composer-input', 'Enter');
    await page.waitForSelector ('#queue-strip li >> text=Also list the files', { timeout: STEP_MS });
    await page.waitForSelector ('#transcript .user.queued >> text=Also list the files', { timeout: STEP_MS });
    await shot (page, '03b-queued');
    await page.click ('#queue-strip li button');
    await page.waitForSelector ('#transcript .user.queued.removed >> text=Also list the files', { timeout: STEP_MS });
    await page.waitForSelector ('#queue-strip', { state: 'hidden', timeout: STEP_MS });
    // no frame is drawn while the steer arrives (a busy or hidden tab): what
    // the page says of its tape must still agree with the entries shown
    await page.evaluate (() => {
      window.sbHeldRaf = window.requestAnimationFrame;
      window.requestAnimationFrame = () => 0;
    });
    await page.fill ('#composer-input', 'Keep the notes short');
    await page.click ('#steer-btn');
    await page.waitForSelector ('#transcript .user.queued.steer-wait >> text=Keep the notes short', { timeout: STEP_MS });

    const before = await snapshot (page);
    await page.evaluate (() => { window.requestAnimationFrame = window.sbHeldRaf; });
    const shown = await page.$eval ('#transcript .user.queued.steer-wait', (n) => Number (n.dataset.seq));
    check (before.lastSeq >= shown, 'the page shows entry ' + shown + ' but says its tape ends at ' + before.lastSeq);
    checkExact (before, 'before the reload');
    await page.reload ();
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
    await waitFor ('the replay to reach seq ' + before.lastSeq, async () =>
      (await snapshot (page)).lastSeq >= before.lastSeq);
    const after = await snapshot (page);
    checkExact (after, 'after the reload');
    if (after.lastSeq !== before.lastSeq) {
      const moved = (await tape (data, sid)).filter (e => e.seq > before.lastSeq - 3);
      check (false, 'the tape moved while the run waited: ' + before.lastSeq + ' -> ' + after.lastSeq + '; its last entries:\n'
        + moved.map (e => JSON.stringify (e)).join ('\n'));
    }
    check (after.text === before.text, 'the transcript differs after the reload:\n--- before\n' + before.text
      + '\n--- after\n' + after.text);
    check (JSON.stringify (after.seqs) === JSON.stringify (before.seqs), 'the blocks after the reload stand for other entries');
    log ('reload: identical transcript, seq 1..' + after.lastSeq + ' each once');

    // 7. resolve that approval from the CLI: the card says who
    const r = await run ([SB_BIN, 'resolve', ia2, '--approve', '--data', data]);
    check (r.code === 0, 'switchboard resolve failed (' + r.code + '): ' + r.stderr + r.stdout);
    const resolved = await page.waitForSelector (`#transcript .approval.approved[data-interaction="${ia2}"]`,
      { timeout: STEP_MS });
    const who = await resolved.$eval ('.who', (n) => n.textContent);
    check (who.startsWith ('cli:'), 'the card does not say the CLI resolved it: ' + who);
    // the run takes the steer at its next step boundary
    await page.waitForSelector ('#transcript .run .user.steer >> text=Keep the notes short', { timeout: STEP_MS });
    check (!(await page.$ ('#transcript .user.queued.steer-wait')), 'the steer still shows as waiting');

    // the final answer, rendered as Markdown, hostile text kept as text
    await page.waitForSelector ('#transcript .run-end.st-completed', { timeout: STEP_MS });
    await page.waitForSelector ('#transcript .assistant >> text=hello-from-shell', { timeout: STEP_MS });
    const final = await page.$$eval ('#transcript .assistant', (n) => n [n.length - 1].innerText);
    check (final.includes ('<img src=x onerror="window.pwned=1">'), 'the hostile markup is not shown as text');
    check (await page.evaluate (() => !window.pwned && !document.querySelector ('#transcript img, #transcript a[href^=javascript]')),
      'model text became markup');
    check (await page.$ ('#transcript .assistant .code button.copy'), 'the code block has no copy button');
    // the write_file's step left a checkpoint: one quiet line naming the file
    const ckpt = await page.waitForSelector ('#transcript .quiet >> text=checkpoint · 1 file', { timeout: STEP_MS });
    check ((await ckpt.innerText ()).includes ('notes.md'), 'the checkpoint line does not name notes.md: '
      + await ckpt.innerText ());
    // the view followed the run to its end; scrolled up, it offers the way back
    const gap = () => page.evaluate (() => {
      const s = document.getElementById ('scroll');
      return s.scrollHeight - s.scrollTop - s.clientHeight;
    });
    await waitFor ('the transcript to stick to its bottom', async () => (await gap ()) < 48, 5000);
    check (await page.isHidden ('#jump'), '"Jump to live" shows at the bottom');
    await page.mouse.move (600, 300);
    await page.mouse.wheel (0, -600);
    await page.waitForSelector ('#jump', { state: 'visible', timeout: 5000 });
    await page.click ('#jump');
    await waitFor ('"Jump to live" to go back to the bottom', async () => (await gap ()) < 48, 5000);
    check (await page.isHidden ('#jump'), '"Jump to live" still shows after jumping');
    const usage = await page.innerText ('#head-usage');
    check (usage.includes ('4.4k in') && usage.includes ('3 steps'), 'the header does not show the usage: ' + usage);
    // the server's totals: the model has no price, so the cost is unknown, and
    // the run's tokens are the session's (one run)
    await waitFor ('the header to show the totals', async () =>
      (await page.innerText ('#head-usage')).includes ('cost unknown · run 4.4k in · 230 out'), 5000);

    // 8. the changes panel shows the diff of the file the agent wrote
    await page.click ('#tab-changes');
    // (the panel may refresh meanwhile: always the current element, opened if closed)
    await page.waitForSelector ('#pane-changes .file[data-path="notes.md"]', { timeout: STEP_MS });
    await page.evaluate (() => {
      const d = document.querySelector ('#pane-changes .file[data-path="notes.md"]');
      if (!d.open)
        d.querySelector ('summary').click ();
    });
    await page.waitForSelector ('#pane-changes .file[data-path="notes.md"] .dl.add >> text=written by the agent',
      { timeout: STEP_MS });
    await shot (page, '04-changes-panel');
    // one stated baseline, which the person switches (and back)
    const stated = async () => {
      try {
        return await page.innerText ('#pane-changes .changes-base', { timeout: STEP_MS });
      } catch (e) {
        throw new Error ('the changes panel states no baseline; it shows: '
          + JSON.stringify (await page.innerText ('#pane-changes')));
      }
    };
    check ((await stated ()).includes ('Since the session\'s first run'), 'the panel does not state its baseline: '
      + await stated ());
    await page.click ('#pane-changes .changes-base button');
    await waitFor ('the panel to compare with git HEAD', async () => (await stated ()).includes ('Against git HEAD'),
      STEP_MS);
    await page.waitForSelector ('#pane-changes .file[data-path="notes.md"]', { timeout: STEP_MS });
    await page.click ('#pane-changes .changes-base button');
    await waitFor ('the panel to compare with the session\'s first run again',
      async () => (await stated ()).includes ('Since the session\'s first run'), STEP_MS);

    // the finished tape: this page and a fresh tab show the same transcript,
    // and it holds every entry of the tape once
    const done = await snapshot (page);
    checkExact (done, 'after the run');
    const entries = await tape (data, sid);
    check (done.lastSeq === entries.length && entries [entries.length - 1].seq === entries.length,
      'the page ends at seq ' + done.lastSeq + ', the tape has ' + entries.length + ' entries');
    const calls = entries.filter (e => e.kind === 'tool.call').map (e => e.body.call_id);
    check (JSON.stringify (done.tools) === JSON.stringify (calls), 'tool cards ' + done.tools + ' vs calls ' + calls);
    const page2 = await context.newPage ();
    watch (page2, 'tab 2');
    await page2.goto (base + '/#s=' + sid);
    await page2.waitForSelector ('#transcript .run-end.st-completed', { timeout: STEP_MS });
    await waitFor ('tab 2 to replay the whole tape', async () => (await snapshot (page2)).lastSeq === done.lastSeq);
    const fresh = await snapshot (page2);
    check (fresh.text === done.text, 'a fresh tab shows another transcript:\n--- live\n' + done.text + '\n--- fresh\n'
      + fresh.text);
    await page2.close ();

    // the approvals inbox has nothing pending and lists both answers
    await page.click ('#tab-approvals');
    await page.waitForSelector ('#pane-approvals .recent li >> text=cli:', { timeout: STEP_MS });
    check (!(await page.$ ('#pane-approvals .inbox-item')), 'the inbox still lists a pending approval');

    // the Bus tab shows the tap live, opens a line to its JSON, and filters
    await page.click ('#tab-bus');
    await page.evaluate (() => window.sbApp.conn.call ('session.list', { limit: 2 }));
    await page.waitForSelector ('#pane-bus .bus-line[data-type="session.list"]', { timeout: STEP_MS });
    await page.click ('#pane-bus .bus-line[data-type="session.list"] summary');
    await page.waitForFunction (() => [...document.querySelectorAll ('#pane-bus pre.bus-json')]
      .some (p => p.textContent.includes ('"limit": 2')), null, { timeout: STEP_MS });
    await page.fill ('#pane-bus .bus-filter', 'session.get');
    // the server's `tapping` answer for the new filter: every line after it is the filter's
    await page.waitForSelector ('#pane-bus .bus-status[data-tapping="session.get"]', { timeout: STEP_MS });
    await page.click ('#pane-bus button >> text=Clear');
    await page.evaluate (() => window.sbApp.conn.call ('session.list', { limit: 3 }));
    await page.evaluate ((sid) => window.sbApp.conn.call ('session.get', { session_id: sid }), sid);
    await page.waitForSelector ('#pane-bus .bus-line[data-type="session.get.ok"]', { timeout: STEP_MS });
    const busTypes = await page.$$eval ('#pane-bus .bus-line', ns => ns.map (n => n.dataset.type));
    check (busTypes.every (t => t.startsWith ('session.get')), 'the bus filter let through ' + busTypes);
    await shot (page, '04b-bus');
    await page.click ('#tab-approvals');

    // narrow: the panel folds away and the sidebar becomes a drawer
    await page.setViewportSize ({ width: 420, height: 860 });
    await page.waitForFunction (() => document.getElementById ('sidebar').getBoundingClientRect ().right <= 0);
    check (await page.isVisible ('#menu'), 'no menu button in a narrow window');
    await shot (page, '05-narrow');
    await page.click ('#menu');
    await page.waitForFunction (() => document.getElementById ('sidebar').getBoundingClientRect ().left >= 0);
    await shot (page, '06-narrow-drawer');
    await page.keyboard.press ('Escape');
    await page.emulateMedia ({ colorScheme: 'dark' });
    await page.setViewportSize ({ width: 1440, height: 900 });
    await page.click ('#tab-changes');
    await shot (page, '07-dark');

    check (!problems.length, 'the page reported errors:\n' + problems.join ('\n'));
    await context.close ();
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
}

await runTest (main);
