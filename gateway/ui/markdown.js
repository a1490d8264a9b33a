// markdown.js — a small Markdown renderer that builds DOM nodes.
//
// Model text is untrusted. Nothing here produces an HTML string: every
// piece of text becomes a Text node, and links keep only http(s) and
// mailto targets. So "escape first" holds by construction, and a model
// that writes <script> or <img onerror> shows those characters as text.
//
// Supported: ATX headings, paragraphs (a newline is a line break, as chat
// UIs show it), fenced code blocks (with a copy button; an unterminated
// fence, as while streaming, runs to the end), indented code, block
// quotes, ordered and unordered lists (nested by indentation), task
// boxes, GFM tables, rules; inline code, strong, emphasis,
// strikethrough, links and bare URLs.

import { el, copyText } from './dom.js';

const FENCE = /^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+\s*)?$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*)|$)/;
const TABLE_SEP = /^ *\|?(?: *:?-+:? *\|)+ *(?::?-+:? *)?\|? *$/;
const SAFE_URL = /^(https?:\/\/|mailto:)/i;
// Quotes and lists nest at most this deep; deeper markers stay as text.
// Model text can open a level per character (a line of 1 MB of '>'), and
// each level is a recursive call that copies the rest of its lines.
const MAX_NEST = 32;

export function renderMarkdown (text) {
  const root = document.createDocumentFragment ();
  blocks (String (text ?? '').replace (/\r\n?/g, '\n').split ('\n'), root, 0);
  return root;
}

