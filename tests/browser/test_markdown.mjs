// tests/browser/test_markdown.mjs — gateway/ui/markdown.js against hostile
// model text, in real Chromium. tests/integration/test_markdown.sh runs it.
//
// The renderer builds DOM nodes from text a model wrote, so it is where a
// prompt injection would become script in the operator's browser. Each
// input below (script tags, event handlers, javascript: and data: links,
// raw HTML, entity tricks, nested emphasis, brackets and quotes) is
// rendered into the page, and then:
//   - every element is one the renderer is meant to make (no script,
//     iframe, img, svg, style, form, object, ...);
//   - every attribute is one it is meant to set (no on*, style, src,
//     srcdoc, formaction, ...), and every link's href is http(s) or mailto,
//     as the browser itself parses it;
//   - the hostile markup shows as text (the "<script>" is still there to
//     read), and nothing it carried ran: a sentinel every payload would
//     set stays unset, after an image error of our own has been delivered
//     (so error handlers had their chance);
//   - 1 MB of each hostile shape, and of ordinary Markdown, renders within
//     BOUND_MS (the time of each is printed): a model can write that much,
//     and a renderer that is quadratic on some shape freezes the UI.
// The page is served from gateway/ui by a loopback HTTP server of this
// test; no switchboard process is needed.

import http from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { ROOT, CHROMIUM, log, check, fail } from './lib.mjs';

const UI = path.join (ROOT, 'gateway', 'ui');
const MB = 1 << 20;
const BOUND_MS = 5000;   // linear rendering of 1 MB takes a fraction of this, even on a loaded machine
const GIVE_UP_MS = 2 * BOUND_MS;   // a shape still rendering then is stopped (its browser closed)

// What markdown.js may make, and the attributes it may set on each.
const ELEMENTS = new Set (['P', 'BR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'HR', 'BLOCKQUOTE', 'UL', 'OL', 'LI',
                           'INPUT', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'DIV', 'SPAN', 'BUTTON',
                           'PRE', 'CODE', 'STRONG', 'EM', 'DEL', 'A']);
const ATTRIBUTES = new Set (['class', 'start', 'type', 'disabled', 'checked', 'aria-label', 'href', 'target', 'rel']);

// Each payload that could run sets window.__pwned to its own name.
const P = (name) => `window.__pwned='${name}'`;
const HOSTILE = {
  script: `<script>${P ('script')}</script>`,
  script_split: `<scr<script>ipt>${P ('split')}</script>`,
  img_onerror: `<img src=x onerror="${P ('img')}">`,
  svg_onload: `<svg onload="${P ('svg')}"><circle r=1></svg>`,
  iframe: `<iframe src="javascript:${P ('iframe')}"></iframe> <iframe srcdoc="<script>${P ('srcdoc')}</script>">`,
  raw_anchor: `<a href="javascript:${P ('raw_a')}">click</a>`,
  style: `<style>body{background:url("javascript:${P ('style')}")}</style>`,
  form: `<form><button formaction="javascript:${P ('form')}">go</button></form>`,
  object: `<object data="javascript:${P ('object')}"></object><embed src="javascript:${P ('embed')}">`,
  meta: `<meta http-equiv="refresh" content="0;url=javascript:${P ('meta')}">`,
  comment: `<!-- --><script>${P ('comment')}</script><!-- -->`,
  js_link: `[click](javascript:${P ('js_link')})`,
  js_link_case: `[click](JaVaScRiPt:${P ('js_case')})`,
  js_link_space: `[click]( javascript:${P ('js_space')})`,
  js_link_angle: `[click](<javascript:${P ('js_angle')}>)`,
  js_link_entity: `[click](&#106;avascript:${P ('js_entity')})`,
  js_link_tab: '[click](java\tscript:alert(1))',
  js_link_nested: `[[inner](https://ok.example/)](javascript:${P ('js_nested')})`,
  js_link_title: `[click](javascript:${P ('js_title')} "title")`,
  vbscript: '[click](vbscript:msgbox(1))',
  data_html: '[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)',
  data_svg: `[click](data:image/svg+xml,<svg onload="${P ('data_svg')}">)`,
  data_image: '![pic](data:image/png;base64,iVBORw0KGgo=)',
  file_link: '[click](file:///etc/passwd)',
  protocol_relative: '[click](//evil.example/x)',
  quote_break: `[click](https://ok.example/"onclick="${P ('quote_break')})`,
  autolink_quote: `see https://ok.example/"onmouseover="${P ('autolink')}" now`,
  autolink_js: `javascript:${P ('bare_js')} and data:text/html,<script>${P ('bare_data')}</script>`,
  heading: `### <img src=x onerror="${P ('heading')}">`,
  table: `| a | <img src=x onerror="${P ('table')}"> |\n|---|---|\n| <script>${P ('cell')}</script> | x |`,
  task: `- [x] <img src=x onerror="${P ('task')}">\n- [ ] [t](javascript:${P ('task_link')})`,
  fence_lang: '```"><img src=x onerror="' + P ('fence') + '">\n<script>' + P ('fence_body') + '</script>\n```',
  inline_code: '`<script>' + P ('code') + '</script>`',
  emphasis: `**<img src=x onerror="${P ('strong')}">** _<svg onload="${P ('em')}">_ ~~<script>x</script>~~`,
  quote: `> <script>${P ('quote')}</script>\n> > [x](javascript:${P ('quote_link')})`,
  escapes: `\\<script>${P ('escape')}\\</script> \\[x\\](javascript:${P ('escape_link')})`,
  nul_and_controls: `\u0000<script>\u0001${P ('controls')}</script>\u202e[x](java\u0000script:alert(1))`,
};

