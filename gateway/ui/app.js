// app.js — the switchboard browser UI (docs/ui.md). Plain ES modules, no
// build step, nothing from the network: the page talks to the gateway's
// WebSocket only (docs/gateway.md for the protocol).

import { el, clear, append, fmtTokens, shortId } from './dom.js';

// a total's cost: dollars from micro-dollars, or "cost unknown" when some
// call had no price (docs/usage.md)
function fmtCost (t) {
  if (t.cost_microusd === undefined)
    return 'cost unknown';
  const usd = t.cost_microusd / 1e6;
  return '$' + usd.toFixed (usd < 0.01 ? 4 : 2);
}
import { Conn } from './conn.js';
import { Transcript } from './transcript.js';
import { Sidebar, sessionTitle } from './sidebar.js';
import { Tabs, Changes, Inbox, Workers, missing } from './panels.js';
import { Bus } from './bus.js';
import { Models } from './models.js';
import { McpConnect } from './mcp.js';
import { budgetLine } from './budget.js';
import { Rewinder } from './rewind.js';
import { CheckpointDiff } from './ckdiff.js';
import { ImageTray } from './images.js';
import { Artifacts } from './artifacts.js';

const NARROW = window.matchMedia ('(max-width: 800px)');
const MEDIUM = window.matchMedia ('(max-width: 1200px)');
const BANNERS_MAX = 3;
const STICK_PX = 48;            // this close to the bottom counts as "at the bottom"
const LIST_REFRESH_MS = 5000;

class App {
  constructor () {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    this.conn = new Conn (proto + '//' + location.host + '/ws');
    this.current = null;
    this.session = null;
    this.transcript = null;
    this.models = new Models (this.conn);
    this.models.onChange (() => {
      this._head ();
      if (this.sidebar)
        this.sidebar.render ();
    });
    this.queue = { prompts: [], paused: false, available: true };
    this.stick = true;
  }

  start () {
    this.sidebar = new Sidebar (this);
    this.tabs = new Tabs ();
    this.changes = new Changes (this);
    this.artifacts = new Artifacts (this);
    this.inbox = new Inbox (this);
    this.workers = new Workers (this);
    this.mcp = new McpConnect (this);
    this.rewinder = new Rewinder (this);
    this.ckdiff = new CheckpointDiff (this);
    this.tabs.onShow.changes = () => this.changes.refresh ();
    this.tabs.onShow.artifacts = () => this.artifacts.refresh ();
    this.tabs.onShow.approvals = () => this.inbox.refresh ();
    this.bus = new Bus (this);
    this.tabs.onShow.bus = () => this.bus.start ();
    this.tabs.onHide.bus = () => this.bus.stop ();
    this._wire ();
    this.conn.addEventListener ('state', (e) => this._connState (e.detail));
    this.conn.addEventListener ('open', () => this._onOpen ());
    this.conn.addEventListener ('servererror', (e) => {
      if (e.detail.code !== 'disconnected')
        this.error (e.detail);
    });
    this.conn.start ();
    const sid = new URLSearchParams (location.hash.slice (1)).get ('s');
    if (sid)
      this.select (sid, { replace: true });
    window.addEventListener ('hashchange', () => {
      const s = new URLSearchParams (location.hash.slice (1)).get ('s');
      if (s && s !== this.current)
        this.select (s, { replace: true });
    });
    setInterval (() => {
      if (this.conn.state === 'live' && !document.hidden)
        this.sidebar.refresh ();
    }, LIST_REFRESH_MS);
    window.sbApp = this;                // for the browser test and for a person's console
  }

  _onOpen () {
    this.sidebar.refresh ();
    this.inbox.refresh ();
    this.workers.probe ();
    this.mcp.refresh ();
    this.models.load ().catch (() => {});
    this.conn.call ('exec.info', {}).then ((r) => this._sandbox (r.sandbox)).catch (() => {});
    if (this.current) {
      this._loadSession ();
      this.changes.refresh ();
      this._queueRefresh ();
    }
  }

  // ---- errors -------------------------------------------------------

