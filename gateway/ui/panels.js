// panels.js — the right-hand tabs: Changes (exec.diff), the Approvals
// inbox across sessions (interact.list / interact.resolve), and Workers
// (worker.list; the tab exists only when the server answers it).

import { el, clear, append, fmtAgo, fmtTime, shortId, parseJson } from './dom.js';
import { renderDiff } from './diff.js';
import { toolIcon, callSummary } from './transcript.js';

const INBOX_POLL_MS = 4000;     // the inbox asks again this often (events may come from unwatched sessions)
const WORKERS_POLL_MS = 5000;
const RETRY_MS = 2000;          // the changes panel asks again after a passing fault
const TRANSIENT = new Set (['timeout', 'unavailable', 'overloaded', 'disconnected', 'busy']);

// A reply that says the server has no such request (yet).
export function missing (e) {
  return e && (e.code === 'unknown_type' || e.code === 'forbidden'
    || (e.code === 'invalid' && /type|unknown/i.test (e.message || '')));
}

export class Tabs {
  constructor () {
    this.tabs = [...document.querySelectorAll ('.tabs [role=tab]')];
    for (const t of this.tabs) {
      t.addEventListener ('click', () => this.show (t.id.slice (4)));
      t.addEventListener ('keydown', (e) => {
        if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft')
          return;
        const shown = this.tabs.filter (x => !x.hidden);
        const k = shown.indexOf (t) + (e.key === 'ArrowRight' ? 1 : -1);
        const next = shown [(k + shown.length) % shown.length];
        this.show (next.id.slice (4));
        next.focus ();
      });
    }
    this.current = 'changes';
    this.onShow = {};
    this.onHide = {};
  }

  show (name) {
    if (this.current !== name && this.onHide [this.current])
      this.onHide [this.current] ();
    this.current = name;
    for (const t of this.tabs) {
      const on = t.id === 'tab-' + name;
      t.setAttribute ('aria-selected', on ? 'true' : 'false');
      t.tabIndex = on ? 0 : -1;
      document.getElementById (t.getAttribute ('aria-controls')).hidden = !on;
    }
    if (this.onShow [name])
      this.onShow [name] ();
  }
}

// ---- Changes --------------------------------------------------------

// The files of an exec.diff or exec.checkpoint_diff answer, each with its
// diff; `open` (a Set of paths) keeps which the person expanded.
export function renderFiles (files, open) {
  const list = el ('div.files');
  for (const f of files) {
    const d = el ('details.file', { dataset: { path: f.path }, open: open.has (f.path) || files.length <= 3 },
      el ('summary',
        el ('span.fstatus.fs-' + (f.status || 'modified'), { title: f.status || 'modified' },
          (f.status || 'modified').slice (0, 1).toUpperCase ()),
        el ('span.fpath', { title: f.path }, f.old_path ? f.old_path + ' → ' + f.path : f.path),
        el ('span.plus', '+' + (f.additions || 0)), el ('span.minus', '−' + (f.deletions || 0))),
      f.binary ? el ('p.empty', 'binary file') : f.diff ? renderDiff (f.diff) : el ('p.empty', 'no text diff'),
      f.truncated ? el ('p.note', 'The diff was cut at the server\'s per-file limit.') : null);
    d.addEventListener ('toggle', () => d.open ? open.add (f.path) : open.delete (f.path));
    list.appendChild (d);
  }
  return list;
}

export class Changes {
  constructor (app) {
    this.app = app;
    this.pane = document.getElementById ('pane-changes');
    this.seq = 0;
    this.timer = null;
    this.open = new Set ();            // paths whose diff is expanded
    this.base = null;                  // what the person chose: 'session', 'head' (null: the server's)
    this.render (null);
  }

  // The person switches the baseline; the answer says which was used.
  switchBase (base) {
    this.base = base;
    this.refresh ();
  }

  // Asks again soon (a write tool finished); bursts make one request.
  soon () {
    clearTimeout (this.timer);
    this.timer = setTimeout (() => this.refresh (), 300);
  }

  async refresh () {
    const sid = this.app.current;
    if (!sid)
      return this.render (null);
    const seq = ++this.seq;
    this.pane.setAttribute ('aria-busy', 'true');
    try {
      const req = { session_id: sid };
      if (this.base)
        req.base = this.base;
      const r = await this.app.conn.call ('exec.diff', req);
      if (seq === this.seq && sid === this.app.current)
        this.render (r);
    } catch (e) {
      if (seq !== this.seq)
        return;
      this.render ({ error: e });
      // a passing fault (the bus busy, the socket reconnecting) is asked
      // again by itself; the Refresh button is there for the rest
      if (TRANSIENT.has (e.code))
        this.timer = setTimeout (() => seq === this.seq && this.refresh (), RETRY_MS);
    } finally {
      this.pane.removeAttribute ('aria-busy');
    }
  }