// 1 MB of each shape that could make a renderer slow, and ordinary text.
function huge () {
  const fill = (unit) => unit.repeat (Math.ceil (MB / unit.length)).slice (0, MB);
  return {
    plain: fill ('the quick brown fox jumps over the lazy dog. '),
    markdown: fill ('# Title\n\nSome *em* and **strong** and `code` and [a link](https://x.example/).\n\n' +
                    '- item one\n- item two\n  - nested\n\n> a quote\n\n```js\nlet x = 1;\n```\n\n' +
                    '| a | b |\n|---|---|\n| 1 | 2 |\n\n'),
    stars: fill ('*'),
    star_words: fill ('*a '),
    strong_words: fill ('**a '),
    underscores: fill ('_a '),
    tildes: fill ('~~a '),
    nested_emphasis: fill ('*a **b ***c _d __e ~~f '),
    open_brackets: fill ('['),
    bracket_words: fill ('[a '),
    link_openers: fill ('[a]('),
    backticks: fill ('`'),
    backtick_words: fill ('`a ``b '),
    escapes: fill ('\\'),
    html: fill ('<img src=x onerror=alert(1)><script>alert(1)</script>'),
    quotes_nested: fill ('>'),
    quote_lines: fill ('> > > > > > > > > > a\n'),
    list_nesting: Array.from ({ length: 1000 }, (_, k) => ' '.repeat (k) + '- item').join ('\n'),
    list_lines: fill ('- a\n'),
    table_rows: '| a | b |\n|---|---|\n' + fill ('| x | y |\n'),
    long_url: 'https://x.example/' + fill ('a'),
    fences: fill ('```\n'),
    headings: fill ('# '),
    newlines: fill ('\n'),
  };
}

// A loopback server for gateway/ui and an empty page to render into.
function serveUi () {
  const types = { '.js': 'text/javascript', '.html': 'text/html', '.css': 'text/css', '.svg': 'image/svg+xml' };
  const server = http.createServer ((req, res) => {
    const name = decodeURIComponent (new URL (req.url, 'http://x').pathname).replace (/^\/+/, '');
    if (name === '' || name === 'blank.html') {
      res.writeHead (200, { 'Content-Type': 'text/html' });
      return res.end ('<!doctype html><meta charset="utf-8"><title>markdown</title><div id="out"></div>');
    }
    const file = path.join (UI, path.basename (name));
    if (!/^[\w.-]+$/.test (name) || !existsSync (file)) {
      res.writeHead (404);
      return res.end ();
    }
    res.writeHead (200, { 'Content-Type': types [path.extname (file)] || 'application/octet-stream' });
    res.end (readFileSync (file));
  });
  return new Promise ((resolve) => server.listen (0, '127.0.0.1', () => resolve (server)));
}

// Renders each input in the page; returns, per name, the problems its DOM
// has, its text and the milliseconds it took.
async function render (page, inputs) {
  return page.evaluate (async ({ inputs, elements, attributes }) => {
    const { renderMarkdown } = await import ('/markdown.js');
    const allowed = new Set (elements);
    const attrs = new Set (attributes);
    const out = document.getElementById ('out');
    const results = {};
    for (const [name, text] of Object.entries (inputs)) {
      const t0 = performance.now ();
      let frag, error = null;
      try {
        frag = renderMarkdown (text);
      } catch (e) {
        error = String (e);
      }
      const ms = performance.now () - t0;
      const problems = [];
      if (error)
        problems.push ('threw ' + error);
      const box = document.createElement ('section');
      if (frag)
        box.appendChild (frag);
      out.appendChild (box);
      for (const node of box.querySelectorAll ('*')) {
        if (!allowed.has (node.tagName) || node.namespaceURI !== 'http://www.w3.org/1999/xhtml')
          problems.push ('element ' + node.tagName);
        for (const a of node.attributes) {
          if (!attrs.has (a.name) || /^on/i.test (a.name))
            problems.push ('attribute ' + a.name + ' on ' + node.tagName);
        }
        if (node.tagName === 'A' && !['http:', 'https:', 'mailto:'].includes (node.protocol))
          problems.push ('link to ' + node.protocol + ' ' + node.getAttribute ('href').slice (0, 80));
        if (node.tagName === 'INPUT' && (node.type !== 'checkbox' || !node.disabled))
          problems.push ('input of type ' + node.type + (node.disabled ? '' : ', enabled'));
        if (node.tagName === 'BUTTON' && node.type !== 'button')
          problems.push ('button of type ' + node.type);
      }
      results [name] = { problems: problems.slice (0, 5), text: box.textContent.slice (0, 2000), ms };
      box.remove ();
    }
    return results;
  }, { inputs, elements: [...ELEMENTS], attributes: [...ATTRIBUTES] });
}