  // A standing warning while tools run without a sandbox (serve
  // --sandbox none; docs/sandbox.md): it stays until the page reloads.
  _sandbox (kind) {
    const old = document.getElementById ('sandbox-warning');
    if (kind !== 'none') {
      if (old)
        old.remove ();
      return;
    }
    if (old)
      return;
    const b = el ('div.banner', { role: 'alert', id: 'sandbox-warning' },
      el ('span.code', 'no sandbox'),
      el ('span.msg', 'Tools, MCP servers and hooks run without a sandbox (serve --sandbox none): '
        + 'they see every file this server sees, its token included, and the network.'));
    document.getElementById ('banners').prepend (b);
  }

  error (e) {
    const box = document.getElementById ('banners');
    const close = el ('button.icon-btn', { type: 'button', 'aria-label': 'Dismiss' }, '×');
    const b = el ('div.banner', { role: 'alert' },
      el ('span.code', e.code || 'error'), el ('span.msg', e.message || String (e)), close);
    close.addEventListener ('click', () => b.remove ());
    box.appendChild (b);
    //  the oldest error goes; the sandbox warning stays
    while (box.children.length > BANNERS_MAX)
      [...box.children].find ((c) => c.id !== 'sandbox-warning').remove ();
  }

  // ---- the connection indicator -------------------------------------

  _connState (d) {
    const c = document.getElementById ('conn');
    c.dataset.state = d.state;
    this._connText ();
  }

  _connText () {
    const c = document.getElementById ('conn');
    const state = c.dataset.state || 'connecting';
    const seq = this.current ? this.conn.lastSeq (this.current) : 0;
    const label = { live: 'live', reconnecting: 'reconnecting…', offline: 'offline', connecting: 'connecting…' } [state];
    c.querySelector ('.conn-text').textContent = label + (this.current ? ' · seq ' + seq : '');
    c.title = state === 'live' ? 'Connected; the last event shown is #' + seq
      : 'Not connected; reconnecting from event #' + seq;
  }

  // ---- sessions -----------------------------------------------------

  select (sid, { replace = false } = {}) {
    if (!sid)
      return;
    if (NARROW.matches)
      this._drawer (false);
    if (sid === this.current)
      return;
    if (this.current)
      this.conn.unsubscribe (this.current);
    this.current = sid;
    this.session = this.sidebar.sessions.find (s => s.session_id === sid) || null;
    const hash = '#s=' + encodeURIComponent (sid);
    if (location.hash !== hash) {
      if (replace)
        history.replaceState (null, '', hash);
      else
        history.pushState (null, '', hash);
    }
    document.getElementById ('welcome').hidden = true;
    document.getElementById ('view').hidden = false;
    const root = document.getElementById ('transcript');
    clear (root);
    root.setAttribute ('aria-busy', 'true');
    root.dataset.session = sid;
    this.stick = true;
    this.transcript = new Transcript (root, {
      resolve: (ia, d, fb, scope, raise, more) => this.resolve (ia, d, fb, scope, raise, more),
      removeQueued: (pid) => this.removeQueued (pid),
      resumeQueue: () => this.resumeQueue (),
      onChange: (what, ev) => this._onTranscript (what, ev),
      rewind: (seq, kind) => this.rewinder.confirm (seq, kind),
      undo: () => this.rewinder.undo (),
      fork: (seq) => this.rewinder.fork (seq),
      reveal: (callId) => this.rewinder.revealCall (callId),
      origin: (from) => this.rewinder.originNode (from),
    });
    this.ckdiff.refresh ();
    this.sidebar.render ();
    this._head ();
    this._composerState ();
    this.queue = { prompts: [], paused: false, available: true };
    this._queueStrip ();
    this.conn.subscribe (sid, 0, (ev) => this._event (sid, ev));
    this._loadSession ();
    this.changes.refresh ();
    if (this.tabs.current === 'artifacts')
      this.artifacts.refresh ();
    this._queueRefresh ();
    this.usage = null;
    this._usageRefresh ();
    this._connText ();
  }

  async _loadSession () {
    const sid = this.current;
    try {
      const r = await this.conn.call ('session.get', { session_id: sid });
      if (sid !== this.current)
        return;
      this.session = r.session;
      this.sidebar.upsert (r.session, { full: true });
      this.rewinder.showOrigin (r.session);
      this._head ();
    } catch (e) {
      if (e.code === 'not_found') {
        this.error ({ code: e.code, message: 'No session ' + sid + ' on this server.' });
        this.current = null;
        document.getElementById ('view').hidden = true;
        document.getElementById ('welcome').hidden = false;
      } else if (e.code !== 'disconnected') {
        this.error (e);
      }
    }
  }

