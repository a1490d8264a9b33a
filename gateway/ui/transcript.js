// transcript.js — one session's tape as a transcript.
//
// apply(ev) takes tape entries in seq order (conn.js guarantees it) and
// changes the DOM incrementally: a text delta marks its block dirty, and
// dirty blocks are re-rendered once per animation frame, so a burst of
// deltas (or a replay of 10,000 entries) costs one layout per frame.
// Each run gets a <section>; CSS content-visibility lets the browser skip
// the ones off screen. Every kind has a rendering; a kind this file does
// not know is shown as a generic collapsible entry, never dropped.

import { promptImages } from './images.js';
import { el, append, clear, fmtTokens, fmtDuration, fmtTime, shortId, cut, parseJson } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { renderDiff, diffFromCall } from './diff.js';
import { icon, toolIconName } from './icons.js';
import { budgetCard, budgetEntry, budgetAmount } from './budget.js';
import { elicitCard } from './elicit.js';
import { History } from './rewind.js';

const OUTPUT_LINES = 20;        // live output shows this many lines until "show all"
const OUTPUT_KEEP = 512 * 1024; // characters of one call's output kept in the page
const FINAL = new Set (['completed', 'failed', 'cancelled', 'expired', 'interrupted']);
const WRITE_TOOLS = new Set (['write_file', 'edit_file', 'shell']);
// A tool's icon, inline SVG (icons.js): no font needed to show it.
export function toolIcon (name) {
  return icon (toolIconName (name));
}

// "make test", "src/a.c": what a call is about, on one line.
export function callSummary (name, args) {
  if (args && typeof args === 'object') {
    for (const k of ['command', 'path', 'pattern', 'query', 'url'])
      if (typeof args [k] === 'string' && args [k])
        return cut (args [k].replace (/\s+/g, ' '), 160);
    const keys = Object.keys (args);
    if (keys.length)
      return cut (keys.map (k => k + '=' + JSON.stringify (args [k])).join (' '), 160);
  }
  return '';
}

function mcpName (name) {
  const m = /^mcp__(.+?)__(.+)$/.exec (name || '');
  return m ? m [2] + ' (' + m [1] + ')' : name;
}

export class Transcript {
  // root: the element to fill; hooks: {resolve(ia, decision, feedback, scope),
  // removeQueued(prompt_id), resumeQueue(), onChange(what, ev), and
  // rewind(seq, kind), undo(), fork(seq), reveal(call_id), origin(forked_from)
  // for rewind.js}
  constructor (root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.runs = new Map ();             // run_id -> run state
    this.calls = new Map ();            // call_id -> tool card state
    this.approvals = new Map ();        // interaction_id -> approval card state
    this.queued = new Map ();           // prompt_id -> queued prompt node
    this.dirty = new Set ();
    this.frame = 0;
    this.lastSeq = 0;
    this.applied = 0;
    this.session = null;
    // tokensKnown: a model call reported its tokens (else they are unknown, not 0)
    this.totals = { input: 0, output: 0, steps: 0, context: 0, window: 0, tokensKnown: false };
    this.activeRun = null;
    this.loose = null;                  // the last block not in a run
    this.history = new History (this, hooks);   // checkpoints, rewind and fork (rewind.js)
  }

  // ---- structure ----------------------------------------------------

  _run (ev) {
    const id = ev.run_id || (ev.body && ev.body.run_id);
    if (!id)
      return null;
    let r = this.runs.get (id);
    if (!r) {
      r = {
        id, status: 'queued', startTs: ev.ts, endTs: null, input: 0, output: 0, steps: 0, tokensKnown: false,
        text: null, thinking: null, stepText: false,
        node: el ('section.run', { dataset: { run: id }, 'aria-label': 'run ' + shortId (id) }),
      };
      r.pill = el ('div.run-pill', { role: 'status' });
      r.node.appendChild (r.pill);
      this.runs.set (id, r);
      this.root.appendChild (r.node);
      this._pill (r);
    }
    return r;
  }

  _add (ev, node) {
    node.dataset.seq = ev.seq;
    const r = this._run (ev);
    if (r) {
      r.node.appendChild (node);
      r.text = null;
      r.thinking = null;
    } else {
      this.root.appendChild (node);
    }
    return node;
  }

  _quiet (ev, ...parts) {
    return this._add (ev, el ('div.quiet', el ('span.when', fmtTime (ev.ts)), ...parts));
  }

