// rewind.js — rewind, undo and fork in the browser (docs/ui.md,
// docs/checkpoints.md).
//
// Two halves. A History belongs to one Transcript: it keeps the
// session's checkpoints as their entries arrive, gives each user message
// and each run's end line "Rewind to here" and "Fork from here", renders
// a `session.rewound` entry as a result card, and folds the stretch of
// the transcript that rewind took back. Everything it shows comes from
// the tape, so a reload renders the very same page. The Rewinder belongs
// to the app: the confirm dialog, the calls (session.rewind,
// session.fork), going to the fork, and the "forked from" line of a
// session that is one.

import { el, fmtTime, shortId } from './dom.js';

// The tools the tool table marks read-only (docs/checkpoints.md, "When"):
// every other call after a rewind's seq may have changed something
// outside the workspace that no rewind takes back.
const READ_ONLY = new Set (['read_file', 'list_dir', 'grep', 'git_status', 'git_diff']);
const SHOWN_PATHS = 50;         // paths listed on a result card before "and N more"

const WHY_ACTIVE = 'A run is active: rewind and fork wait until it ends (or stop it).';
const WHY_NO_CHECKPOINT = 'No checkpoint of the work tree at or before this point.';

function plural (n, one, many) {
  return n + ' ' + (n === 1 ? one : many || one + 's');
}

export class History {
  // t: the Transcript; hooks: {rewind(seq, kind), undo(), fork(seq), reveal(call_id),
  // origin(forked_from) -> the "forked from" line}
  constructor (t, hooks) {
    this.t = t;
    this.hooks = hooks || {};
    this.ckpts = [];                    // {seq, seq_of, run_id, ts, files, changed, first}, in seq order
    this.first = 0;                     // the smallest seq_of: no rewind goes before it
    this.actions = [];                  // every action row: {kind, node, rewind, fork, why, rewindTo, forkAt}
    this.waiting = new Map ();          // run_id -> the action row of its prompt, until its first checkpoint
    this.folds = [];                    // rewound stretches, oldest first
    this.lastCard = null;               // the latest session.rewound card that can be undone
    this.active = false;
  }

  // ---- checkpoints --------------------------------------------------

  onCheckpoint (ev, body) {
    const c = { seq: Number (ev.seq), seq_of: Number (body.seq_of) || 0, run_id: body.run_id || ev.run_id,
                ts: ev.ts, files: Number (body.files) || 0, first: !!body.first,
                changed: Array.isArray (body.changed) ? body.changed.map (String) : [] };
    this.ckpts.push (c);
    const earlier = !this.first || c.seq_of < this.first;
    if (earlier)
      this.first = c.seq_of;
    // a prompt's rewind point is the work tree as its run found it
    const row = this.waiting.get (c.run_id);
    if (row) {
      row.rewindTo = c.seq_of;
      this.waiting.delete (c.run_id);
      this._state (row);
    }
    // the first checkpoint makes every earlier run end a point to go back to
    if (earlier)
      for (const a of this.actions)
        this._state (a);
  }

  // The seq_of of the latest checkpoint at or before seq, or 0.
  checkpointAt (seq) {
    let best = 0;
    for (const c of this.ckpts)
      if (c.seq_of <= seq && c.seq_of > best)
        best = c.seq_of;
    return best;
  }

  // ---- the actions --------------------------------------------------

  _row (kind, rewindTo, forkAt) {
    const rewind = el ('button.link.rewind-here', { type: 'button' }, 'Rewind to here');
    const fork = el ('button.link.fork-here', { type: 'button' }, 'Fork from here');
    const why = el ('span.why', { role: 'status' });
    const node = el ('div.entry-actions', { dataset: { kind } }, rewind, fork, why);
    const row = { kind, node, rewind, fork, why, rewindTo, forkAt };
    rewind.addEventListener ('click', () => {
      const reason = this._why (row, true);
      if (reason)
        return this._say (row, reason);
      this.hooks.rewind && this.hooks.rewind (row.rewindTo, row.kind);
    });
    fork.addEventListener ('click', () => {
      const reason = this._why (row, false);
      if (reason)
        return this._say (row, reason);
      this.hooks.fork && this.hooks.fork (row.forkAt);
    });
    this.actions.push (row);
    this._state (row);
    return row;
  }