// The hostile inputs, rendered and left in the page; an image error of our
// own is delivered before the sentinel is read.
async function hostile (page, failures) {
  const results = await render (page, HOSTILE);
  for (const [name, r] of Object.entries (results)) {
    for (const p of r.problems)
      failures.push (name + ': ' + p);
    log (name.padEnd (18), r.problems.length ? 'UNSAFE ' + r.problems.join ('; ') : 'safe',
         '|', JSON.stringify (r.text.slice (0, 70)));
  }
  const text = (name) => results [name].text;
  check (text ('script').includes ('<script>') && text ('img_onerror').includes ('onerror'),
         'the hostile markup does not show as text: ' + JSON.stringify (text ('script')));
  check (text ('js_link').includes ('click'), 'an unsafe link lost its text: ' + JSON.stringify (text ('js_link')));
  // everything again, left in the document this time, then a control error
  await page.evaluate (async (inputs) => {
    const { renderMarkdown } = await import ('/markdown.js');
    for (const text of Object.values (inputs))
      document.getElementById ('out').appendChild (renderMarkdown (text));
    await new Promise ((resolve) => {
      const img = document.createElement ('img');
      img.onerror = resolve;
      img.src = '/no-such-image.png';
      document.body.appendChild (img);
    });
    await new Promise (requestAnimationFrame);
  }, HOSTILE);
  const pwned = await page.evaluate (() => window.__pwned);
  if (pwned !== undefined)
    failures.push ('a payload ran: window.__pwned = ' + JSON.stringify (pwned));
  // a safe link is still a link
  const links = await page.evaluate (async () => {
    const { renderMarkdown } = await import ('/markdown.js');
    const f = renderMarkdown ('[ok](https://ok.example/) and mailto [m](mailto:a@b.example)');
    return [...f.querySelectorAll ('a')].map (a => a.href);
  });
  check (links.length === 2 && links [0] === 'https://ok.example/' && links [1] === 'mailto:a@b.example',
         'safe links are not rendered as links: ' + JSON.stringify (links));
}

// 1 MB of each shape, one page each. A shape still rendering after
// GIVE_UP_MS has its browser closed (a frozen renderer would go on using a
// core) and the next shapes get a new one.
async function large (launch, base, failures) {
  let browser = await launch ();
  try {
    for (const [name, text] of Object.entries (huge ())) {
      const page = await browser.newPage ();
      await page.goto (base + '/blank.html');
      let timer;
      const deadline = new Promise ((resolve) => {
        timer = setTimeout (() => resolve (null), GIVE_UP_MS);
      });
      const r = await Promise.race ([render (page, { [name]: text }).then ((x) => x [name], () => null), deadline]);
      clearTimeout (timer);
      if (!r) {
        failures.push (`${name}: ${text.length} bytes did not render within ${GIVE_UP_MS} ms`);
        log (name.padEnd (18), `> ${GIVE_UP_MS} ms, stopped`);
        await browser.close ();
        browser = await launch ();
        continue;
      }
      log (name.padEnd (18), `${(text.length / MB).toFixed (2)} MB in ${r.ms.toFixed (0)} ms`,
           r.problems.length ? r.problems.join ('; ') : '');
      for (const p of r.problems)
        failures.push (name + ': ' + p);
      if (r.ms > BOUND_MS)
        failures.push (`${name}: ${text.length} bytes took ${r.ms.toFixed (0)} ms (bound ${BOUND_MS} ms)`);
      await page.close ();
    }
  } finally {
    await browser.close ();
  }
}

async function main () {
  check (existsSync (path.join (UI, 'markdown.js')), 'no ' + path.join (UI, 'markdown.js'));
  const server = await serveUi ();
  const base = 'http://127.0.0.1:' + server.address ().port;
  const launch = () => chromium.launch ({ executablePath: CHROMIUM, headless: true,
                                          args: ['--no-sandbox', '--disable-gpu'] });
  const failures = [];
  try {
    const browser = await launch ();
    try {
      const page = await browser.newPage ();
      const errors = [];
      page.on ('pageerror', (e) => errors.push (String (e)));
      await page.goto (base + '/blank.html');
      await hostile (page, failures);
      check (!errors.length, 'the page raised: ' + errors.join ('; '));
    } finally {
      await browser.close ();
    }
    await large (launch, base, failures);
  } finally {
    server.close ();
  }
  if (failures.length)
    fail (failures.length + ' failures:\n  ' + failures.join ('\n  '));
}

// lib.mjs's runner wants a binary; this test needs none, so it runs its own.
main ().then (() => {
  log ('PASS');
  console.log ('1 passed, 0 failed');
  process.exit (0);
}, (e) => {
  console.error ('[browser] FAIL:', e.message);
  console.log ('0 passed, 1 failed');
  process.exit (1);
});