  render (r) {
    clear (this.pane);
    this._render (r);
    // the comparison of two checkpoints (ckdiff.js) stays below, whatever the answer
    if (this.app.ckdiff && r)
      this.pane.appendChild (this.app.ckdiff.node);
  }

  _render (r) {
    const head = el ('div.pane-head', el ('h2', 'Changes'),
      el ('button.small', { type: 'button', onclick: () => this.refresh (), 'aria-label': 'Refresh changes' },
        'Refresh'));
    this.pane.appendChild (head);
    if (!r) {
      this.pane.appendChild (el ('p.empty', 'Open a session to see what its runs changed.'));
      return;
    }
    if (r.error) {
      this.pane.appendChild (el ('p.empty', missing (r.error)
        ? 'This server does not report workspace changes yet (exec.diff).'
        : 'Could not read the changes: ' + r.error.code + ': ' + r.error.message));
      return;
    }
    if (r.git === false) {
      this.pane.appendChild (el ('p.empty', 'The workspace is not a git work tree, so there is no diff to show.'));
      return;
    }
    const files = (r.files || []).map (f => f.file || f);
    const written = r.written || [];
    // one stated baseline, which the person may switch
    const since = r.base === 'session';
    const other = since ? 'head' : 'session';
    this.pane.appendChild (el ('p.note.changes-base',
      since ? 'Since the session\'s first run' : 'Against git HEAD',
      r.workspace ? [' in ', el ('code', r.workspace)] : '', ' · ',
      since || r.session_base
        ? el ('button.link', { type: 'button', onclick: () => this.switchBase (other) },
          since ? 'compare with git HEAD' : 'compare with the session\'s first run')
        : el ('span.hint', 'the session\'s first run saves its own baseline')));
    if (!files.length && !written.length) {
      this.pane.appendChild (el ('p.empty', since ? 'No changes since the session\'s first run.'
        : 'No changes against git HEAD.'));
      return;
    }
    let add = 0, del = 0;
    for (const f of files) {
      add += Number (f.additions) || 0;
      del += Number (f.deletions) || 0;
    }
    this.pane.appendChild (el ('p.changes-sum', files.length + (files.length === 1 ? ' file' : ' files') + ' · ',
      el ('span.plus', '+' + add), ' ', el ('span.minus', '−' + del)));
    this.pane.appendChild (renderFiles (files, this.open));
    if (written.length)
      // the agent wrote these, and they are as they were: never hidden
      this.pane.appendChild (el ('div.written',
        el ('p.note', 'Written by the agent, and the same as the baseline now:'),
        el ('ul', written.map (p => el ('li', el ('code.fpath', { title: p }, p))))));
    if (r.truncated)
      this.pane.appendChild (el ('p.note', 'The list was cut at the server\'s limit.'));
  }
}

// ---- Approvals inbox -------------------------------------------------

export class Inbox {
  constructor (app) {
    this.app = app;
    this.pane = document.getElementById ('pane-approvals');
    this.count = document.getElementById ('approvals-count');
    this.items = [];
    this.recent = [];
    this.available = true;
    this.drafts = new Map ();           // interaction_id -> feedback typed so far
    this.timer = setInterval (() => this.refresh (), INBOX_POLL_MS);
    document.addEventListener ('visibilitychange', () => this.refresh ());
    this.render ();
  }

  async refresh () {
    if (!this.available || this.app.conn.state !== 'live' || document.hidden)
      return;
    try {
      const [p, all] = await Promise.all ([
        this.app.conn.call ('interact.list', { status: 'pending', limit: 100 }),
        this.app.conn.call ('interact.list', { limit: 20 }),
      ]);
      this.items = (p.interactions || []).map (x => x.interaction || x);
      this.recent = (all.interactions || []).map (x => x.interaction || x).filter (x => x.status !== 'pending');
    } catch (e) {
      if (missing (e))
        this.available = false;
      else if (e.code !== 'disconnected' && e.code !== 'timeout')
        return;
    }
    this.render ();
  }

  render () {
    const n = this.items.length;
    this.count.hidden = !n;
    this.count.textContent = String (n);
    // the draft of a feedback field survives the refresh
    for (const ta of this.pane.querySelectorAll ('textarea[data-ia]'))
      this.drafts.set (ta.dataset.ia, ta.value);
    const focusId = document.activeElement && this.pane.contains (document.activeElement)
      ? document.activeElement.dataset.focusKey : null;
    clear (this.pane);
    this.pane.appendChild (el ('div.pane-head', el ('h2', 'Approvals'),
      el ('button.small', { type: 'button', onclick: () => this.refresh () }, 'Refresh')));
    if (!this.available) {
      this.pane.appendChild (el ('p.empty', 'This server has no approvals service yet (interact.list).'));
      return;
    }
    if (!n)
      this.pane.appendChild (el ('p.empty', 'Nothing waits for you.'));
    for (const ia of this.items)
      this.pane.appendChild (this._item (ia));
    if (this.recent.length) {
      this.pane.appendChild (el ('h3', 'Recently resolved'));
      const ul = el ('ul.recent');
      for (const ia of this.recent.slice (0, 10))
        ul.appendChild (el ('li', el ('span.verdict.v-' + ia.status, ia.status), ' ',
          el ('strong', ia.tool), ' ', el ('span.sum', ia.summary || callSummary (ia.tool, parseJson (ia.arguments))),
          ' · by ' + (ia.resolved_by || '?') + ' ' + fmtAgo (ia.resolved_at)));
      this.pane.appendChild (ul);
    }
    if (focusId) {
      const f = this.pane.querySelector ('[data-focus-key="' + CSS.escape (focusId) + '"]');
      if (f)
        f.focus ();
    }
  }