  _event (sid, ev) {
    if (sid !== this.current || !this.transcript)
      return;
    this.transcript.apply (ev);
    this._uiSoon ();
    // an entry that may reference an image or a file
    if (['prompt', 'tool.result', 'artifact'].includes (ev.kind) && this.tabs.current === 'artifacts')
      this.artifacts.soon ();
  }

  // What depends on the tape as a whole (the header, the composer, the
  // indicator) is brought up to date once a frame, not once an entry: a
  // replay of 10,000 entries must not redo them 10,000 times.
  _uiSoon () {
    if (this.uiFrame)
      return;
    this.uiFrame = requestAnimationFrame (() => this.flushUi ());
  }

  // Does now what _uiSoon would do at the next frame: so that whoever reads
  // the page (a test, an extension) sees the header and the transcript's
  // data-last-seq agree with the entries already in the DOM.
  flushUi () {
    cancelAnimationFrame (this.uiFrame);
    this.uiFrame = 0;
    const root = document.getElementById ('transcript');
    if (this.transcript) {
      root.dataset.lastSeq = this.transcript.lastSeq;
      root.dataset.applied = this.transcript.applied;
    }
    this._head ();
    this._composerState ();
    this._connText ();
    if (this.transcript) {
      this.transcript.history.setActive (!!this._activeRun ());
      this.rewinder.reveal ();
    }
    if (this.stick)
      this._scrollSoon ();
  }

  // Runs fn once, ms after the last call with the same key.
  _later (key, ms, fn) {
    this.timers = this.timers || {};
    clearTimeout (this.timers [key]);
    this.timers [key] = setTimeout (fn, ms);
  }

  _onTranscript (what, ev) {
    if (what === 'render') {
      if (this.stick)
        this._scrollSoon ();
      else
        document.getElementById ('jump').hidden = false;
      document.getElementById ('transcript').removeAttribute ('aria-busy');
      return;
    }
    if (what === 'write')
      this.changes.soon ();
    if (what === 'run.status' && ev && ev.body && ev.body.status) {
      const st = ev.body.status;
      const turn = ['queued', 'claimed', 'running'].includes (st) ? 'running' : st === 'cancelling' ? 'cancelling' : 'idle';
      if (this.session) {
        this.session.turn_status = turn;
        this.session.last_activity_at = ev.ts;
      }
      this._later ('sidebar', 250, () => this.sidebar.upsert ({ session_id: this.current,
        turn_status: this.session ? this.session.turn_status : turn, last_activity_at: ev.ts }));
      if (turn === 'idle') {
        this.changes.soon ();
        this._later ('queue', 300, () => this._queueRefresh ());
        this._later ('list', 600, () => this.sidebar.refresh ());
      }
    }
    if (what === 'usage')
      this._later ('usage', 400, () => this._usageRefresh ());
    if (what === 'checkpoint')
      this._later ('ckdiff', 300, () => this.ckdiff.refresh ());
    if (what === 'session.rewound')
      this.changes.soon ();
    if (what === 'prompt' && this.session && ev.body && ev.body.text)
      this.session.last_prompt = (ev.body.text.split ('\n').find (l => l.trim ()) || '').slice (0, 200);
    if ((what === 'session.updated' || what === 'session.created') && this.transcript.session)
      this.session = { ...this.session, ...this.transcript.session };
    if (what && what.startsWith ('approval.'))
      this._later ('inbox', 300, () => this.inbox.refresh ());
    if (what && (what.startsWith ('prompt.') || what.startsWith ('queue.')))
      this._later ('queue', 300, () => this._queueRefresh ());
  }

  // ---- the header ---------------------------------------------------

