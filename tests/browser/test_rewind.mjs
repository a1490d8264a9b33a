// tests/browser/test_rewind.mjs — rewind, undo, fork and the diff between
// two checkpoints in the browser (issue 24), in real Chromium against the
// real server. tests/integration/test_browser_rewind.sh runs it.
//
// A scripted model makes a.txt in a first run, then edits it and makes
// b.txt with the shell (which sleeps, so the run stays active a while) in
// a second one. Then, as a person would:
//   - every user message and every run's end offers "Rewind to here" and
//     "Fork from here"; while the second run works they are disabled, with
//     the reason shown when pressed;
//   - "Rewind to here" on the second message asks first (what it puts
//     back, the calls it cannot undo), then the result card says 1 file
//     restored, 1 removed, and names the edit_file and shell calls as
//     effects not undone; a.txt is "one" again on disk and b.txt gone; the
//     stretch of the second run is folded and greyed, and opens;
//   - Undo (one click) puts both files back on disk;
//   - the Changes panel compares the first checkpoint with the last: a.txt
//     and b.txt, with their diffs, as `switchboard checkpoints --diff`
//     gives them;
//   - a rewind of the work tree only to the first run's end (no fold: the
//     conversation goes on), then a prompt: the undo is gone;
//   - a reload renders the same cards and folds;
//   - "Fork from here" on the first run's end, into a new folder, opens
//     the new session, whose work tree is the first run's, which says
//     where it came from and links back to the source at that seq.
//     A cut inside a tool call is refused, and the banner's nearest valid
//     seq forks.

import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { SB_BIN, STEP_MS, log, check, run, tmp, waitFor, shot, startServe, stopServe, runTest,
         startLlm, gitRepo, launch, openUi } from './lib.mjs';

const TURNS = [
  { tool_calls: [{ name: 'write_file', arguments: { path: 'a.txt', content: 'one\n' }, call_id: 'c_write' }] },
  { text: 'Made a.txt.' },
  { tool_calls: [{ name: 'edit_file', arguments: { path: 'a.txt', old: 'one', new: 'two' }, call_id: 'c_edit' }] },
  { tool_calls: [{ name: 'shell', arguments: { command: 'sleep 3 && echo b > b.txt' }, call_id: 'c_shell' }] },
  { text: 'Changed a.txt and made b.txt.' },
  { text: 'A fresh start.' },
];

async function cli (data, ...args) {
  return run ([SB_BIN, ...args, '--data', data]);
}

function file (repo, p) {
  const f = path.join (repo, p);
  return existsSync (f) ? readFileSync (f, 'utf8') : null;
}