  _schedule (block) {
    this.dirty.add (block);
    if (!this.frame)
      this.frame = requestAnimationFrame (() => this.flush ());
  }

  // Re-renders every dirty text block now (also called before a test reads).
  flush () {
    cancelAnimationFrame (this.frame);
    this.frame = 0;
    for (const b of this.dirty)
      b.render ();
    this.dirty.clear ();
    this.hooks.onChange && this.hooks.onChange ('render');
  }

  // ---- entry point --------------------------------------------------

  apply (ev) {
    const seq = Number (ev.seq);
    if (seq <= this.lastSeq)
      return;                           // conn.js drops these already; a second guard
    this.lastSeq = seq;
    this.applied++;
    const body = ev.body || {};
    const h = HANDLERS [ev.kind];
    try {
      if (h)
        h.call (this, ev, body);
      else
        this._generic (ev, body);
    } catch (e) {
      console.error ('rendering', ev.kind, e);
      this._generic (ev, body);
    }
    this.hooks.onChange && this.hooks.onChange (ev.kind, ev);
  }

  _generic (ev, body) {
    const d = el ('details.generic',
      el ('summary', el ('span.kind', ev.kind), ' ', el ('span.when', fmtTime (ev.ts))),
      el ('pre.json', JSON.stringify (body, null, 2)));
    this._add (ev, d);
  }

  // ---- runs ---------------------------------------------------------

  _pill (r) {
    const live = !FINAL.has (r.status);
    clear (r.pill);
    r.pill.classList.toggle ('live', live);
    append (r.pill, [
      live ? el ('span.spinner', { 'aria-hidden': 'true' }) : null,
      el ('span.run-id', 'run ' + shortId (r.id)),
      ' ',
      el ('span.status.st-' + r.status, r.phase && live ? r.status + ' · ' + r.phase : r.status),
      r.steps ? ' · ' + r.steps + (r.steps === 1 ? ' step' : ' steps') : '',
      r.tokensKnown ? ' · ' + fmtTokens (r.input) + ' in / ' + fmtTokens (r.output) + ' out' : '',
    ]);
  }

  _runStatus (ev, body) {
    const r = this._run (ev);
    if (!r)
      return this._generic (ev, body);
    r.status = body.status || r.status;
    r.reason = body.reason;
    // a final status carries the run's own account: it counts every model call
    if (body.steps !== undefined) {
      this.totals.steps += Number (body.steps) - r.steps;
      r.steps = Number (body.steps);
    }
    if (body.input_tokens !== undefined) {
      this.totals.input += Number (body.input_tokens) - r.input;
      this.totals.output += Number (body.output_tokens || 0) - r.output;
      r.input = Number (body.input_tokens);
      r.output = Number (body.output_tokens || 0);
      r.tokensKnown = this.totals.tokensKnown = true;
    }
    if (FINAL.has (r.status)) {
      r.endTs = ev.ts;
      r.phase = null;
      if (this.activeRun === r.id)
        this.activeRun = null;
      const mark = r.status === 'completed' ? 'check' : r.status === 'cancelled' ? 'stop' : 'cross';
      const line = el ('div.run-end.st-' + r.status, { dataset: { seq: ev.seq } },
        el ('span.icon', { 'aria-hidden': 'true' }, icon (mark)), ' ',
        el ('strong', r.status),
        ' · ' + r.steps + (r.steps === 1 ? ' step' : ' steps'),
        r.tokensKnown ? ' · ' + fmtTokens (r.input) + ' in / ' + fmtTokens (r.output) + ' out' : ' · tokens unknown',
        r.startTs ? ' · ' + fmtDuration (ev.ts - r.startTs) : '',
        r.reason && r.status !== 'completed' ? el ('span.reason', ' — ' + r.reason) : null);
      r.node.appendChild (line);
      this.history.onRunEnd (r, ev, line);
      r.text = r.thinking = null;
      // a call still open when its run ended will not get a result
      for (const c of this.calls.values ())
        if (c.run === r && c.state === 'running')
          this._cardState (c, 'interrupted');
    } else {
      this.activeRun = r.id;
      if (r.status === 'cancelling')
        r.phase = null;
    }
    this._pill (r);
  }

  // ---- text ---------------------------------------------------------