  _item (ia) {
    const s = this.app.sidebar.sessions.find (x => x.session_id === ia.session_id);
    const fb = el ('textarea.feedback', { rows: 1, placeholder: 'Feedback (optional)', 'aria-label': 'Feedback',
                                          dataset: { ia: ia.interaction_id, focusKey: 'fb-' + ia.interaction_id } });
    fb.value = this.drafts.get (ia.interaction_id) || '';
    const scope = el ('select.scope', { 'aria-label': 'Scope', dataset: { focusKey: 'sc-' + ia.interaction_id } },
      el ('option', { value: 'once' }, 'once'), el ('option', { value: 'session' }, 'session'),
      el ('option', { value: 'always' }, 'always'));
    const act = (decision) => async () => {
      try {
        await this.app.resolve (ia.interaction_id, decision, fb.value.trim (), scope.value);
        this.drafts.delete (ia.interaction_id);
        this.refresh ();
      } catch { /* the banner says why */ }
    };
    return el ('div.inbox-item', { dataset: { interaction: ia.interaction_id } },
      el ('div.inbox-head',
        el ('span.tool-icon', { 'aria-hidden': 'true' }, toolIcon (ia.tool)),
        el ('strong', ia.tool),
        el ('button.link', { type: 'button', onclick: () => this.app.select (ia.session_id) },
          s ? s.title || s.workspace : 'session ' + shortId (ia.session_id)),
        el ('span.when', fmtTime (ia.created_at))),
      el ('div.summary', ia.summary || callSummary (ia.tool, parseJson (ia.arguments))),
      ia.diff ? renderDiff (ia.diff) : null,
      fb,
      el ('div.actions', scope,
        el ('button.approve', { type: 'button', onclick: act ('approve'), dataset: { focusKey: 'ap-' + ia.interaction_id } },
          'Approve'),
        el ('button.reject', { type: 'button', onclick: act ('reject'), dataset: { focusKey: 'rj-' + ia.interaction_id } },
          'Reject')));
  }
}

// ---- Workers --------------------------------------------------------

export class Workers {
  constructor (app) {
    this.app = app;
    this.pane = document.getElementById ('pane-workers');
    this.tab = document.getElementById ('tab-workers');
    this.timer = null;
  }

  // Shows the tab only once worker.list answers.
  async probe () {
    try {
      const r = await this.app.conn.call ('worker.list', {});
      this.tab.hidden = false;
      this.render (r);
      if (!this.timer)
        this.timer = setInterval (() => this.refresh (), WORKERS_POLL_MS);
    } catch (e) {
      this.tab.hidden = true;
    }
  }

  async refresh () {
    if (this.tab.hidden || this.app.conn.state !== 'live' || document.hidden)
      return;
    try {
      this.render (await this.app.conn.call ('worker.list', {}));
    } catch { /* the next tick tries again */ }
  }

  render (r) {
    clear (this.pane);
    this.pane.appendChild (el ('div.pane-head', el ('h2', 'Workers')));
    const ws = (r.workers || []).map (x => x.worker || x);
    if (!ws.length) {
      this.pane.appendChild (el ('p.empty', 'No worker has connected.'));
      return;
    }
    const t = el ('table.workers', el ('thead', el ('tr', el ('th', 'worker'), el ('th', 'pool'), el ('th', 'status'),
      el ('th', 'run'), el ('th', 'seen'))));
    const tb = el ('tbody');
    for (const w of ws)
      tb.appendChild (el ('tr', { dataset: { worker: w.worker_id } },
        el ('td', { title: (w.hostname ? w.hostname + (w.pid ? ' pid ' + w.pid : '') + '\n' : '') + (w.instance_id || '') },
          w.worker_id || '?'),
        el ('td', w.pool || ''),
        el ('td', el ('span.dot.st-' + (w.status || 'idle'), { 'aria-hidden': 'true' }), ' ', w.status || '',
          w.claiming && w.status === 'idle' ? ' · waiting for a run' : ''),
        el ('td', w.current_run_id ? shortId (w.current_run_id) : ''),
        el ('td', fmtAgo (w.last_seen_at))));
    t.appendChild (tb);
    append (this.pane, [t]);
  }
}