async function main () {
  const { port } = await startLlm ('rw', TURNS, 'rewind_llm');
  const repo = await gitRepo ('sb-rewind-repo-', { 'README.md': '# demo\n' });
  const { serve, data, token, base } = await startServe (['--llm', 'responses', '--model', 'test-model',
    '--llm-url', 'http://127.0.0.1:' + port + '/script=rw/v1'], 'rewind_serve');

  const browser = await launch ();
  try {
    const { page, problems } = await openUi (browser, base, token);

    // a session on the repository, every tool allowed
    await page.click ('#new-session-btn');
    await page.fill ('#new-form input[name=workspace]', repo);
    await page.fill ('#new-form input[name=title]', 'Rewind me');
    await page.selectOption ('#new-form select[name=approval_policy]', 'yolo');
    await page.click ('#new-create');
    await page.waitForSelector ('#transcript .quiet >> text=Session created', { timeout: STEP_MS });
    const sid = await page.evaluate (() => window.sbApp.current);

    const ends = () => page.$$eval ('#transcript .run-end', (ns) => ns.length);
    // sends a prompt; wait: also for its run to end (every run's end
    // line counts, the rewinds' too)
    const send = async (text, wait) => {
      const before = await ends ();
      await page.fill ('#composer-input', text);
      await page.press ('#composer-input', 'Enter');
      if (wait)
        await waitFor ('the run of "' + text + '" to end', async () => (await ends ()) > before
          && page.evaluate (() => !window.sbApp.transcript.activeRun));
    };

    // 1. the first run makes a.txt; its message and its end offer both actions
    await send ('make the file', true);
    check (file (repo, 'a.txt') === 'one\n', 'the first run did not write a.txt');
    const rows = await page.$$eval ('#transcript .entry-actions', (ns) => ns.map (n => ({
      kind: n.dataset.kind, text: n.textContent, inUser: !!n.closest ('.user'), inEnd: !!n.closest ('.run-end') })));
    check (rows.length === 2 && rows [0].kind === 'prompt' && rows [0].inUser && rows [1].kind === 'run' && rows [1].inEnd,
      'the message and the run end do not both have actions: ' + JSON.stringify (rows));
    check (rows.every (r => r.text.includes ('Rewind to here') && r.text.includes ('Fork from here')), JSON.stringify (rows));
    // reachable with the keyboard: a button, focusable, enabled now
    const first = page.locator ('#transcript .user .rewind-here').first ();
    await first.focus ();
    check (await page.evaluate (() => document.activeElement.classList.contains ('rewind-here')
      && document.activeElement.getAttribute ('aria-disabled') === null), 'Rewind to here is not focusable and enabled');

    // 2. the second run: while its shell sleeps, both are disabled with the reason
    await send ('change it', false);
    await page.waitForSelector ('#transcript .tool.running[data-call=c_shell]', { timeout: STEP_MS });
    await page.evaluate (() => window.sbApp.flushUi ());
    const off = await page.$$eval ('#transcript .entry-actions button', (bs) => bs.map (b => [b.getAttribute ('aria-disabled'), b.title]));
    check (off.length >= 5 && off.every (([d, t]) => d === 'true' && /run is active/.test (t)),
      'the actions are not disabled with a reason while the run works: ' + JSON.stringify (off));
    // pressed from the keyboard (a disabled action stays focusable, and says why)
    await first.focus ();
    await page.keyboard.press ('Enter');
    check (!(await page.evaluate (() => !!document.querySelector ('#rewind-dialog[open]'))), 'a disabled rewind opened the dialog');
    const why = await page.locator ('#transcript .user .entry-actions .why').first ().innerText ();
    check (/run is active/.test (why), 'pressing a disabled action does not say why: ' + JSON.stringify (why));
    await waitFor ('the second run to end', async () => (await ends ()) >= 2);
    check (file (repo, 'a.txt') === 'two\n' && file (repo, 'b.txt') === 'b\n', 'the second run did not change the files');
    await shot (page, 'rewind-01-actions');

    // 3. Rewind to here on the second message: asked first, then the result
    const second = page.locator ('#transcript .user .rewind-here').nth (1);
    await waitFor ('the actions to be enabled again', async () => (await second.getAttribute ('aria-disabled')) === null);
    await second.click ();
    await page.waitForSelector ('#rewind-dialog[open]', { timeout: STEP_MS });
    const ask = await page.evaluate (() => ({
      title: document.getElementById ('rewind-title').textContent,
      effects: document.getElementById ('rewind-effects').textContent,
      code: document.getElementById ('rewind-code').checked,
      conv: document.getElementById ('rewind-conversation').checked,
      focus: document.activeElement.id }));
    check (/^Rewind to #\d+\?$/.test (ask.title) && ask.code && ask.conv, 'the confirm step: ' + JSON.stringify (ask));
    check (/2 calls after this point \(edit_file, shell\)/.test (ask.effects), 'the dialog does not name the calls: ' + ask.effects);
    await shot (page, 'rewind-02-confirm');
    check (ask.focus === 'rewind-confirm', 'the confirm step does not focus Rewind: ' + ask.focus);
    await page.keyboard.press ('Enter');         // the Rewind button has the focus
    const card = await page.waitForSelector ('#transcript .rewound-card', { timeout: STEP_MS });
    check (!(await page.evaluate (() => document.getElementById ('rewind-dialog').open)), 'the dialog stayed open');
    const result = await card.evaluate ((c) => ({
      head: c.querySelector ('.rw-head strong').textContent,
      restored: c.querySelector ('.restored-count').textContent, removed: c.querySelector ('.removed-count').textContent,
      effects: [...c.querySelectorAll ('.effects li')].map (li => li.dataset.call),
      say: c.querySelector ('.effects') ? c.querySelector ('.effects').textContent : '',
      undo: !!c.querySelector ('.undo-rewind') }));
    check (result.restored === '1 file restored' && result.removed === '1 file removed', 'counts: ' + JSON.stringify (result));
    check (/^Rewound the work tree and the conversation to #\d+$/.test (result.head), 'the card\'s head: ' + result.head);
    check (JSON.stringify (result.effects) === '["c_edit","c_shell"]'
      && result.say.includes ('These calls had effects outside the workspace that were not undone'),
      'the effects are not shown: ' + JSON.stringify (result));
    check (result.undo, 'no Undo on the result card');
    check (file (repo, 'a.txt') === 'one\n' && file (repo, 'b.txt') === null,
      'the workspace was not rewound: a.txt=' + JSON.stringify (file (repo, 'a.txt')) + ' b.txt=' + JSON.stringify (file (repo, 'b.txt')));

    // the Changes panel follows the work tree put back
    await waitFor ('Changes to show the rewound work tree', () => page.$$eval ('#pane-changes > .files .file',
      (fs) => fs.map (f => f.dataset.path).join () === 'a.txt'));

    // the stretch the rewind took back: folded, greyed once shown
    const fold = await page.waitForSelector ('#transcript .rewind-fold', { timeout: STEP_MS });
    check (!(await page.isVisible ('#transcript .tool[data-call=c_edit]')), 'the rewound tool call is not folded');
    check (await page.isVisible ('#transcript .user >> text=change it'), 'the message rewound to is hidden');
    await (await fold.$ ('.fold-toggle')).click ();
    check (await page.isVisible ('#transcript .tool[data-call=c_shell]'), 'Show does not open the fold');
    check (await page.$eval ('#transcript .tool[data-call=c_shell]', (n) => !!n.closest ('.rewound-away')),
      'the rewound stretch is not greyed');
    await shot (page, 'rewind-03-rewound');
    await page.emulateMedia ({ colorScheme: 'dark' });
    await shot (page, 'rewind-03b-rewound-dark');
    await page.emulateMedia ({ colorScheme: 'light' });

    // 4. Undo: one click, the files are back
    await page.click ('#transcript .undo-rewind');
    await waitFor ('the undo\'s card', async () => (await page.$$ ('#transcript .rewound-card')).length === 2)
      .catch (async (e) => check (false, e.message + '; banners: ' + await page.innerText ('#banners')
        + '; active: ' + await page.evaluate (() => window.sbApp.transcript.activeRun)
        + '; last run end: ' + await page.evaluate (() => [...document.querySelectorAll ('#transcript .run-end')].pop ().textContent)));
    await waitFor ('the undo on disk', () => file (repo, 'a.txt') === 'two\n' && file (repo, 'b.txt') === 'b\n');
    check (await page.$eval ('#transcript .rewind-fold', (f) => f.classList.contains ('undone')), 'the fold is not marked undone');
    check (!(await page.$eval ('#transcript .tool[data-call=c_shell]', (n) => !!n.closest ('.rewound-away'))),
      'the undone stretch is still greyed');

    // 5. the diff between the first and the last checkpoint, in Changes
    const listed = (await cli (data, 'checkpoints', sid, '--json')).stdout.trim ().split ('\n').map (l => JSON.parse (l).checkpoint);
    check (listed.length >= 4, 'checkpoints: ' + listed.length);
    const firstSeq = listed [0].seq_of;
    const shellCk = listed.find (c => (c.changed || []).includes ('b.txt') && !c.first);
    await page.click ('#tab-changes');
    await waitFor ('the checkpoints in the picker', async () =>
      (await page.$$eval ('#ckdiff-from option', (os) => os.map (o => Number (o.value)))).includes (shellCk.seq_of));
    // unpicked, the lists follow the first checkpoint and the newest
    const newest = String (listed [listed.length - 1].seq_of);
    await waitFor ('the picker at the first and the newest checkpoint', () => page.evaluate (([a, b]) =>
      document.getElementById ('ckdiff-from').value === a && document.getElementById ('ckdiff-to').value === b,
    [String (firstSeq), newest]));
    await page.selectOption ('#ckdiff-from', String (firstSeq));
    await page.selectOption ('#ckdiff-to', String (shellCk.seq_of));
    await page.click ('#ckdiff-go');
    await page.waitForSelector ('#ckdiff-result .file[data-path="b.txt"]', { timeout: STEP_MS });
    const shown = await page.$$eval ('#ckdiff-result .file', (fs) => fs.map (f => ({ path: f.dataset.path, text: f.textContent })));
    const cliDiff = await cli (data, 'checkpoints', sid, '--diff', String (firstSeq), String (shellCk.seq_of), '--stat');
    const cliPaths = cliDiff.stdout.trim ().split ('\n').slice (1).map (l => l.split (' ').pop ());
    check (JSON.stringify (shown.map (f => f.path)) === JSON.stringify (cliPaths) && cliPaths.join () === 'a.txt,b.txt',
      'the panel does not show the CLI\'s files: ' + JSON.stringify (shown.map (f => f.path)) + ' vs ' + JSON.stringify (cliPaths));
    check (shown [0].text.includes ('+two') && shown [1].text.includes ('+b'), 'the diffs are not shown: ' + JSON.stringify (shown));
    check ((await page.innerText ('#ckdiff-result .ckdiff-sum')).includes ('#' + firstSeq + ' → #' + shellCk.seq_of),
      'the comparison does not say which checkpoints');
    check (!(await page.isVisible ('#pane-changes .ckdiff-hint')), 'the picker still says there are too few checkpoints');
    await shot (page, 'rewind-04-checkpoint-diff');

    // 6. the work tree only, back to the first run's end: no fold (the
    // conversation goes on); a prompt then ends the undo's time
    await page.click ('#transcript .run-end .rewind-here >> nth=0');
    await page.waitForSelector ('#rewind-dialog[open]', { timeout: STEP_MS });
    await page.uncheck ('#rewind-conversation');
    await page.click ('#rewind-confirm');
    await waitFor ('the third card', async () => (await page.$$ ('#transcript .rewound-card')).length === 3);
    const third = await page.$$eval ('#transcript .rewound-card', (cs) => cs [2].querySelector ('.rw-head strong').textContent);
    check (/^Rewound the work tree to #\d+/.test (third), 'a work-tree-only rewind\'s head: ' + third);
    check ((await page.$$ ('#transcript .rewind-fold')).length === 1, 'a work-tree-only rewind folded the transcript');
    await waitFor ('a.txt back to one, b.txt gone', () => file (repo, 'a.txt') === 'one\n' && file (repo, 'b.txt') === null);
    check (await page.isVisible ('#transcript .rewound-card >> nth=2 >> .undo-rewind'), 'the third card has no Undo');
    await send ('after the rewind', true);
    await page.waitForSelector ('#transcript .user >> text=after the rewind', { timeout: STEP_MS });
    const last = await page.$$eval ('#transcript .rewound-card', (cs) => {
      const c = cs [cs.length - 1];
      return { undo: !!c.querySelector ('.undo-rewind'), why: c.querySelector ('.rw-actions .why').textContent };
    });
    check (!last.undo && /no longer possible/.test (last.why), 'the undo outlived the next prompt: ' + JSON.stringify (last));

    // 7. a reload renders the same cards and folds
    const view = () => page.evaluate (() => {
      window.sbApp.transcript.flush ();
      // what the tape says: the cards and the folds' labels (whether a
      // fold is open is the person's, not the tape's)
      return [...document.querySelectorAll ('#transcript .rewound-card, #transcript .fold-label')]
        .map (n => n.className + ':' + n.textContent).join ('\n');
    });
    const before = await view ();
    await page.reload ();
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
    await waitFor ('the reload to render the cards', async () => (await page.$$ ('#transcript .rewound-card')).length === 3);
    await waitFor ('the same cards and folds after a reload', async () => (await view ()) === before)
      .catch (async () => check (false, 'a reload renders other cards or folds:\n' + before + '\n---\n' + (await view ())));

    // 8. Fork from the first run's end: the new session, and where it came from
    const forkAt = Number (await page.$eval ('#transcript .run-end', (n) => n.dataset.seq));
    const bannersBefore = await page.$$eval ('#banners .banner', (bs) => bs.length);
    await page.click ('#transcript .run-end .fork-here >> nth=0');
    await page.waitForSelector ('#fork-dialog[open]', { timeout: STEP_MS });
    check ((await page.innerText ('#fork-title')) === 'Fork from #' + forkAt + '?', 'the fork dialog\'s title');
    const forkWs = path.join (tmp ('sb-rewind-fork-'), 'tree');  // a new folder: its own work tree
    await page.fill ('#fork-workspace', forkWs);
    await page.click ('#fork-confirm');
    const outcome = await waitFor ('the fork to open or be refused', () => page.evaluate (([sid, n]) => {
      if (window.sbApp.current !== sid)
        return { forked: window.sbApp.current };
      const bs = [...document.querySelectorAll ('#banners .banner')];
      return bs.length > n ? { error: bs [bs.length - 1].textContent } : null;
    }, [sid, bannersBefore]));
    check (outcome.forked, 'the fork failed: ' + outcome.error);
    const fid = outcome.forked;
    const link = await page.waitForSelector ('#transcript .forked-from a', { timeout: STEP_MS });
    const to = await link.evaluate ((a) => ({ session: a.dataset.session, seq: Number (a.dataset.seq), text: a.textContent }));
    check (to.session === sid && to.seq === forkAt, 'the fork does not say where it came from: ' + JSON.stringify (to));
    check (await page.isVisible (`#sessions [data-session="${fid}"]`), 'the fork is not in the sessions list');
    const rec = JSON.parse ((await cli (data, 'sessions', 'show', fid, '--json')).stdout || '{}');
    check (rec.forked_from && rec.forked_from.session_id === sid && rec.forked_from.seq === forkAt,
      'the fork\'s record: ' + JSON.stringify (rec.forked_from));
    // its own work tree, as the first run left it; the source's untouched
    check (rec.workspace === forkWs && file (forkWs, 'a.txt') === 'one\n' && file (forkWs, 'b.txt') === null,
      'the fork\'s work tree: ' + rec.workspace + ' a.txt=' + JSON.stringify (file (forkWs, 'a.txt')));
    check (file (repo, 'a.txt') === 'one\n', 'the fork changed the source\'s work tree');
    await waitFor ('the fork\'s history', async () => (await page.innerText ('#transcript')).includes ('make the file'));
    check (!(await page.innerText ('#transcript')).includes ('change it'), 'the fork holds what came after its seq');
    await shot (page, 'rewind-05-fork');
    await link.click ();
    await waitFor ('the source again', () => page.evaluate ((s) => window.sbApp.current === s, sid));
    await page.waitForSelector ('#transcript .flash', { timeout: STEP_MS });

    // a cut inside a tool call is refused; the banner offers the nearest
    // valid seqs, and one of them forks
    await waitFor ('the source\'s transcript', () => page.$ ('#transcript .tool[data-call=c_edit]'));
    const inside = Number (await page.$eval ('#transcript .tool[data-call=c_edit]', (n) => n.dataset.seq));
    const n = await page.$$eval ('#banners .banner', (bs) => bs.length);
    await page.evaluate ((seq) => window.sbApp.rewinder.fork (seq), inside);
    await page.waitForSelector ('#fork-dialog[open]', { timeout: STEP_MS });
    await page.keyboard.press ('Enter');       // Fork has the focus; no folder: the workspace is shared
    const near = await waitFor ('the refusal with the nearest valid seqs', () => page.evaluate ((n) => {
      const bs = [...document.querySelectorAll ('#banners .banner')];
      return bs.length > n && [...bs [bs.length - 1].querySelectorAll ('.fork-near')].map (b => b.textContent);
    }, n));
    check (near.length >= 1 && near.every (t => /^fork at #\d+$/.test (t)), 'the refusal offers no valid seq: ' + JSON.stringify (near));
    const nearSeq = Number (near [0].slice ('fork at #'.length));
    check (nearSeq !== inside, 'the nearest valid seq is the refused one');
    await page.click ('#banners .banner .fork-near >> nth=0');
    const fid2 = await waitFor ('the second fork to open', () => page.evaluate (([a, b]) =>
      ![a, b].includes (window.sbApp.current) && window.sbApp.current, [sid, fid]));
    const rec2 = JSON.parse ((await cli (data, 'sessions', 'show', fid2, '--json')).stdout || '{}');
    check (rec2.forked_from && rec2.forked_from.seq === nearSeq && rec2.workspace === repo,
      'the fork at the offered seq, sharing the workspace: ' + JSON.stringify (rec2));
    check (!problems.length, problems.join ('\n'));
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
}

runTest (main);