  _textBlock (ev, r, kind) {
    const node = el ('div.assistant', { dataset: { seq: ev.seq } });
    const block = {
      text: '', node,
      render: () => {
        clear (node);
        node.appendChild (renderMarkdown (block.text));
      },
    };
    if (r) {
      r.node.appendChild (node);
      r.text = block;
      r.thinking = null;
    } else {
      this.root.appendChild (node);
    }
    return block;
  }

  _textDelta (ev, body) {
    const r = this._run (ev);
    let b = r && r.text;
    if (!b)
      b = this._textBlock (ev, r);
    b.text += body.text || '';
    b.node.classList.add ('streaming');
    if (r)
      r.stepText = true;
    this._schedule (b);
  }

  _textDone (ev, body) {
    const r = this._run (ev);
    let b = r && r.text;
    if (r && r.stepText && b) {
      // the deltas showed it; the full text is the reference
      if (typeof body.text === 'string' && body.text.length >= b.text.length)
        b.text = body.text;
    } else if (body.text) {
      b = this._textBlock (ev, r);
      b.text = body.text;
    }
    if (b) {
      b.node.classList.remove ('streaming');
      this._schedule (b);
    }
    if (r) {
      r.stepText = false;
      r.text = null;
    }
  }

  _thinking (ev, body) {
    const r = this._run (ev);
    let t = r && r.thinking;
    if (!t) {
      const label = el ('span.label', 'Thinking');
      const pre = el ('div.thinking-text');
      const node = el ('details.thinking', { dataset: { seq: ev.seq } }, el ('summary', label), pre);
      t = {
        text: '', first: ev.ts, last: ev.ts, node,
        render: () => {
          label.textContent = 'Thinking · ' + fmtDuration (Math.max (0, t.last - t.first));
          pre.textContent = t.text;
        },
      };
      if (r) {
        r.node.appendChild (node);
        r.thinking = t;
        r.text = null;
      } else {
        this.root.appendChild (node);
      }
    }
    t.text += body.text || '';
    t.last = ev.ts;
    this._schedule (t);
  }

  // ---- tools --------------------------------------------------------

  _toolCall (ev, body) {
    const r = this._run (ev);
    const args = parseJson (body.arguments);
    const name = body.name || '?';
    const status = el ('span.tool-status', { role: 'status' });
    const meta = el ('span.tool-meta');
    const out = el ('pre.output', { tabindex: '0', hidden: true });
    const more = el ('button.more', { type: 'button', hidden: true }, 'Show all');
    const result = el ('div.tool-result');
    const open = name === 'shell' || name === 'write_file' || name === 'edit_file';
    const argsView = name === 'shell' && args && typeof args.command === 'string'
      ? el ('pre.args.cmd', '$ ' + args.command)
      : el ('pre.args', args ? JSON.stringify (args, null, 2) : String (body.arguments || ''));
    const diff = diffFromCall (name, args);
    const card = el ('details.tool.running', { dataset: { seq: ev.seq, call: body.call_id, tool: name }, open },
      el ('summary',
        el ('span.tool-icon', { 'aria-hidden': 'true' }, toolIcon (name)),
        el ('span.tool-name', mcpName (name)),
        el ('span.tool-sum', callSummary (name, args)),
        status, meta),
      el ('div.tool-body',
        diff ? renderDiff (diff) : argsView,
        out, more, result));
    const c = {
      id: body.call_id, name, args, run: r, card, status, meta, out, more, result,
      output: '', expanded: false, state: 'running', seen: ev.ts,
    };
    more.addEventListener ('click', () => {
      c.expanded = !c.expanded;
      this._renderOutput (c);
    });
    this.calls.set (body.call_id, c);
    this._cardState (c, 'running');
    this._add (ev, card);
  }

  _cardState (c, state, detail) {
    c.state = state;
    c.card.classList.remove ('running', 'ok', 'error', 'refused', 'waiting', 'interrupted');
    c.card.classList.add (state);
    clear (c.status);
    const labels = {
      running: 'running', ok: 'ok', error: 'error', refused: 'refused', waiting: 'waiting for approval',
      interrupted: 'not finished',
    };
    append (c.status, [
      state === 'running' ? el ('span.spinner', { 'aria-hidden': 'true' }) : null,
      labels [state] || state,
      detail || '',
    ]);
  }

