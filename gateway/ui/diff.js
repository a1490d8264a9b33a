// diff.js — unified diffs as DOM: one row per line, coloured by its sign.

import { el } from './dom.js';

const MAX_LINES = 4000;         // a diff longer than this shows its head and a note
const META = /^(diff |index |new file mode|deleted file mode|old mode|new mode|similarity index|rename (from|to) |Binary files |\\ No newline)/;

export function renderDiff (text) {
  const lines = String (text ?? '').replace (/\n$/, '').split ('\n');
  const pre = el ('pre.diff', { tabindex: '0' });
  const n = Math.min (lines.length, MAX_LINES);
  for (let k = 0; k < n; k++) {
    const l = lines [k];
    let cls = 'ctx';
    if (l.startsWith ('+++ ') || l.startsWith ('--- ') || META.test (l))
      cls = 'meta';
    else if (l.startsWith ('@@'))
      cls = 'hunk';
    else if (l.startsWith ('+'))
      cls = 'add';
    else if (l.startsWith ('-'))
      cls = 'del';
    pre.appendChild (el ('span.dl.' + cls, l + '\n'));
  }
  if (lines.length > n)
    pre.appendChild (el ('span.dl.meta', '… ' + (lines.length - n) + ' more lines\n'));
  return pre;
}

// A diff made from a tool call's arguments: edit_file's old -> new, and
// write_file's content as added lines. It says what the call asks for; the
// Changes panel shows what the workspace holds.
export function diffFromCall (name, args) {
  if (!args || typeof args !== 'object')
    return null;
  const split = (s) => String (s ?? '').replace (/\n$/, '').split ('\n');
  if (name === 'edit_file' && typeof args.old === 'string') {
    const out = ['--- a/' + (args.path || ''), '+++ b/' + (args.path || '')];
    for (const l of split (args.old))
      out.push ('-' + l);
    for (const l of split (args.new))
      out.push ('+' + l);
    return out.join ('\n');
  }
  if (name === 'write_file' && typeof args.content === 'string') {
    const out = ['+++ ' + (args.path || '')];
    for (const l of split (args.content))
      out.push ('+' + l);
    return out.join ('\n');
  }
  return null;
}