function blocks (lines, parent, depth) {
  const nests = depth < MAX_NEST;   // at the bound, '>' and '- ' lines are paragraph text
  let i = 0;
  while (i < lines.length) {
    const line = lines [i];
    if (!line.trim ()) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec (line))) {
      const fence = m [2];
      const body = [];
      i++;
      while (i < lines.length && !(lines [i].trim ().startsWith (fence [0].repeat (fence.length))
                                   && /^\s*[`~]+\s*$/.test (lines [i])))
        body.push (lines [i++]);
      i++;
      parent.appendChild (codeBlock (body.join ('\n'), m [3]));
      continue;
    }
    if (/^( {4}|\t)/.test (line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test (lines [i]) || !lines [i].trim ())) {
        body.push (lines [i].replace (/^( {4}|\t)/, ''));
        i++;
      }
      while (body.length && !body [body.length - 1].trim ())
        body.pop ();
      parent.appendChild (codeBlock (body.join ('\n'), ''));
      continue;
    }
    if ((m = HEADING.exec (line))) {
      parent.appendChild (inline (el ('h' + Math.min (6, m [1].length + 2)), m [2] || ''));
      i++;
      continue;
    }
    if (RULE.test (line)) {
      parent.appendChild (el ('hr'));
      i++;
      continue;
    }
    if (nests && QUOTE.test (line)) {
      const body = [];
      while (i < lines.length && lines [i].trim () && (m = QUOTE.exec (lines [i]) || [null, lines [i]])) {
        body.push (m [1]);
        i++;
      }
      const q = el ('blockquote');
      blocks (body, q, depth + 1);
      parent.appendChild (q);
      continue;
    }
    if (nests && ITEM.test (line)) {
      i = list (lines, i, parent, depth);
      continue;
    }
    if (line.includes ('|') && i + 1 < lines.length && TABLE_SEP.test (lines [i + 1])) {
      i = table (lines, i, parent);
      continue;
    }
    const para = [];
    while (i < lines.length && lines [i].trim () && !FENCE.test (lines [i]) && !HEADING.test (lines [i])
           && !RULE.test (lines [i]) && !(nests && QUOTE.test (lines [i]))
           && !(nests && para.length && ITEM.test (lines [i]) && !/^ {4}/.test (lines [i])))
      para.push (lines [i++].trim ());
    parent.appendChild (inline (el ('p'), para.join ('\n')));
  }
}

function list (lines, i, parent, depth) {
  const first = ITEM.exec (lines [i]);
  const indent = first [1].length;
  const ordered = /\d/.test (first [2]);
  const node = el (ordered ? 'ol' : 'ul');
  if (ordered && parseInt (first [2], 10) !== 1)
    node.setAttribute ('start', String (parseInt (first [2], 10)));
  while (i < lines.length) {
    const m = ITEM.exec (lines [i]);
    if (!m || m [1].length !== indent || /\d/.test (m [2]) !== ordered)
      break;
    const body = [m [3] || ''];
    const inner = indent + m [2].length + 1;
    i++;
    while (i < lines.length) {
      const l = lines [i];
      if (!l.trim ()) {
        // a blank line continues the item only when indented text follows
        if (i + 1 < lines.length && /^\s+\S/.test (lines [i + 1])
            && lines [i + 1].search (/\S/) >= inner) {
          body.push ('');
          i++;
          continue;
        }
        break;
      }
      const lead = l.search (/\S/);
      if (lead < inner && ITEM.test (l))
        break;
      if (lead < inner && (FENCE.test (l) || HEADING.test (l)))
        break;
      body.push (l.slice (Math.min (lead, inner)));
      i++;
    }
    const li = el ('li');
    const task = /^\[([ xX])\]\s+/.exec (body [0]);
    if (task) {
      body [0] = body [0].slice (task [0].length);
      li.classList.add ('task');
      li.appendChild (el ('input', { type: 'checkbox', disabled: true, checked: task [1] !== ' ',
                                     'aria-label': task [1] !== ' ' ? 'done' : 'not done' }));
    }
    // a tight item stays inline; one with blocks inside gets them
    if (body.length === 1 || !body.some (b => !b.trim () || ITEM.test (b) || FENCE.test (b)))
      inline (li, body.join ('\n'));
    else
      blocks (body, li, depth + 1);
    node.appendChild (li);
    while (i < lines.length && !lines [i].trim () && i + 1 < lines.length) {
      const next = ITEM.exec (lines [i + 1]);
      if (next && next [1].length === indent)
        i++;
      else
        break;
    }
  }
  parent.appendChild (node);
  return i;
}

function cells (line) {
  let s = line.trim ();
  if (s.startsWith ('|'))
    s = s.slice (1);
  if (s.endsWith ('|') && !s.endsWith ('\\|'))
    s = s.slice (0, -1);
  return s.split (/(?<!\\)\|/).map (c => c.trim ().replace (/\\\|/g, '|'));
}

function table (lines, i, parent) {
  const head = cells (lines [i]);
  const align = cells (lines [i + 1]).map (c =>
    c.startsWith (':') && c.endsWith (':') ? 'center' : c.endsWith (':') ? 'right' : '');
  const t = el ('table');
  const tr = el ('tr');
  head.forEach ((c, k) => tr.appendChild (inline (el ('th', align [k] ? { class: 'al-' + align [k] } : null), c)));
  t.appendChild (el ('thead', tr));
  const tb = el ('tbody');
  i += 2;
  while (i < lines.length && lines [i].trim () && lines [i].includes ('|')) {
    const row = el ('tr');
    const cs = cells (lines [i]);
    for (let k = 0; k < head.length; k++)
      row.appendChild (inline (el ('td', align [k] ? { class: 'al-' + align [k] } : null), cs [k] || ''));
    tb.appendChild (row);
    i++;
  }
  t.appendChild (tb);
  parent.appendChild (el ('div.table-wrap', t));
  return i;
}

export function codeBlock (code, lang) {
  const btn = el ('button.copy', { type: 'button', 'aria-label': 'Copy code' }, 'Copy');
  btn.addEventListener ('click', async () => {
    const ok = await copyText (code);
    btn.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout (() => { btn.textContent = 'Copy'; }, 1500);
  });
  return el ('div.code',
    el ('div.code-head', el ('span.lang', lang || 'text'), btn),
    el ('pre', el ('code', code)));
}

// ---- inline ----------------------------------------------------------

const PUNCT = /[!-/:-@[-`{-~]/;
const AUTOLINK = /^https?:\/\/[^\s<>"'`]*[^\s<>"'`.,:;!?)\]}]/;

export function inline (parent, text) {
  parse (String (text), parent, 0);
  return parent;
}

function parse (s, parent, depth) {
  let buf = '';
  const flush = () => {
    if (buf)
      parent.appendChild (document.createTextNode (buf));
    buf = '';
  };
  const found = new Map ();   // closers searched for so far, by kind (see remembered)
  let close = null;           // each '[' to its ']', made at the first '['
  let i = 0;
  while (i < s.length) {
    const c = s [i];
    if (c === '\\' && i + 1 < s.length && PUNCT.test (s [i + 1])) {
      buf += s [i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush ();
      parent.appendChild (el ('br'));
      i++;
      continue;
    }
    if (c === '`') {
      let n = 1;
      while (s [i + n] === '`')
        n++;
      const tick = '`'.repeat (n);
      const end = remembered (found, tick, i + n, (from) => findTicks (s, from, tick));
      if (end >= 0) {
        flush ();
        let code = s.slice (i + n, end).replace (/\n/g, ' ');
        if (/^ .* $/.test (code))
          code = code.slice (1, -1);
        parent.appendChild (el ('code', code));
        i = end + n;
        continue;
      }
      buf += tick;
      i += n;
      continue;
    }
    if ((c === '*' || c === '_' || c === '~') && depth < 8) {
      let n = 1;
      while (s [i + n] === c && n < 3)
        n++;
      const run = c.repeat (n);
      const before = i > 0 ? s [i - 1] : ' ';
      const after = s [i + n] || ' ';
      const opens = !/\s/.test (after) && !(c === '_' && /[\p{L}\p{N}]/u.test (before)) && !(c === '~' && n !== 2);
      if (opens) {
        const end = remembered (found, run, i + n + 1, (from) => findClose (s, from, run, c));
        if (end > i + n) {
          flush ();
          const inner = s.slice (i + n, end);
          let node;
          if (c === '~')
            node = el ('del');
          else if (n === 3)
            node = el ('strong', el ('em'));
          else
            node = el (n === 2 ? 'strong' : 'em');
          parse (inner, node.firstChild && node.firstChild.nodeType === 1 ? node.firstChild : node, depth + 1);
          parent.appendChild (node);
          i = end + n;
          continue;
        }
      }
      buf += run;
      i += n;
      continue;
    }
    if (c === '[') {
      close = close || brackets (s);
      const link = parseLink (s, i, close);
      if (link) {
        flush ();
        if (SAFE_URL.test (link.url)) {
          const a = el ('a', { href: link.url, target: '_blank', rel: 'noopener noreferrer nofollow' });
          parse (link.text, a, depth + 1);
          parent.appendChild (a);
        } else {
          parse (link.text, parent, depth + 1);
        }
        i = link.end;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && !/[\p{L}\p{N}]/u.test (i > 0 ? s [i - 1] : ' ')) {
      const m = AUTOLINK.exec (s.slice (i, i + 2048));
      if (m) {
        flush ();
        parent.appendChild (el ('a', { href: m [0], target: '_blank', rel: 'noopener noreferrer nofollow' }, m [0]));
        i += m [0].length;
        continue;
      }
    }
    buf += c;
    i++;
  }
  flush ();
}

// The first closer of `kind` at or after `from`, found by search(from) or
// remembered. parse asks with `from` only growing, and whether a position
// closes depends on the text around it, not on the opener; so an earlier
// answer at or after the new `from` still stands, and a failed search
// fails for every later opener too. Each kind's text is then scanned about
// once per paragraph, not once per opener (quadratic on 1 MB of "*a ").
function remembered (found, kind, from, search) {
  const last = found.get (kind);
  if (last && from >= last.from && (last.at < 0 || last.at >= from))
    return last.at;
  const at = search (from);
  found.set (kind, { from, at });
  return at;
}

// The index of the next run of exactly tick.length backticks, or -1.
function findTicks (s, from, tick) {
  const n = tick.length;
  let j = from;
  while ((j = s.indexOf (tick, j)) >= 0) {
    if (s [j + n] !== '`' && s [j - 1] !== '`')
      return j;
    j += n;
  }
  return -1;
}

// The index of the closing delimiter run, or -1. A closer is not preceded
// by whitespace, and an underscore closer is not followed by a letter.
function findClose (s, from, run, c) {
  let j = from;
  while ((j = s.indexOf (run, j)) >= 0) {
    const prev = s [j - 1];
    const next = s [j + run.length];
    if (!/\s/.test (prev) && next !== c
        && !(c === '_' && next && /[\p{L}\p{N}]/u.test (next)))
      return j;
    j += 1;
  }
  return -1;
}

// For each '[' of s, the index of its ']' as matchBracket finds it, or -1;
// UNSEEN where a backslash hid the '[' from this one pass. One pass with a
// stack, instead of a scan to the end of the paragraph per '['. A
// backslash skips the next character, whatever it is, as in matchBracket,
// so from any '[' on the pass reads the text as a scan from it would.
const UNSEEN = -2;

function brackets (s) {
  const close = new Int32Array (s.length).fill (UNSEEN);
  const open = [];
  for (let j = 0; j < s.length; j++) {
    const c = s [j];
    if (c === '\\')
      j++;
    else if (c === '[') {
      close [j] = -1;
      open.push (j);
    } else if (c === ']' && open.length)
      close [open.pop ()] = j;
    else if (c === '\n' && s [j + 1] === '\n')
      open.length = 0;   // a blank line ends every open bracket unmatched
  }
  return close;
}

// The scan brackets() stands for, from one '[': the index of its ']', or -1.
function matchBracket (s, i) {
  let depth = 0;
  let j = i;
  for (; j < s.length; j++) {
    if (s [j] === '\\') {
      j++;
      continue;
    }
    if (s [j] === '[')
      depth++;
    else if (s [j] === ']' && --depth === 0)
      break;
    else if (s [j] === '\n' && s [j + 1] === '\n')
      return -1;
  }
  return j < s.length ? j : -1;
}

function parseLink (s, i, close) {
  const j = close [i] !== UNSEEN ? close [i] : matchBracket (s, i);
  if (j < 0 || s [j + 1] !== '(')
    return null;
  const m = /^\(\s*<?([^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)>?(?:\s+"[^"]*")?\s*\)/.exec (s.slice (j + 1, j + 2048));
  if (!m)
    return null;
  return { text: s.slice (i + 1, j), url: m [1], end: j + 1 + m [0].length };
}