  _renderOutput (c) {
    const lines = c.output.split ('\n');
    if (lines.length && lines [lines.length - 1] === '')
      lines.pop ();
    const long = lines.length > OUTPUT_LINES;
    c.out.hidden = !c.output;
    c.out.textContent = long && !c.expanded ? lines.slice (-OUTPUT_LINES).join ('\n') : c.output;
    c.more.hidden = !long;
    c.more.textContent = c.expanded ? 'Show last ' + OUTPUT_LINES + ' lines' : 'Show all ' + lines.length + ' lines';
    c.out.classList.toggle ('clipped', long && !c.expanded);
  }

  _toolOutput (ev, body) {
    const c = this.calls.get (body.call_id);
    if (!c)
      return this._generic (ev, body);
    if (body.elided)
      c.output += '\n… ' + body.elided + ' bytes not kept …\n';
    c.output += body.text || '';
    if (c.output.length > OUTPUT_KEEP)
      c.output = '…\n' + c.output.slice (-OUTPUT_KEEP);
    c.streamed = true;
    if (c.outFrame)
      return;
    c.render = () => { c.outFrame = false; this._renderOutput (c); };
    c.outFrame = true;
    this._schedule (c);
  }

  _toolResult (ev, body) {
    const c = this.calls.get (body.call_id);
    if (!c)
      return this._generic (ev, body);
    const state = body.refused ? 'refused' : body.ok ? 'ok' : 'error';
    this._cardState (c, state);
    clear (c.meta);
    append (c.meta, [
      body.exit_code !== undefined ? el ('span.exit', 'exit ' + body.exit_code) : null,
      body.duration_ms !== undefined ? el ('span.dur', fmtDuration (body.duration_ms)) : null,
    ]);
    clear (c.result);
    if (body.refused) {
      append (c.result, [
        el ('p.refusal', 'Refused by the approval policy ', el ('strong', body.policy || '?'), '.'),
        body.fix ? el ('p.fix', 'Allow it: ', el ('code', body.fix)) : null,
      ]);
    }
    if (!c.streamed && body.output) {
      c.output = body.output.length > OUTPUT_KEEP ? '…\n' + body.output.slice (-OUTPUT_KEEP) : body.output;
      this._renderOutput (c);
    } else if (!c.streamed && !body.refused) {
      c.result.appendChild (el ('p.empty', 'no output'));
    }
    if ((state !== 'ok' && !body.refused) || c.name === 'shell')
      c.card.open = true;
    c.card.dataset.seqResult = ev.seq;
    if (body.mutating || WRITE_TOOLS.has (c.name))
      this.hooks.onChange && this.hooks.onChange ('write', ev);
  }

  // ---- approvals ----------------------------------------------------

