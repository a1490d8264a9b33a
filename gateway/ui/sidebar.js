// sidebar.js — the sessions list (newest first, status dots, a filter)
// and the "New session" dialog.

import { el, clear, fmtAgo, shortId } from './dom.js';

const LIST_LIMIT = 500;
// a session record's settings, each absent when unset (session.update)
const SETTINGS = ['title', 'provider', 'model', 'approval_policy', 'max_steps', 'approval_deadline_s', 'rules',
  'labels', 'mcp_servers', 'target'];

export function sessionTitle (s) {
  if (s.title)
    return s.title;
  if (s.last_prompt)
    return s.last_prompt;
  const ws = String (s.workspace || '').replace (/\/+$/, '');
  return ws.slice (ws.lastIndexOf ('/') + 1) || shortId (s.session_id);
}

export class Sidebar {
  constructor (app) {
    this.app = app;
    this.list = document.getElementById ('sessions');
    this.empty = document.getElementById ('sessions-empty');
    this.filter = document.getElementById ('filter');
    this.sessions = [];
    this.filter.addEventListener ('input', () => this.render ());
    this.filter.addEventListener ('keydown', (e) => {
      if (e.key === 'ArrowDown') {
        e.preventDefault ();
        const first = this.list.querySelector ('[role=option]');
        if (first)
          first.focus ();
      }
    });
    this.list.addEventListener ('keydown', (e) => this._keys (e));
    this._dialog ();
  }

  async refresh () {
    try {
      const r = await this.app.conn.call ('session.list', { limit: LIST_LIMIT });
      this.sessions = (r.sessions || []).map (x => x.session || x);
      this.render ();
    } catch (e) {
      if (e.code !== 'disconnected')
        this.app.error (e);
    }
  }

  // Takes a fresher record (from session.get or the tape) without a refetch.
  // A whole record (full: session.get, .update, .close) also takes away
  // the settings it no longer has (a model cleared), which a merge keeps.
  upsert (s, { full = false } = {}) {
    if (!s || !s.session_id)
      return;
    const k = this.sessions.findIndex (x => x.session_id === s.session_id);
    if (k >= 0) {
      const merged = { ...this.sessions [k], ...s };
      for (const f of full ? SETTINGS : [])
        if (!(f in s))
          delete merged [f];
      this.sessions [k] = merged;
    } else {
      this.sessions.unshift (s);
    }
    this.render ();
  }

  // A deleted session leaves the list.
  drop (sid) {
    this.sessions = this.sessions.filter (s => s.session_id !== sid);
    this.render ();
  }

  render () {
    const q = this.filter.value.trim ().toLowerCase ();
    const shown = this.sessions.filter (s => !q || [s.title, s.workspace, s.session_id, s.last_prompt, s.model]
      .some (v => v && String (v).toLowerCase ().includes (q)));
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.session : null;
    clear (this.list);
    for (const s of shown) {
      const state = s.status === 'closed' ? 'closed' : s.turn_status || 'idle';
      const selected = s.session_id === this.app.current;
      const li = el ('li.session', {
        role: 'option', tabindex: selected || (!this.app.current && s === shown [0]) ? '0' : '-1',
        'aria-selected': selected ? 'true' : 'false', dataset: { session: s.session_id, state },
        title: s.workspace,
      },
      el ('span.dot.st-' + state, { 'aria-label': state, role: 'img' }),
      el ('span.s-main',
        el ('span.s-title', sessionTitle (s)),
        el ('span.s-sub', el ('span.s-ws', s.workspace || '')),
        el ('span.s-model', this._model (s))),
      el ('span.s-when', fmtAgo (s.last_activity_at || s.updated_at)));
      li.addEventListener ('click', () => this.app.select (s.session_id));
      this.list.appendChild (li);
      if (focused === s.session_id)
        li.focus ();
    }
    this.empty.hidden = shown.length > 0;
    this.empty.textContent = this.sessions.length ? 'No session matches the filter.' : 'No sessions yet.';
  }

  // "provider / model" it runs with (models.js), for the list's second line.
  _model (s) {
    const m = this.app.models.effective (s);
    return m.provider + ' / ' + m.model;
  }

  _keys (e) {
    const items = [...this.list.querySelectorAll ('[role=option]')];
    const k = items.indexOf (document.activeElement);
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault ();
      const next = items [Math.max (0, Math.min (items.length - 1, k + (e.key === 'ArrowDown' ? 1 : -1)))];
      if (next)
        next.focus ();
    } else if ((e.key === 'Enter' || e.key === ' ') && k >= 0) {
      e.preventDefault ();
      this.app.select (items [k].dataset.session);
    }
  }

  // ---- the New session dialog ---------------------------------------

  _dialog () {
    this.dialog = document.getElementById ('new-dialog');
    this.form = document.getElementById ('new-form');
    this.formError = document.getElementById ('new-error');
    document.getElementById ('new-cancel').addEventListener ('click', () => this.dialog.close ());
    this.form.elements.provider.addEventListener ('change', () => this._choices ());
    this.form.addEventListener ('submit', (e) => {
      e.preventDefault ();
      this._create ();
    });
  }

  openNew () {
    this.formError.hidden = true;
    // the providers the server has, and the chosen one's models (models.js)
    this._choices ();
    if (!this.form.elements.workspace.value && this.app.session && this.app.session.workspace)
      this.form.elements.workspace.value = this.app.session.workspace;
    this.dialog.showModal ();
    this.form.elements.workspace.focus ();
  }

  _choices () {
    const f = this.form.elements;
    this.app.models.fillProviders (f.provider, f.provider.value);
    this.app.models.fillModels (f.model, f.provider.value, f.model.value);
  }

  async _create () {
    const f = this.form.elements;
    const body = { workspace: f.workspace.value.trim (), approval_policy: f.approval_policy.value };
    if (f.title.value.trim ())
      body.title = f.title.value.trim ();
    if (f.provider.value)
      body.provider = f.provider.value;
    if (f.model.value)
      body.model = f.model.value;
    if (f.max_steps.value)
      body.max_steps = Number (f.max_steps.value);
    body.command_id = 'ui-' + Date.now ().toString (36) + Math.random ().toString (36).slice (2, 10);
    const btn = document.getElementById ('new-create');
    btn.disabled = true;
    try {
      const r = await this.app.conn.call ('session.create', body);
      this.dialog.close ();
      this.form.reset ();
      this.upsert (r.session);
      this.app.select (r.session.session_id);
    } catch (e) {
      this.formError.textContent = (e.code || 'error') + ': ' + (e.message || '');
      this.formError.hidden = false;
    } finally {
      btn.disabled = false;
    }
  }
}