  _head () {
    const s = this.session;
    const head = document.getElementById ('session-head');
    head.hidden = !this.current;
    if (!this.current)
      return;
    document.getElementById ('head-title').textContent = s ? sessionTitle (s) : shortId (this.current);
    document.getElementById ('head-title').title = s ? s.workspace + '\n' + s.session_id : '';
    // the provider and model it runs with: its own, else the defaults,
    // named (models.js); a select offers the others the server has
    const eff = this.models.effective (s);
    this.models.fillProviders (document.getElementById ('head-provider'), (s && s.provider) || '', true);
    this.models.fillModels (document.getElementById ('head-model'), (s && s.provider) || '', (s && s.model) || '');
    const shown = document.getElementById ('head-effective');
    shown.textContent = eff.provider + ' / ' + eff.model;
    shown.title = 'This session runs with provider ' + eff.provider + (eff.ownProvider ? '' : " (the server's default)")
      + ', model ' + eff.model + (eff.ownModel ? '' : " (the provider's default)");
    const closed = !!(s && s.status === 'closed');
    document.getElementById ('archive-btn').hidden = closed;
    document.getElementById ('head-archived').hidden = !closed;
    const pol = document.getElementById ('head-policy');
    if (document.activeElement !== pol)
      pol.value = (s && s.approval_policy) || 'auto';
    const net = document.getElementById ('head-network');
    if (document.activeElement !== net)
      net.value = s && s.network ? 'on' : 'off';
    const steps = document.getElementById ('head-steps');
    if (document.activeElement !== steps)
      steps.value = s && s.max_steps ? s.max_steps : '';
    steps.placeholder = '50';
    const budget = document.getElementById ('head-budget');
    if (budget) {
      budget.textContent = budgetLine (s);
      budget.classList.toggle ('not-enforced', !!(s && s.budget_notice));
    }
    const t = this.transcript ? this.transcript.totals : null;
    const usage = document.getElementById ('head-usage');
    usage.textContent = t ? (t.tokensKnown ? fmtTokens (t.input) + ' in · ' + fmtTokens (t.output) + ' out · '
      : 'tokens unknown · ') + t.steps + (t.steps === 1 ? ' step' : ' steps')
      + (t.window ? ' · context ' + Math.round (100 * t.context / t.window) + '%' : '') : '';
    // the totals the server keeps (session.usage, docs/usage.md): the
    // session's cost, then the current (latest) run's tokens and cost
    const u = this.usage;
    if (u && u.totals && u.totals.calls) {
      const runs = u.runs || [];
      const run = runs.length ? runs [runs.length - 1].totals : null;
      usage.textContent += (usage.textContent ? ' · ' : '') + fmtCost (u.totals)
        + (run ? ' · run ' + (run.input_tokens !== undefined ? fmtTokens (run.input_tokens) + ' in · ' : 'tokens unknown · ')
          + (run.output_tokens !== undefined ? fmtTokens (run.output_tokens) + ' out · ' : '') + fmtCost (run) : '');
    }
  }

  // session.usage for the open session; shown by _head
  async _usageRefresh () {
    const sid = this.current;
    if (!sid)
      return;
    try {
      const r = await this.conn.call ('session.usage', { session_id: sid });
      if (sid !== this.current)
        return;
      this.usage = r;
    } catch (e) {
      this.usage = null;
    }
    this._head ();
  }

  async _update (field, value, more) {
    if (!this.current)
      return;
    const body = { session_id: this.current, ...(more || {}) };
    body [field] = value;
    try {
      const r = await this.conn.call ('session.update', body);
      this.session = r.session;
      this.sidebar.upsert (r.session, { full: true });
    } catch (e) {
      this.error (e);
    }
    this._head ();
  }

  // ---- archive and delete -------------------------------------------

  // Archiving is session.close: the session and its tape stay, readable,
  // and it takes no more prompts (docs/sessions.md).
  async archive () {
    if (!this.current)
      return;
    try {
      const r = await this.conn.call ('session.close', { session_id: this.current });
      this.session = r.session || { ...this.session, status: 'closed' };
      this.sidebar.upsert (this.session, { full: !!r.session });
    } catch (e) {
      this.error (e);
    }
    this._head ();
    this._composerState ();
  }

  _confirmDelete () {
    if (!this.current)
      return;
    const s = this.session;
    document.getElementById ('delete-name').textContent = s ? sessionTitle (s) : shortId (this.current);
    document.getElementById ('delete-dialog').showModal ();
    document.getElementById ('delete-cancel').focus ();
  }

