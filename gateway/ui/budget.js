// budget.js — a session's budgets as the browser shows them (docs/usage.md):
// the header's line, the transcript's budget.warning and budget.raised, and
// the card of a budget question (an interaction of kind budget), which asks
// whether a run that reached a budget goes on, and by how much.
//
// Amounts are in the budget's unit: tokens, steps, minutes, and for the cost
// micro-dollars on the wire, dollars on screen.

import { el } from './dom.js';

const UNITS = { tokens: 'tokens', cost: 'USD', steps: 'steps', minutes: 'minutes' };
const RECORD_KEYS = { tokens: 'tokens', cost: 'cost_microusd', steps: 'steps', minutes: 'minutes' };

// "1200 tokens", "$0.015000", "3 steps".
export function budgetAmount (budget, v) {
  const n = Number (v || 0);
  if (budget === 'cost')
    return '$' + (n / 1e6).toFixed (6);
  return n + ' ' + (UNITS [budget] || '');
}

// The session record's budgets on one line ('' when none), and the notice
// of one that cannot be enforced.
export function budgetLine (session) {
  const b = (session && session.budget) || {};
  const parts = [];
  for (const name of Object.keys (RECORD_KEYS))
    if (b [RECORD_KEYS [name]])
      parts.push (budgetAmount (name, b [RECORD_KEYS [name]]));
  const line = parts.length ? 'budget ' + parts.join (', ') + ' per run' : '';
  return session && session.budget_notice ? (line ? line + ' · ' : '') + 'not enforced: ' + session.budget_notice
    : line;
}

// A tape line for budget.warning and budget.raised.
export function budgetEntry (kind, body) {
  if (kind === 'budget.warning')
    return el ('div.budget-note.warning', { role: 'note' }, el ('strong', 'Budget ' + body.percent + ' %'),
      ': the run spent ' + budgetAmount (body.budget, body.spent) + ' of its ' + body.budget + ' budget of '
      + budgetAmount (body.budget, body.limit) + '.');
  return el ('div.budget-note.raised', { role: 'note' }, el ('strong', 'Budget raised'),
    ': ' + body.budget + ' to ' + budgetAmount (body.budget, body.limit) + ' (spent '
    + budgetAmount (body.budget, body.spent) + ').');
}

// What the raise field holds, in the wire's unit: a positive whole number
// (dollars for the cost, to the micro-dollar), null when empty, NaN when not
// an amount.
function raiseValue (budget, text) {
  const t = text.trim ();
  if (!t)
    return null;
  if (budget === 'cost')
    return /^\d+(\.\d{1,6})?$/.test (t) ? Math.round (Number (t) * 1e6) : NaN;
  return /^\d+$/.test (t) ? Number (t) : NaN;
}

// The card of a budget question. `resolve (decision, raise)` answers it;
// returns the card's state for the transcript's approvals map (card,
// controls, outcome, status), which resolveCard() closes.
export function budgetCard (ev, body, resolve) {
  const budget = body.budget || '?';
  const raise = el ('input.raise', { type: 'text', inputmode: 'decimal', 'aria-label': 'Raise the budget by',
                                     placeholder: 'raise by (default: the budget again)' });
  const approve = el ('button.approve', { type: 'button' }, 'Go on');
  const reject = el ('button.reject', { type: 'button' }, 'Stop the run');
  const outcome = el ('div.outcome', { role: 'status', 'aria-live': 'polite' });
  const controls = el ('div.controls', el ('label.raise-label', 'Raise by (' + (UNITS [budget] || '') + ') ', raise),
    el ('div.actions', approve, reject));
  const deadline = body.deadline_at
    ? el ('span.deadline', (body.default_outcome === 'approve' ? 'goes on' : 'stops') + ' by itself at '
          + new Date (body.deadline_at).toLocaleTimeString ())
    : null;
  const card = el ('div.approval.budget.pending', { dataset: { seq: ev.seq, interaction: body.interaction_id,
                                                                budget }, role: 'group',
                                                    'aria-label': 'Budget reached: ' + budget },
    el ('div.approval-head', el ('span.badge', 'Budget reached'), el ('strong', budget), deadline),
    el ('div.summary', 'The run spent ' + budgetAmount (budget, body.spent) + ' of its ' + budget + ' budget of '
        + budgetAmount (budget, body.limit) + '. It waits before its next model call.'),
    controls, outcome);
  const a = { id: body.interaction_id, card, controls, outcome, status: 'pending', body };
  const send = async (decision) => {
    const amount = decision === 'approve' ? raiseValue (budget, raise.value) : null;
    if (Number.isNaN (amount) || amount === 0) {
      raise.setCustomValidity ('a positive amount' + (budget === 'cost' ? ' of dollars, e.g. 2.50' : ''));
      raise.reportValidity ();
      return;
    }
    raise.setCustomValidity ('');
    approve.disabled = reject.disabled = true;
    try {
      await resolve (decision, amount);
    } catch (e) {
      approve.disabled = reject.disabled = false;
    }
  };
  approve.addEventListener ('click', () => send ('approve'));
  reject.addEventListener ('click', () => send ('reject'));
  return a;
}