  // Why the action cannot be taken now, or ''.
  _why (row, rewind) {
    if (this.active)
      return WHY_ACTIVE;
    if (rewind && (!row.rewindTo || !this.first || row.rewindTo < this.first))
      return WHY_NO_CHECKPOINT;
    return '';
  }

  _say (row, text) {
    row.why.textContent = text;
  }

  // A disabled action stays focusable (aria-disabled), with its reason as
  // its description and, once pressed, spelled out beside it.
  _state (row) {
    for (const [btn, rewind] of [[row.rewind, true], [row.fork, false]]) {
      const reason = this._why (row, rewind);
      if (reason) {
        btn.setAttribute ('aria-disabled', 'true');
        btn.title = reason;
      } else {
        btn.removeAttribute ('aria-disabled');
        btn.title = rewind ? 'Put the work tree (and the conversation) back to #' + row.rewindTo
          : 'A new session whose history is this one\'s up to #' + row.forkAt;
      }
    }
    if (!this._why (row, true) && !this._why (row, false))
      row.why.textContent = '';
  }

  // Called once a frame by the app: whether a run of the session is active.
  setActive (active) {
    active = !!active;
    if (active === this.active)
      return;
    this.active = active;
    for (const a of this.actions)
      this._state (a);
    if (this.lastCard)
      this._undoState (this.lastCard);
  }

  // A user message: rewind to the work tree as its run found it (its first
  // checkpoint, once that arrives), fork just before it (the fork's person
  // can then say something else).
  onPrompt (ev, node) {
    const run = ev.run_id || (ev.body && ev.body.run_id);
    const row = this._row ('prompt', 0, Math.max (0, Number (ev.seq) - 1));
    if (run)
      this.waiting.set (run, row);
    node.appendChild (row.node);
    // the undo of a rewind is only until the next prompt (the executor
    // refuses it after one, docs/checkpoints.md)
    if (this.lastCard && Number (ev.seq) > this.lastCard.seq) {
      this.lastCard.closed = true;
      this._undoState (this.lastCard);
      this.lastCard = null;
    }
  }

  // A run's end line: rewind to (and fork at) the run's end.
  onRunEnd (r, ev, line) {
    const seq = Number (ev.seq);
    this.waiting.delete (r.id);
    line.appendChild (this._row ('run', seq, seq).node);
  }

  // ---- session.forked -----------------------------------------------

  // A fork's first entry: where it came from, first in its transcript
  // (in place of the line the session record gave, if that came first).
  onForked (ev, body) {
    const from = body.forked_from;
    if (!from || !from.session_id || !this.hooks.origin)
      return;
    const old = this.t.root.querySelector (':scope > .forked-from');
    if (old)
      old.remove ();
    const node = this.hooks.origin (from);
    node.dataset.seq = ev.seq;
    this.t.root.appendChild (node);
  }

  // ---- session.rewound ----------------------------------------------

  onRewound (ev, body) {
    const seq = Number (ev.seq);
    const card = this._card (ev, body);
    this.t._add (ev, card.node);
    if (body.undo) {
      // the undo puts back what the last rewind took: its stretch is live again
      const f = this.folds [this.folds.length - 1];
      if (f) {
        f.undone = !f.undone;
        f.label.textContent = f.undone ? f.text + ', then undone at #' + seq : f.text;
        f.node.classList.toggle ('undone', f.undone);
        for (const n of f.nodes)
          this._paint (n);
      }
    } else if (body.conversation === true) {
      // the conversation was taken back too: the model no longer sees that
      // stretch, so neither does the page at first glance
      this._fold (ev, Number (body.to_seq) || 0, seq);
    }
    if (this.lastCard) {
      this.lastCard.closed = true;
      this._undoState (this.lastCard);
    }
    this.lastCard = body.undo ? null : card;
    if (card.undo)
      this._undoState (card);
  }