  // session.delete: the session, its tape and its index entries go.
  async remove () {
    const sid = this.current;
    const dialog = document.getElementById ('delete-dialog');
    const btn = document.getElementById ('delete-confirm');
    btn.disabled = true;
    try {
      await this.conn.call ('session.delete', { session_id: sid });
      dialog.close ();
      this.conn.unsubscribe (sid);
      this.sidebar.drop (sid);
      if (this.current === sid) {
        this.current = null;
        this.session = null;
        this.transcript = null;
        clear (document.getElementById ('transcript'));
        document.getElementById ('view').hidden = true;
        document.getElementById ('welcome').hidden = false;
        history.replaceState (null, '', location.pathname + location.search);
        this._head ();
        this._connText ();
      }
    } catch (e) {
      dialog.close ();
      this.error (e);
    } finally {
      btn.disabled = false;
    }
  }

  // ---- composer, queue, steer ---------------------------------------

  _activeRun () {
    return this.transcript ? this.transcript.activeRun : null;
  }

  _composerState () {
    const running = !!this._activeRun ();
    const closed = !!(this.session && this.session.status === 'closed');
    const input = document.getElementById ('composer-input');
    if (input.disabled !== closed && !input.dataset.sending) {
      input.disabled = closed;
      input.placeholder = closed ? 'This session is closed: it takes no more prompts.'
        : 'Ask for something…  (Enter sends, Shift+Enter for a new line, Esc stops the run)';
    }
    document.getElementById ('send-btn').disabled = closed;
    document.getElementById ('compact-btn').hidden = running || closed;
    document.getElementById ('stop-btn').hidden = !running;
    document.getElementById ('steer-btn').hidden = !running;
    const send = document.getElementById ('send-btn');
    send.textContent = running ? 'Queue' : 'Send';
    send.title = running ? 'Queue it to run after this one (Enter)' : 'Send (Enter)';
    const r = running ? this.transcript.runs.get (this._activeRun ()) : null;
    const st = document.getElementById ('run-state');
    clear (st);
    if (r)
      append (st, [el ('span.spinner', { 'aria-hidden': 'true' }), ' ', r.status,
        r.steps ? ' · step ' + r.steps : '']);
  }

  async send (mode) {
    const input = document.getElementById ('composer-input');
    const text = input.value.trim ();
    if (!text || !this.current)
      return;
    const body = { session_id: this.current, text, images: this.images && this.images.pending (),
                   command_id: 'ui-' + Date.now ().toString (36) + Math.random ().toString (36).slice (2, 10) };
    if (this._activeRun () || mode === 'steer')
      body.mode = mode || 'queue';
    input.disabled = true;
    input.dataset.sending = '1';
    try {
      const r = await this.conn.call ('session.prompt', body);
      input.value = '';
      if (this.images)
        this.images.clear ();
      if (r.run_id)
        this.transcript.activeRun = this.transcript.activeRun || r.run_id;
      this._composerState ();
      this._queueRefresh ();
    } catch (e) {
      if (e.code === 'invalid' && body.mode && /mode/.test (e.message || ''))
        this.error ({ code: e.code, message: 'This server cannot queue or steer yet: ' + e.message });
      else
        this.error (e);
    } finally {
      delete input.dataset.sending;
      input.disabled = false;
      input.focus ();
    }
  }

  async cancel () {
    const run = this._activeRun ();
    if (!run)
      return;
    try {
      await this.conn.call ('run.cancel', { run_id: run });
    } catch (e) {
      this.error (e);
    }
  }

  async resolve (ia, decision, feedback, scope, raise, more) {
    const body = { interaction_id: ia, decision, resolved_by: 'browser',
                   command_id: 'ui-' + ia + '-' + Date.now ().toString (36), ...(more || {}) };
    if (raise)
      body.raise = raise;               // a budget question's (budget.js)
    if (feedback)
      body.feedback = feedback;
    if (scope && scope !== 'once')
      body.scope = scope;
    try {
      const r = await this.conn.call ('interact.resolve', body);
      const a = this.transcript && this.transcript.approvals.get (ia);
      const rec = r.interaction || r;
      if (a && rec && rec.status && rec.status !== 'pending')
        this.transcript.resolveCard (a, rec);
      this.inbox.refresh ();
      return r;
    } catch (e) {
      if (e.code === 'conflict') {
        // someone else answered first: the tape's approval.resolved shows who
        this.error ({ code: e.code, message: 'Already resolved elsewhere.' });
      } else {
        this.error (e);
      }
      this.inbox.refresh ();
      throw e;
    }
  }

