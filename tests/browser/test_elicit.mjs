// tests/browser/test_elicit.mjs — an MCP server's elicitation in the browser
// UI (docs/mcp.md, "Elicitation"), in real Chromium.
// tests/integration/test_browser_elicit.sh runs it.
//
// serve is configured with tests/mcp/http_server.py as server `h`; a scripted
// model calls its `elicit` tool, whose server asks for a name (required),
// an age (integer), a score, a boolean and a color (an enum), each with a
// default. The transcript shows a card with a form built from that schema,
// its defaults filled in; an age of 1.5 is refused in the page (an integer)
// and the question stays; the name Grace and the age 40, accepted, reach the
// server with the other defaults, and the card says accept by browser.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, SB_BIN, OUT, PY, STEP_MS, check, tmp, start, stop, run, waitFor, shot, startLlm, startServe,
         stopServe, runTest, launch, openUi } from './lib.mjs';

const TURNS = [{ tool_calls: [{ name: 'mcp__h__elicit', arguments: {}, call_id: 'c1' }] }, { text: 'Thanks.' }];

async function main () {
  const dir = tmp ('sb-browser-elicit-');
  const portfile = path.join (dir, 'port');
  const mcp = start ([PY, path.join (ROOT, 'tests', 'mcp', 'http_server.py'), '--portfile', portfile,
                      '--log', path.join (dir, 'mcp.jsonl')], path.join (OUT, 'elicit_mcp.log'));
  const port = await waitFor ('the HTTP MCP server to listen', () => {
    check (mcp.exitCode === null, 'http_server exited: ' + mcp.logText ());
    return existsSync (portfile) && Number (readFileSync (portfile, 'utf8'));
  });
  const cfg = path.join (dir, 'mcp.json');
  writeFileSync (cfg, JSON.stringify ({ mcpServers: { h: { url: 'http://127.0.0.1:' + port + '/mcp' } } }));
  const { port: llmPort } = await startLlm ('elicit', TURNS, 'llm_server_elicit');
  const url = 'http://127.0.0.1:' + llmPort + '/script=elicit/v1';
  const { serve, data, token, base } = await startServe (['--llm', 'responses', '--model', 'test-model',
                                                        '--llm-url', url, '--mcp-config', cfg], 'serve-elicit');
  const made = await run ([SB_BIN, 'sessions', 'new', '--workspace', tmp ('sb-browser-elicit-ws-'), '--title',
                           'elicit', '--approval', 'yolo', '--json', '--data', data]);
  check (made.code === 0, 'sessions new: ' + made.stderr);
  const sid = JSON.parse (made.stdout).session_id;

  const browser = await launch ();
  try {
    const { page, problems } = await openUi (browser, base, token);
    await page.evaluate ((s) => { location.hash = 's=' + s; }, sid);

    const p = await run ([SB_BIN, 'prompt', sid, 'who am I?', '--data', data]);
    check (p.code === 0, 'prompt: ' + p.stderr);
    const card = await page.waitForSelector ('#transcript .approval.elicitation.pending', { timeout: STEP_MS });
    check ((await card.innerText ()).includes ('who are you?'), 'the card lacks the message: ' + await card.innerText ());
    const q = (name) => '#transcript .approval.elicitation [name=' + name + ']';
    check (await page.inputValue (q ('name')) === 'Ada' && await page.inputValue (q ('age')) === '36'
           && await page.inputValue (q ('color')) === 'green' && await page.isChecked (q ('ok')),
           'the defaults are not in the form');
    await shot (page, '30-elicit-card');

    // not an integer: the page refuses it, the question stays
    await page.fill (q ('name'), 'Grace');
    await page.fill (q ('age'), '1.5');
    await page.click ('#transcript .approval.elicitation button.approve');
    check (await page.$ ('#transcript .approval.elicitation.pending'), 'an age of 1.5 answered the question');

    await page.fill (q ('age'), '40');
    await page.click ('#transcript .approval.elicitation button.approve');
    await page.waitForSelector ('#transcript .approval.elicitation.approved >> text=browser', { timeout: STEP_MS });
    await page.waitForSelector ('#transcript .assistant >> text=Thanks.', { timeout: STEP_MS });
    await shot (page, '31-elicit-accepted');

    const ia = await run ([SB_BIN, 'interactions', '--session', sid, '--json', '--data', data]);
    const rec = JSON.parse (ia.stdout.trim ().split ('\n') [0]);
    const want = { age: 40, color: 'green', name: 'Grace', ok: true, score: 9.5 };
    check (rec.kind === 'elicitation' && rec.action === 'accept' && rec.resolved_by === 'browser'
           && JSON.stringify (JSON.parse (rec.content)) === JSON.stringify (want), 'the record: ' + ia.stdout);
    check (!problems.length, problems.join ('\n'));
  } finally {
    await browser.close ();
  }
  await stopServe (serve);
  await stop (mcp);
}

await runTest (main);