  _card (ev, body) {
    const restored = Array.isArray (body.restored) ? body.restored : [];
    const removed = Array.isArray (body.removed) ? body.removed : [];
    const nr = Number (body.restored_total ?? restored.length) || 0;
    const nm = Number (body.removed_total ?? removed.length) || 0;
    const notRestored = Array.isArray (body.not_restored) ? body.not_restored : [];
    const effects = Array.isArray (body.effects) ? body.effects : [];
    const what = body.code === false ? 'the conversation' : body.conversation === false ? 'the work tree'
      : body.conversation === true ? 'the work tree and the conversation' : 'the work tree';
    const head = body.undo
      ? el ('strong', 'Rewind undone: ' + what + ' as the rewind at #' + body.to_seq + ' found it')
      : el ('strong', 'Rewound ' + what + ' to #' + body.to_seq
        + (body.checkpoint_seq && Number (body.checkpoint_seq) !== Number (body.to_seq)
          ? ' (the checkpoint after #' + body.checkpoint_seq + ')' : ''));
    const paths = (list, total, cls) => list.length ? el ('details.paths.' + cls,
      el ('summary', plural (total, 'file')),
      el ('ul', list.slice (0, SHOWN_PATHS).map (p => el ('li', el ('code', String (p))))),
      total > Math.min (list.length, SHOWN_PATHS) ? el ('p.note', 'and ' + (total - Math.min (list.length, SHOWN_PATHS))
        + ' more (switchboard events lists them all)') : null) : null;
    const undo = body.undo ? null : el ('button.small.undo-rewind', { type: 'button' }, 'Undo rewind');
    const undoWhy = el ('span.why', { role: 'status' });
    const node = el ('div.rewound-card', { dataset: { seq: ev.seq, toSeq: body.to_seq }, role: 'group',
                                           'aria-label': body.undo ? 'Rewind undone' : 'Rewind' },
      el ('div.rw-head', head, ' ', el ('span.when', fmtTime (ev.ts))),
      body.code === false ? el ('div.rw-counts', 'The work tree was left as it is.') : el ('div.rw-counts',
        el ('span.restored-count', plural (nr, 'file') + ' restored'), ' · ',
        el ('span.removed-count', plural (nm, 'file') + ' removed')),
      nr ? el ('div.rw-list', 'Restored: ', paths (restored, nr, 'restored')) : null,
      nm ? el ('div.rw-list', 'Removed: ', paths (removed, nm, 'removed')) : null,
      notRestored.length ? el ('div.not-restored',
        el ('p', el ('strong', 'Not restored'), ' (left as they are):'),
        el ('ul', notRestored.map (f => el ('li', el ('code', String (f.path || '?')), ' — ', String (f.why || ''))))) : null,
      effects.length ? el ('div.effects', { role: 'note' },
        el ('p', el ('strong', 'These calls had effects outside the workspace that were not undone'),
          ' (a push, a network call, a database: a rewind only puts files back):'),
        el ('ul', effects.map (f => el ('li', { dataset: { call: f.call_id } },
          el ('button.link', { type: 'button', onclick: () => this.hooks.reveal && this.hooks.reveal (f.call_id) },
            String (f.tool || '?')), ' · #' + f.seq + ' · ', el ('code', shortId (String (f.call_id || '')))))),
        body.effects_truncated ? el ('p.note', 'More calls than are listed here.') : null) : null,
      undo ? el ('div.rw-actions', undo, undoWhy) : null);
    const card = { node, undo, undoWhy, seq: Number (ev.seq), closed: false };
    if (undo)
      undo.addEventListener ('click', () => {
        if (!card.closed && !this.active && this.hooks.undo)
          this.hooks.undo ();
      });
    return card;
  }

  _undoState (card) {
    if (!card.undo)
      return;
    if (card.closed) {
      card.undo.remove ();
      card.undoWhy.textContent = 'Undo is no longer possible: a prompt or another rewind came after it. '
        + 'Rewind to a checkpoint instead.';
      return;
    }
    card.undo.disabled = this.active;
    card.undo.title = this.active ? WHY_ACTIVE : 'Put the work tree back as this rewind found it';
    card.undoWhy.textContent = this.active ? WHY_ACTIVE : 'One click, until the next prompt.';
  }