  async _queueRefresh () {
    const sid = this.current;
    if (!sid || !this.queue.available)
      return this._queueStrip ();
    try {
      // a long queue comes in pages (steers first): follow them all, up to
      // what the server allows in a queue (16 MiB, at least 768 KiB a page)
      let steers = [], prompts = [], r = {}, args = { session_id: sid };
      for (let page = 0; page < 32; page++) {
        r = await this.conn.call ('session.queue.list', args);
        if (sid !== this.current)
          return;
        steers = steers.concat ((r.steers || []).map (x => ({ ...(x.prompt || x), mode: 'steer' })));
        prompts = prompts.concat ((r.prompts || []).map (x => x.prompt || x));
        if (!r.more || r.next_after === undefined)
          break;
        args = { session_id: sid, after: r.next_after };
      }
      this.queue.prompts = steers.concat (prompts);
      this.queue.paused = !!r.paused;
      this.queue.reason = r.reason || '';
    } catch (e) {
      if (missing (e))
        this.queue.available = false;
    }
    this._queueStrip ();
  }

  _queueStrip () {
    const strip = document.getElementById ('queue-strip');
    clear (strip);
    const q = this.queue;
    strip.hidden = !q.prompts.length && !q.paused;
    if (strip.hidden)
      return;
    strip.appendChild (el ('span.q-title', q.paused ? 'Queue paused' + (q.reason ? ' (' + q.reason + ')' : '')
      : 'Waiting for this run'));
    if (q.paused)
      strip.appendChild (el ('button.small', { type: 'button', onclick: () => this.resumeQueue () }, 'Resume'));
    const ol = el ('ol.q-list');
    for (const p of q.prompts)
      ol.appendChild (el ('li', { dataset: { prompt: p.prompt_id } },
        el ('span.q-mode', p.mode === 'steer' ? 'steer' : ''), el ('span.q-text', p.text),
        el ('button.icon-btn', { type: 'button', 'aria-label': 'Remove from the queue',
                                 onclick: () => this.removeQueued (p.prompt_id) }, '×')));
    strip.appendChild (ol);
  }

  async removeQueued (pid) {
    try {
      await this.conn.call ('session.queue.remove', { session_id: this.current, prompt_id: pid });
    } catch (e) {
      this.error (e);
    }
    this._queueRefresh ();
  }

  async resumeQueue () {
    try {
      await this.conn.call ('session.queue.resume', { session_id: this.current });
    } catch (e) {
      this.error (e);
    }
    this._queueRefresh ();
  }

  // ---- scrolling ----------------------------------------------------

  _scrollSoon () {
    if (this.scrollFrame)
      return;
    this.scrollFrame = requestAnimationFrame (() => {
      this.scrollFrame = 0;
      const s = document.getElementById ('scroll');
      if (this.stick) {
        s.scrollTop = s.scrollHeight;
        document.getElementById ('jump').hidden = true;
      }
    });
  }

  // ---- layout and keys ----------------------------------------------

  _drawer (open) {
    const sb = document.getElementById ('sidebar');
    sb.classList.toggle ('open', open);
    document.getElementById ('scrim').hidden = !open;
    document.getElementById ('menu').setAttribute ('aria-expanded', open ? 'true' : 'false');
    if (open)
      document.getElementById ('filter').focus ();
  }

  _panel (open) {
    document.body.classList.toggle ('panel-closed', !open);
    document.getElementById ('panel-toggle').setAttribute ('aria-expanded', open ? 'true' : 'false');
  }

