// dom.js — building DOM without HTML strings. Every text a server or a
// model sent goes in through textContent (el's string children), never
// through innerHTML: nothing in this UI parses HTML from data.

// el('div.card.ok', {title: 'x', onclick: f}, 'text', child, [more])
export function el (spec, attrs, ...children) {
  const m = /^([a-z0-9-]+)?((?:[.#][\w-]+)*)$/i.exec (spec);
  const node = document.createElement ((m && m [1]) || 'div');
  if (m && m [2])
    for (const part of m [2].match (/[.#][\w-]+/g)) {
      if (part [0] === '.')
        node.classList.add (part.slice (1));
      else
        node.id = part.slice (1);
    }
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray (attrs))) {
    children.unshift (attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries (attrs || {})) {
    if (v === undefined || v === null || v === false)
      continue;
    if (k.startsWith ('on') && typeof v === 'function')
      node.addEventListener (k.slice (2), v);
    else if (k === 'dataset')
      Object.assign (node.dataset, v);
    else if (k === 'text')
      node.textContent = v;
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden' || k === 'open')
      node [k] = v;
    else
      node.setAttribute (k, v === true ? '' : String (v));
  }
  append (node, children);
  return node;
}

export function append (node, children) {
  for (const c of children.flat (Infinity)) {
    if (c === null || c === undefined || c === false)
      continue;
    node.appendChild (c instanceof Node ? c : document.createTextNode (String (c)));
  }
  return node;
}

export function clear (node) {
  while (node.firstChild)
    node.removeChild (node.firstChild);
  return node;
}

export function $ (sel, root = document) {
  return root.querySelector (sel);
}

// 12345 -> "12.3k"
export function fmtTokens (n) {
  n = Number (n) || 0;
  if (n < 1000)
    return String (n);
  if (n < 1e6)
    return (n / 1000).toFixed (n < 10000 ? 1 : 0) + 'k';
  return (n / 1e6).toFixed (1) + 'M';
}

export function fmtDuration (ms) {
  ms = Number (ms) || 0;
  if (ms < 1000)
    return ms + ' ms';
  if (ms < 60000)
    return (ms / 1000).toFixed (1) + ' s';
  const m = Math.floor (ms / 60000);
  const s = Math.round ((ms % 60000) / 1000);
  return m + ' min ' + s + ' s';
}

// one formatter for every time shown: toLocaleTimeString builds one a call
const TIME = new Intl.DateTimeFormat ([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });

export function fmtTime (ts) {
  return ts ? TIME.format (new Date (Number (ts))) : '';
}

// "3 min ago", for lists
export function fmtAgo (ts) {
  if (!ts)
    return '';
  const s = Math.max (0, (Date.now () - Number (ts)) / 1000);
  if (s < 45)
    return 'just now';
  if (s < 3600)
    return Math.round (s / 60) + ' min ago';
  if (s < 86400)
    return Math.round (s / 3600) + ' h ago';
  return new Date (Number (ts)).toLocaleDateString ();
}

export function shortId (id) {
  return id ? String (id).slice (-8).toLowerCase () : '';
}

// The text of a string cut to n characters, with an ellipsis.
export function cut (s, n) {
  s = String (s ?? '');
  return s.length > n ? s.slice (0, n - 1) + '…' : s;
}

export function parseJson (s) {
  if (typeof s !== 'string')
    return s;
  try {
    return JSON.parse (s);
  } catch {
    return null;
  }
}

// Copies text to the clipboard; falls back to a hidden textarea where the
// async clipboard is not allowed (plain http on another host name).
export async function copyText (text) {
  try {
    await navigator.clipboard.writeText (text);
    return true;
  } catch {
    const ta = el ('textarea', { 'aria-hidden': 'true', class: 'offscreen' });
    ta.value = text;
    document.body.appendChild (ta);
    ta.select ();
    let ok = false;
    try {
      ok = document.execCommand ('copy');
    } catch { /* nothing more to try */ }
    ta.remove ();
    return ok;
  }
}