  _approvalRequested (ev, body) {
    if (body.kind === 'budget')
      return this._budgetRequested (ev, body);
    if (body.kind === 'elicitation')
      return this._elicitRequested (ev, body);
    const args = parseJson (body.arguments);
    const feedback = el ('textarea.feedback', { rows: 2, placeholder: 'Feedback for the model (optional)',
                                                'aria-label': 'Feedback for the model' });
    const scope = el ('select.scope', { 'aria-label': 'Scope' },
      el ('option', { value: 'once' }, 'This call only'),
      el ('option', { value: 'session' }, 'For this session'),
      el ('option', { value: 'always' }, 'Always'));
    const approve = el ('button.approve', { type: 'button' }, 'Approve');
    const reject = el ('button.reject', { type: 'button' }, 'Reject');
    const outcome = el ('div.outcome', { role: 'status', 'aria-live': 'polite' });
    const controls = el ('div.controls', feedback, el ('div.actions', scope, approve, reject));
    const diff = body.diff || diffFromCall (body.tool, args);
    // the summary line only when it says more than what is shown below it
    const shown = diff || (body.tool === 'shell' && args && typeof args.command === 'string' ? '$ ' + args.command
      : args ? JSON.stringify (args, null, 2) : String (body.arguments || ''));
    const deadline = body.deadline_at
      ? el ('span.deadline', (body.default_outcome === 'approve' ? 'approves' : 'rejects') + ' itself at '
            + fmtTime (body.deadline_at))
      : null;
    const card = el ('div.approval.pending', { dataset: { seq: ev.seq, interaction: body.interaction_id,
                                                          call: body.call_id }, role: 'group',
                                               'aria-label': 'Approval needed: ' + body.tool },
      el ('div.approval-head',
        el ('span.badge', 'Approval needed'),
        el ('span.tool-icon', { 'aria-hidden': 'true' }, toolIcon (body.tool)),
        el ('strong', mcpName (body.tool)),
        body.risk ? el ('span.risk.risk-' + body.risk, body.risk + ' risk') : null,
        deadline),
      body.summary && !shown.includes (body.summary) ? el ('div.summary', body.summary) : null,
      diff ? renderDiff (diff) : el ('pre.args', shown),
      controls, outcome);
    const a = { id: body.interaction_id, card, controls, outcome, feedback, scope, approve, reject,
                status: 'pending', body };
    const send = async (decision) => {
      approve.disabled = reject.disabled = true;
      try {
        await this.hooks.resolve (a.id, decision, feedback.value.trim (), scope.value);
      } catch (e) {
        approve.disabled = reject.disabled = false;
      }
    };
    approve.addEventListener ('click', () => send ('approve'));
    reject.addEventListener ('click', () => send ('reject'));
    feedback.addEventListener ('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault ();
        send ('approve');
      }
    });
    this.approvals.set (a.id, a);
    const c = this.calls.get (body.call_id);
    if (c && c.state === 'running') {
      this._cardState (c, 'waiting');
      c.card.open = false;              // the approval card above shows the call
    }
    // above the tool card it is about, where the eye comes first: the
    // question before the call it lets run (and its output)
    if (c && c.card.parentNode) {
      card.dataset.seq = ev.seq;
      c.card.parentNode.insertBefore (card, c.card);
      if (c.run) {
        c.run.text = null;
        c.run.thinking = null;
      }
    } else {
      this._add (ev, card);
    }
  }

  // a run that reached a budget asks whether it goes on (budget.js)
  _budgetRequested (ev, body) {
    const a = budgetCard (ev, body,
      (decision, raise) => this.hooks.resolve (body.interaction_id, decision, '', 'once', raise));
    this.approvals.set (a.id, a);
    this._add (ev, a.card);
  }

  // an MCP server asks the person for values (elicit.js)
  _elicitRequested (ev, body) {
    const a = elicitCard (ev, body,
      (decision, more) => this.hooks.resolve (body.interaction_id, decision, '', 'once', null, more));
    this.approvals.set (a.id, a);
    this._add (ev, a.card);
  }

  _budgetNote (ev, body) {
    this._add (ev, budgetEntry (ev.kind, body));
  }

  _approvalResolved (ev, body) {
    const a = this.approvals.get (body.interaction_id);
    if (!a)
      return this._generic (ev, body);
    this.resolveCard (a, { ...body, resolved_at: ev.ts }, true);
    const c = this.calls.get (body.call_id || a.body.call_id);
    if (c && c.state === 'waiting')
      this._cardState (c, 'running');
  }

  // Shows an interaction's outcome on its card: at once from the
  // interact.resolve reply, then from the tape's approval.resolved, which
  // wins, so that a reload shows the very same card.
  resolveCard (a, r, fromTape) {
    if (a.fromTape)
      return;
    a.fromTape = !!fromTape;
    a.card.classList.remove (a.status);
    a.status = r.status || (r.decision === 'approve' ? 'approved' : 'rejected');
    a.card.classList.remove ('pending');
    a.card.classList.add (a.status);
    a.controls.remove ();
    clear (a.outcome);
    const who = r.resolved_by || '?';
    append (a.outcome, [
      el ('span.verdict', a.status === 'expired' ? 'Expired → ' + (r.decision || '') : a.status),
      ' by ', el ('strong.who', who),
      r.resolved_at ? ' at ' + fmtTime (r.resolved_at) : '',
      r.scope && r.scope !== 'once' ? ' · scope ' + r.scope : '',
      r.raise ? ' · raised by ' + budgetAmount (a.body.budget, r.raise) : '',
      r.action ? ' · ' + r.action + (r.content ? ' ' + r.content : '') : '',
      r.feedback ? el ('div.fb', '“' + r.feedback + '”') : null,
    ]);
    const deadline = a.card.querySelector ('.deadline');
    if (deadline)
      deadline.remove ();
    const badge = a.card.querySelector ('.badge');
    if (badge)
      badge.textContent = a.body && a.body.kind === 'budget' ? 'Budget'
        : a.body && a.body.kind === 'elicitation' ? 'Question' : 'Approval';
  }

  pendingApprovals () {
    return [...this.approvals.values ()].filter (a => a.status === 'pending');
  }

  // ---- prompts and the queue ----------------------------------------

  _prompt (ev, body) {
    const node = this._add (ev, el ('div.user', el ('div.bubble', body.text || '', promptImages (ev.session_id, body.images))));
    this.history.onPrompt (ev, node);
  }

  _promptQueued (ev, body) {
    const label = body.mode === 'steer' ? 'steer · waiting for the next step'
      : 'queued' + (body.position ? ' #' + body.position : '') + (body.reason ? ' · ' + body.reason : '');
    const again = this.queued.get (body.prompt_id);
    if (again) {
      // a steer the run did not take, given back to the queue
      again.tag.textContent = label;
      again.mode = body.mode;
      again.node.classList.toggle ('steer-wait', body.mode === 'steer');
      return;
    }
    const rm = el ('button.link', { type: 'button', 'aria-label': 'Remove queued prompt' }, 'Remove');
    const tag = el ('span.tag', label);
    const node = el ('div.user.queued', { dataset: { prompt: body.prompt_id } },
      el ('div.bubble', body.text || ''), el ('div.qmeta', tag, rm));
    node.classList.toggle ('steer-wait', body.mode === 'steer');
    rm.addEventListener ('click', () => this.hooks.removeQueued (body.prompt_id));
    this.queued.set (body.prompt_id, { node, tag, rm, mode: body.mode, text: body.text });
    node.dataset.seq = ev.seq;
    this.root.appendChild (node);      // at the bottom, where the next turn begins
  }

  _promptGone (ev, body, how) {
    const q = this.queued.get (body.prompt_id);
    if (!q)
      return this._generic (ev, body);
    q.rm.remove ();
    q.node.classList.add (how);
    q.tag.textContent = how === 'dequeued' ? 'started run ' + shortId (body.run_id)
      : how === 'steered' ? 'joined the run' : 'removed';
    if (body.reason)
      q.tag.title = body.reason;
    if (how === 'dequeued')
      q.node.remove ();                 // the run's own `prompt` entry shows the text
    this.queued.delete (body.prompt_id);
  }

  _promptSteered (ev, body) {
    const q = this.queued.get (body.prompt_id);
    if (q) {
      q.node.remove ();
      this.queued.delete (body.prompt_id);
    }
    this._add (ev, el ('div.user.steer', el ('div.bubble', body.text || ''),
      el ('div.qmeta', el ('span.tag', 'steer · joined at step ' + body.step))));
  }

  _queueState (ev, body, paused) {
    const parts = [paused ? 'Queue paused' : 'Queue resumed'];
    if (body.reason)
      parts.push (' (' + body.reason + ')');
    if (body.queued)
      parts.push (' · ' + body.queued + ' waiting');
    const btn = paused && this.hooks.resumeQueue
      ? el ('button.link', { type: 'button', onclick: () => this.hooks.resumeQueue () }, 'Resume') : null;
    this._quiet (ev, el ('span', { class: paused ? 'warn' : '' }, parts.join ('')), ' ', btn);
  }

  // ---- the rest -----------------------------------------------------

  _usage (ev, body) {
    const r = this._run (ev);
    const i = Number (body.input_tokens) || 0;
    const o = Number (body.output_tokens) || 0;
    const known = body.input_tokens !== undefined;
    this.totals.tokensKnown = this.totals.tokensKnown || known;
    this.totals.input += i;
    this.totals.output += o;
    this.totals.steps++;
    if (body.context_tokens)
      this.totals.context = Number (body.context_tokens);
    if (body.context_window)
      this.totals.window = Number (body.context_window);
    if (r) {
      r.input += i;
      r.output += o;
      r.tokensKnown = r.tokensKnown || known;
      r.steps++;
      this._pill (r);
    }
  }

  _session (ev, body, created) {
    const s = body.session || {};
    this.session = s.session_id ? s : this.session;
    if (created) {
      // what the entry says, so that a replay renders the same (the
      // header names the effective provider and model)
      this._quiet (ev, 'Session created on ', el ('code', s.workspace || '?'),
        ' · ', s.provider ? s.provider + ' / ' : '', s.model || 'default model', ' · policy ', s.approval_policy || 'default',
        ' · network ', s.network ? 'on' : 'off');
      return;
    }
    const changed = Array.isArray (body.changed) ? body.changed : [];
    const what = changed.length
      ? changed.map (f => f === 'network' ? 'network = ' + (s.network ? 'on' : 'off')
        : typeof s [f] === 'string' || typeof s [f] === 'number' ? f + ' = ' + s [f] : f).join (', ')
      : 'status ' + (s.status || '');
    this._quiet (ev, 'Session updated: ' + what);
  }

  _compacted (ev, body) {
    const d = el ('details.compacted', { dataset: { seq: ev.seq } },
      el ('summary', el ('span.rule-label', 'Context compacted'),
        ' · ' + (body.method || '') + ' · ' + fmtTokens (body.tokens_before) + ' → '
        + fmtTokens (body.tokens_after) + ' tokens · through #' + body.through_seq),
      el ('div.compact-summary', renderMarkdown (body.summary || '')));
    this._add (ev, d);
  }

  _instructions (ev, body) {
    const paths = Array.isArray (body.paths) ? body.paths : [];
    this._quiet (ev, 'Instructions loaded from ',
      ...paths.flatMap ((p, k) => [k ? ', ' : '', el ('code', p)]),
      ' · ' + (Number (body.bytes) || 0) + ' bytes', body.truncated ? ' (truncated at the cap)' : '');
  }

  // The work tree recorded after a step (docs/checkpoints.md): one quiet
  // line, the first few paths named; the rest are in `switchboard
  // checkpoints`.
  _checkpoint (ev, body) {
    this.history.onCheckpoint (ev, body);
    const changed = Array.isArray (body.changed) ? body.changed : [];
    const n = Number (body.files) || changed.length;
    const skipped = Array.isArray (body.skipped) ? body.skipped.length : 0;
    const what = body.first ? 'start' : n + (n === 1 ? ' file' : ' files');
    this._quiet (ev, 'checkpoint · ' + what,
      ...changed.slice (0, 3).flatMap ((p, k) => [k ? ', ' : ' · ', el ('code', String (p))]),
      n > 3 ? ', …' : '', skipped ? ' · ' + skipped + ' too large to record' : '');
  }

  _error (ev, body) {
    this._add (ev, el ('div.tape-error', { role: 'alert' },
      el ('strong', body.code || 'error'), ': ', body.message || ''));
  }

  _quota (ev, body) {
    this._add (ev, el ('div.tape-error.quota', el ('strong', 'Tape quota reached'), ': ', body.message || '',
      ' (' + fmtTokens (body.used) + 'B of ' + fmtTokens (body.quota) + 'B)'));
  }
}

