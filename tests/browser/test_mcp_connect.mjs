// tests/browser/test_mcp_connect.mjs — "Connect" for an MCP server that asks
// for OAuth (docs/mcp.md, "Authorization"), in real Chromium.
// tests/integration/test_browser.sh test_mcp_connect.mjs runs it.
//
// serve is configured with tests/mcp/oauth_server.py (an authorization server
// and a protected MCP server on loopback). In the UI, the sidebar's MCP
// servers list shows `o` with Connect; the click opens a tab on the
// authorization URL, whose server approves at once and sends the tab back to
// the gateway's /oauth/callback; the list then says connected, mcp list says
// authorized, and the page never held a token.

import { writeFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { ROOT, SB_BIN, CHROMIUM, OUT, PY, STEP_MS, log, check, tmp, start, run, waitFor, shot,
         startServe, stopServe, runTest } from './lib.mjs';

async function main () {
  const dir = tmp ('sb-mcp-connect-');
  const portfile = path.join (dir, 'port'), oauthLog = path.join (dir, 'oauth.jsonl');
  const oauth = start ([PY, path.join (ROOT, 'tests', 'mcp', 'oauth_server.py'), '--portfile', portfile,
                        '--log', oauthLog], path.join (OUT, 'mcp_connect_oauth.log'));
  const port = await waitFor ('the OAuth MCP server to listen', () => {
    check (oauth.exitCode === null, 'oauth_server exited: ' + oauth.logText ());
    return existsSync (portfile) && Number (readFileSync (portfile, 'utf8'));
  });
  const cfg = path.join (dir, 'mcp.json');
  writeFileSync (cfg, JSON.stringify ({ mcpServers: { o: { url: 'http://127.0.0.1:' + port + '/mcp' } } }));
  const { serve, data, token, base } = await startServe (['--mcp-config', cfg], 'mcp_connect_serve');

  const browser = await chromium.launch ({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const context = await browser.newContext ({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage ();
    const problems = [];
    page.on ('pageerror', (e) => problems.push ('page error: ' + e.message));
    await page.goto (base + '/?token=' + token);
    await page.waitForSelector ('#conn[data-state=live]', { timeout: STEP_MS });
    const button = page.locator ('.mcp-connect li[data-server=o] button');
    await button.waitFor ({ timeout: STEP_MS });
    check ((await button.textContent ()) === 'Connect', 'the button says ' + await button.textContent ());
    await shot (page, 'mcp_connect_before');

    const [tab] = await Promise.all ([context.waitForEvent ('page'), button.click ()]);
    await tab.waitForURL (base + '/oauth/callback?**', { timeout: STEP_MS });
    const answer = await tab.locator ('body').textContent ();
    check (answer.includes ('connected o: you can close this tab.'), 'the callback answered ' + answer);

    await page.locator ('.mcp-connect li[data-server=o] .mcp-state', { hasText: 'connected' })
      .waitFor ({ timeout: STEP_MS });
    await shot (page, 'mcp_connect_after');
    const list = await run ([SB_BIN, 'mcp', 'list', '--json', '--data', data]);
    check (list.code === 0 && JSON.parse (list.stdout.trim ()).authorized === true, 'mcp list: ' + list.stdout);

    const issued = readFileSync (oauthLog, 'utf8').split ('\n').filter (Boolean).map (JSON.parse)
      .flatMap (r => r.issued || []);
    check (issued.length === 2, 'tokens issued: ' + issued.length);
    const html = await page.content ();
    check (!issued.some (t => html.includes (t)), 'a token reached the page');
    const authz = readFileSync (oauthLog, 'utf8').split ('\n').filter (Boolean).map (JSON.parse)
      .find (r => r.authorize);
    check (authz && authz.authorize.redirect_uri === base + '/oauth/callback',
           'the redirect URI: ' + JSON.stringify (authz));
    check (!problems.length, problems.join ('; '));
    log ('connected through the UI; the tab came back to', base + '/oauth/callback');
  } finally {
    await browser.close ();
    await stopServe (serve);
  }
}

runTest (main);