  _wire () {
    const $ = (id) => document.getElementById (id);
    $('new-session-btn').addEventListener ('click', () => this.sidebar.openNew ());
    $('welcome-new').addEventListener ('click', () => this.sidebar.openNew ());
    $('menu').addEventListener ('click', () => this._drawer (!$('sidebar').classList.contains ('open')));
    $('scrim').addEventListener ('click', () => this._drawer (false));
    $('panel-toggle').addEventListener ('click', () => this._panel (document.body.classList.contains ('panel-closed')));
    const fitPanel = () => this._panel (!MEDIUM.matches);
    MEDIUM.addEventListener ('change', fitPanel);
    fitPanel ();
    NARROW.addEventListener ('change', () => this._drawer (false));

    $('head-model').addEventListener ('change', (e) => this._update ('model', e.target.value));
    $('head-provider').addEventListener ('change', (e) => {
      // a model the new provider does not offer goes back to its default
      const p = this.models.find (e.target.value || this.models.dflt);
      const model = this.session && this.session.model;
      this._update ('provider', e.target.value, model && p && !p.models.includes (model) ? { model: '' } : null);
    });
    $('archive-btn').addEventListener ('click', () => this.archive ());
    $('delete-btn').addEventListener ('click', () => this._confirmDelete ());
    $('delete-cancel').addEventListener ('click', () => $('delete-dialog').close ());
    $('delete-form').addEventListener ('submit', (e) => {
      e.preventDefault ();
      this.remove ();
    });
    $('head-policy').addEventListener ('change', (e) => this._update ('approval_policy', e.target.value));
    $('head-network').addEventListener ('change', (e) => this._update ('network', e.target.value === 'on'));
    $('head-steps').addEventListener ('change', (e) => {
      const n = Number (e.target.value);
      if (n >= 1)
        this._update ('max_steps', n);
    });

    const input = $('composer-input');
    this.images = new ImageTray ($('composer'), input, () => this.current, (e) => this.error (e));
    input.addEventListener ('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault ();
        this.send (this._activeRun () ? 'queue' : undefined);
      } else if (e.key === 'Escape' && this._activeRun ()) {
        e.preventDefault ();
        this.cancel ();
      }
    });
    input.addEventListener ('input', () => {
      input.style.height = 'auto';
      input.style.height = Math.min (input.scrollHeight, window.innerHeight * 0.4) + 'px';
    });
    $('composer').addEventListener ('submit', (e) => {
      e.preventDefault ();
      this.send (this._activeRun () ? 'queue' : undefined);
    });
    $('steer-btn').addEventListener ('click', () => this.send ('steer'));
    $('compact-btn').addEventListener ('click', async () => {
      try {
        const r = await this.conn.call ('session.compact', { session_id: this.current,
          command_id: 'ui-' + Date.now ().toString (36) + Math.random ().toString (36).slice (2, 10) });
        if (r.run_id && this.transcript)
          this.transcript.activeRun = this.transcript.activeRun || r.run_id;
        this._composerState ();
      } catch (e) {
        this.error (e);
      }
    });
    $('stop-btn').addEventListener ('click', () => this.cancel ());

    const scroller = $('scroll');
    // content that grows (streaming, a card opening) or a view that shrinks
    // (the queue strip, the keyboard) keeps the bottom in view while stuck
    const follow = new ResizeObserver (() => {
      if (this.stick)
        scroller.scrollTop = scroller.scrollHeight;
      else
        $('jump').hidden = false;
    });
    follow.observe ($('transcript'));
    follow.observe (scroller);
    // Only a scroll up unsticks: content that grew between our scroll and
    // its event leaves a gap below without anyone having moved.
    let lastTop = 0;
    scroller.addEventListener ('scroll', () => {
      const top = scroller.scrollTop;
      const gap = scroller.scrollHeight - top - scroller.clientHeight;
      if (gap < STICK_PX)
        this.stick = true;
      else if (top < lastTop - 2)
        this.stick = false;
      lastTop = top;
      $('jump').hidden = this.stick;
    }, { passive: true });
    $('jump').addEventListener ('click', () => {
      this.stick = true;
      scroller.scrollTop = scroller.scrollHeight;
      $('jump').hidden = true;
    });

    document.addEventListener ('keydown', (e) => {
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test (e.target.tagName);
      if (e.key === '/' && !typing) {
        e.preventDefault ();
        if (NARROW.matches)
          this._drawer (true);
        $('filter').focus ();
      } else if (e.altKey && (e.key === 'n' || e.key === 'N')) {
        e.preventDefault ();
        this.sidebar.openNew ();
      } else if (e.key === 'Escape' && $('sidebar').classList.contains ('open')) {
        this._drawer (false);
      }
    });
  }
}

new App ().start ();