// Kinds that deliberately show nothing of their own: turn boundaries are
// structure (the run's section is the turn), and reasoning.state is opaque
// provider data for the next model call.
function nothing () {}

const HANDLERS = {
  'session.created': function (ev, b) { this._session (ev, b, true); },
  'session.updated': function (ev, b) { this._session (ev, b, false); },
  'prompt': Transcript.prototype._prompt,
  'run.status': Transcript.prototype._runStatus,
  'turn.begin': function (ev) { this._run (ev); },
  'turn.end': nothing,
  'text.delta': Transcript.prototype._textDelta,
  'text.done': Transcript.prototype._textDone,
  'thinking.delta': Transcript.prototype._thinking,
  'reasoning.state': nothing,
  'tool.call': Transcript.prototype._toolCall,
  'tool.output': Transcript.prototype._toolOutput,
  'tool.result': Transcript.prototype._toolResult,
  'approval.requested': Transcript.prototype._approvalRequested,
  'approval.resolved': Transcript.prototype._approvalResolved,
  'budget.warning': Transcript.prototype._budgetNote,
  'budget.raised': Transcript.prototype._budgetNote,
  'prompt.queued': Transcript.prototype._promptQueued,
  'prompt.dequeued': function (ev, b) { this._promptGone (ev, b, 'dequeued'); },
  'prompt.removed': function (ev, b) { this._promptGone (ev, b, 'removed'); },
  'prompt.steered': Transcript.prototype._promptSteered,
  'queue.paused': function (ev, b) { this._queueState (ev, b, true); },
  'queue.resumed': function (ev, b) { this._queueState (ev, b, false); },
  'context.compacted': Transcript.prototype._compacted,
  'instructions.loaded': Transcript.prototype._instructions,
  'checkpoint': Transcript.prototype._checkpoint,
  'session.rewound': function (ev, b) { this.history.onRewound (ev, b); },
  'session.forked': function (ev, b) {
    this._session (ev, b, true);
    this.history.onForked (ev, b);
  },
  'usage': Transcript.prototype._usage,
  'error': Transcript.prototype._error,
  'tape.quota': Transcript.prototype._quota,
};
