// sidebar.js — the sessions list (newest first, status dots, a filter)
// and the "New session" dialog.

import { el, clear, fmtAgo, shortId } from './dom.js';

const LIST_LIMIT = 500;

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
  upsert (s) {
    if (!s || !s.session_id)
      return;
    const k = this.sessions.findIndex (x => x.session_id === s.session_id);
    if (k >= 0)
      this.sessions [k] = { ...this.sessions [k], ...s };
    else
      this.sessions.unshift (s);
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
        el ('span.s-sub', el ('span.s-ws', s.workspace || ''))),
      el ('span.s-when', fmtAgo (s.last_activity_at || s.updated_at)));
      li.addEventListener ('click', () => this.app.select (s.session_id));
      this.list.appendChild (li);
      if (focused === s.session_id)
        li.focus ();
    }
    this.empty.hidden = shown.length > 0;
    this.empty.textContent = this.sessions.length ? 'No session matches the filter.' : 'No sessions yet.';
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
    this.form.addEventListener ('submit', (e) => {
      e.preventDefault ();
      this._create ();
    });
  }

  openNew () {
    this.formError.hidden = true;
    const sel = this.form.elements.model;
    const keep = sel.value;
    clear (sel);
    sel.appendChild (el ('option', { value: '' }, 'server default' + (this.app.models.provider
      ? ' (' + this.app.models.provider + ')' : '')));
    for (const m of this.app.models.list)
      sel.appendChild (el ('option', { value: m }, m));
    sel.value = keep;
    if (!this.form.elements.workspace.value && this.app.session && this.app.session.workspace)
      this.form.elements.workspace.value = this.app.session.workspace;
    this.dialog.showModal ();
    this.form.elements.workspace.focus ();
  }

  async _create () {
    const f = this.form.elements;
    const body = { workspace: f.workspace.value.trim (), approval_policy: f.approval_policy.value };
    if (f.title.value.trim ())
      body.title = f.title.value.trim ();
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