  // Folds and greys the entries after to_seq and before the rewound entry
  // at seq, but not the rewind run's own (which shows the result).
  _fold (ev, to, seq) {
    const nodes = [];
    const own = ev.run_id ? this.t.runs.get (ev.run_id) : null;
    const within = (n) => {
      const s = Number (n.dataset.seq);
      return s > to && s < seq;
    };
    for (const child of [...this.t.root.children]) {
      if (child.classList.contains ('run')) {
        if (own && child === own.node)
          continue;
        const entries = [...child.children].filter (n => n.dataset.seq);
        if (!entries.length)
          continue;
        if (entries.every (within))
          nodes.push (child);
        else
          nodes.push (...entries.filter (within));
      } else if (child.dataset.seq && within (child)) {
        nodes.push (child);
      }
    }
    if (!nodes.length)
      return;
    const text = 'Rewound: entries #' + (to + 1) + '–#' + (seq - 1);
    const label = el ('span.fold-label', text);
    const toggle = el ('button.link.fold-toggle', { type: 'button', 'aria-expanded': 'false' }, 'Show');
    const node = el ('div.rewind-fold', { dataset: { from: to + 1, to: seq - 1 } }, label, ' · ', toggle);
    const f = { nodes, node, label, toggle, text, collapsed: true, undone: false };
    toggle.addEventListener ('click', () => {
      f.collapsed = !f.collapsed;
      toggle.textContent = f.collapsed ? 'Show' : 'Hide';
      toggle.setAttribute ('aria-expanded', f.collapsed ? 'false' : 'true');
      for (const n of f.nodes)
        this._paint (n);
    });
    nodes [0].parentNode.insertBefore (node, nodes [0]);
    for (const n of nodes) {
      n.sbFolds = (n.sbFolds || []).concat (f);
      this._paint (n);
    }
    this.folds.push (f);
  }

  // Greyed while a fold that holds it stands, hidden while one is closed.
  _paint (n) {
    const folds = (n.sbFolds || []).filter (f => !f.undone);
    n.classList.toggle ('rewound-away', folds.length > 0);
    n.classList.toggle ('folded', folds.some (f => f.collapsed));
  }
}

// ---- the app's half ---------------------------------------------------

export class Rewinder {
  constructor (app) {
    this.app = app;
    this.dialog = null;
    this.pendingSeq = null;             // a seq to show once the transcript reaches it
  }

  _command () {
    return 'ui-' + Date.now ().toString (36) + Math.random ().toString (36).slice (2, 10);
  }

  // The confirm step, one dialog for the page.
  _dialog () {
    if (this.dialog)
      return this.dialog;
    const title = el ('h2#rewind-title');
    const what = el ('p#rewind-what');
    const effects = el ('p#rewind-effects.warn');
    const code = el ('input#rewind-code', { type: 'checkbox', checked: true });
    const conv = el ('input#rewind-conversation', { type: 'checkbox', checked: true });
    const cancel = el ('button#rewind-cancel', { type: 'button' }, 'Cancel');
    const ok = el ('button#rewind-confirm.primary', { type: 'submit' }, 'Rewind');
    const error = el ('p#rewind-error.form-error', { role: 'alert', hidden: true });
    const form = el ('form#rewind-form', { method: 'dialog' }, title, what,
      el ('fieldset.rewind-parts', el ('legend', 'Put back'),
        el ('label', code, ' the work tree (files changed since are restored, files made since removed)'),
        el ('label', conv, ' the conversation (the model\'s next context ends here)')),
      effects, error,
      el ('div.dialog-actions', cancel, ok));
    const d = el ('dialog#rewind-dialog', { 'aria-labelledby': 'rewind-title' }, form);
    const sync = () => { ok.disabled = !code.checked && !conv.checked; };
    code.addEventListener ('change', sync);
    conv.addEventListener ('change', sync);
    cancel.addEventListener ('click', () => d.close ());
    form.addEventListener ('submit', (e) => {
      e.preventDefault ();
      this._confirmed ();
    });
    document.body.appendChild (d);
    this.dialog = { d, title, what, effects, code, conv, ok, error };
    return this.dialog;
  }

  // "Rewind to here": asks first, saying what will happen.
  confirm (seq, kind) {
    const t = this.app.transcript;
    if (!t || !this.app.current)
      return;
    const g = this._dialog ();
    g.seq = seq;
    g.title.textContent = 'Rewind to #' + seq + '?';
    const at = t.history.checkpointAt (seq);
    g.what.textContent = (kind === 'prompt' ? 'Back to the work tree as this message found it'
      : 'Back to the work tree as this run left it') + ' (the checkpoint after #' + at + '). '
      + 'Nothing is deleted from the tape, and the rewind can be undone until the next prompt.';
    const calls = [...t.calls.values ()].filter (c => Number (c.card.dataset.seq) > seq && !READ_ONLY.has (c.name));
    g.effects.hidden = !calls.length;
    g.effects.textContent = calls.length ? plural (calls.length, 'call') + ' after this point ('
      + [...new Set (calls.map (c => c.name))].join (', ') + ') may have changed things outside the workspace; '
      + 'a rewind does not undo those.' : '';
    g.code.checked = g.conv.checked = true;
    g.ok.disabled = false;
    g.error.hidden = true;
    g.d.showModal ();
    g.ok.focus ();
  }

  async _confirmed () {
    const g = this.dialog;
    g.ok.disabled = true;
    try {
      await this._rewind ({ to_seq: g.seq, code: g.code.checked, conversation: g.conv.checked });
      g.d.close ();
    } catch (e) {
      g.error.hidden = false;
      g.error.textContent = (e.code || 'error') + ': ' + (e.message || String (e));
    } finally {
      g.ok.disabled = false;
    }
  }

  async _rewind (fields) {
    const body = { session_id: this.app.current, command_id: this._command (), ...fields };
    const r = await this.app.conn.call ('session.rewind', body);
    // the run is active until its end comes, unless that came first (a
    // rewind is quick, and the tape's entries race the reply)
    const t = this.app.transcript;
    const seen = t && t.runs.get (r.run_id);
    if (r.run_id && t && !(seen && seen.endTs))
      t.activeRun = t.activeRun || r.run_id;
    this.app.flushUi ();
    return r;
  }

  // The undo of the last rewind: one click, no question (it is the way
  // back). It takes no code or conversation: it undoes what that rewind did.
  async undo () {
    try {
      await this._rewind ({ undo: true });
    } catch (e) {
      this.app.error (e);
    }
  }

  // "Fork from here": a small dialog, the workspace being the one choice
  // (shared, or a new folder made at the checkpoint of seq), then the fork.
  _forkDialog () {
    if (this.forkBox)
      return this.forkBox;
    const title = el ('h2#fork-title');
    const what = el ('p#fork-what');
    const ws = el ('input#fork-workspace', { type: 'text', autocomplete: 'off',
                                              placeholder: 'empty: share this session\'s workspace' });
    const cancel = el ('button#fork-cancel', { type: 'button' }, 'Cancel');
    const ok = el ('button#fork-confirm.primary', { type: 'submit' }, 'Fork');
    const form = el ('form#fork-form', { method: 'dialog' }, title, what,
      el ('label', 'Its own work tree in a new folder ', el ('span.hint', '(optional: a git worktree, or a copy '
        + 'outside git, at the checkpoint of this point)'), ws),
      el ('div.dialog-actions', cancel, ok));
    const d = el ('dialog#fork-dialog', { 'aria-labelledby': 'fork-title' }, form);
    cancel.addEventListener ('click', () => d.close ());
    form.addEventListener ('submit', (e) => {
      e.preventDefault ();
      d.close ();
      this._fork (this.forkBox.seq, ws.value.trim ());
    });
    document.body.appendChild (d);
    this.forkBox = { d, title, what, ws, ok };
    return this.forkBox;
  }

  fork (seq) {
    if (!this.app.current)
      return;
    const g = this._forkDialog ();
    g.seq = seq;
    g.title.textContent = 'Fork from #' + seq + '?';
    g.what.textContent = 'A new session whose history is this one\'s up to #' + seq + ': it starts idle, with an '
      + 'empty queue and its counters at zero. This session is not changed.';
    g.ws.value = '';
    g.d.showModal ();
    g.ok.focus ();
  }

  // The fork itself; the page goes to the new session. A cut the server
  // refuses (inside a tool call, an approval pending) comes back with the
  // nearest valid seqs (the error's detail), each offered as a button.
  async _fork (seq, workspace) {
    const src = this.app.current;
    const body = { session_id: src, at: seq, command_id: this._command () };
    if (workspace)
      body.workspace = workspace;
    try {
      const r = await this.app.conn.call ('session.fork', body);
      const s = r.session || {};
      if (!s.session_id)
        throw { code: 'internal', message: 'session.fork answered without a session' };
      this.app.sidebar.upsert (s, { full: true });
      this.app.select (s.session_id);
      this.app.sidebar.refresh ();
    } catch (e) {
      const d = e.detail || {};
      const near = [d.valid_before, d.valid_after].filter (v => Number.isInteger (v) && v > 0);
      this.app.error ({ code: e.code, message: (e.message || '') + (near.length ? ' — nearest valid: ' : '') });
      const banner = document.getElementById ('banners').lastElementChild;
      const msg = banner && banner.querySelector ('.msg');
      for (const v of near.length && msg ? near : [])
        msg.appendChild (el ('button.link.fork-near', { type: 'button', onclick: () => {
          banner.remove ();
          this._fork (v, workspace);
        } }, 'fork at #' + v));
    }
  }

  // A session that is a fork says where it came from, first in its
  // transcript, with a link back to the source at that seq: from its
  // session.forked entry (History.onForked), or from its record until
  // that entry is read.
  showOrigin (session) {
    const root = document.getElementById ('transcript');
    const from = session && session.forked_from;
    if (!from || !from.session_id || root.querySelector (':scope > .forked-from'))
      return;
    root.prepend (this.originNode (from));
  }

  originNode (from) {
    const src = this.app.sidebar.sessions.find (s => s.session_id === from.session_id);
    const link = el ('a.forked-link', { href: '#s=' + encodeURIComponent (from.session_id),
                                        dataset: { session: from.session_id, seq: from.seq } },
      src && src.title ? src.title : 'session ' + shortId (from.session_id), ' at #' + from.seq);
    link.addEventListener ('click', (e) => {
      e.preventDefault ();
      this.pendingSeq = Number (from.seq);
      this.app.select (from.session_id);
    });
    return el ('div.forked-from', { role: 'note' }, 'Forked from ', link,
      ': its history up to there is this session\'s; what follows is this session\'s own.');
  }

  // Called after entries were applied: brings the seq a "forked from" link
  // named into view once the transcript holds it.
  reveal () {
    const t = this.app.transcript;
    if (this.pendingSeq === null || !t || t.lastSeq < this.pendingSeq)
      return;
    const seq = this.pendingSeq;
    this.pendingSeq = null;
    const nodes = [...document.querySelectorAll ('#transcript [data-seq]')];
    const at = nodes.filter (n => Number (n.dataset.seq) <= seq).pop ();
    if (!at)
      return;
    this.app.stick = false;
    at.scrollIntoView ({ block: 'center' });
    at.classList.add ('flash');
    setTimeout (() => at.classList.remove ('flash'), 2000);
  }

  // An effect's link on a result card: the call's card, opened and shown.
  revealCall (callId) {
    const card = document.querySelector ('#transcript .tool[data-call="' + CSS.escape (callId) + '"]');
    if (!card)
      return;
    for (let n = card; n; n = n.parentElement)
      if (n.classList && n.classList.contains ('folded')) {
        const fold = (n.sbFolds || []).find (f => f.collapsed);
        if (fold)
          fold.toggle.click ();
      }
    this.app.stick = false;
    card.open = true;
    card.scrollIntoView ({ block: 'center' });
    card.classList.add ('flash');
    setTimeout (() => card.classList.remove ('flash'), 2000);
  }
}
