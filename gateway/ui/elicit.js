// elicit.js — an MCP server's question to the person (an interaction of kind
// elicitation, docs/mcp.md): a form built from the requested schema (a flat
// object of strings, enums, numbers, integers and booleans, each with its
// default), answered Accept (with the values), Decline or Cancel.
//
// The browser checks what it can (required, number, integer, bounds); the
// interact actor checks the content again against the stored schema and
// refuses it `invalid` naming the field, which the card then shows.

import { el, parseJson } from './dom.js';

// One property's input: a select for an enum or a boolean, a number input
// for numbers, a text input for strings; its default already in.
function field (name, p, required) {
  const label = p.title || name;
  const attrs = { name, 'aria-label': label };
  let input;
  if (Array.isArray (p.enum)) {
    input = el ('select', attrs, ...(required ? [] : [el ('option', { value: '' }, '(none)')]),
      ...p.enum.map ((v, k) => el ('option', { value: v }, (p.enumNames && p.enumNames [k]) || v)));
    input.value = p.default !== undefined ? p.default : (required ? p.enum [0] : '');
  } else if (p.type === 'boolean') {
    input = el ('input', { ...attrs, type: 'checkbox' });
    input.checked = p.default === true;
  } else if (p.type === 'number' || p.type === 'integer') {
    input = el ('input', { ...attrs, type: 'number', step: p.type === 'integer' ? '1' : 'any' });
    if (p.minimum !== undefined) input.min = p.minimum;
    if (p.maximum !== undefined) input.max = p.maximum;
    if (p.default !== undefined) input.value = String (p.default);
  } else {
    input = el ('input', { ...attrs, type: 'text' });
    if (p.maxLength !== undefined) input.maxLength = p.maxLength;
    if (p.default !== undefined) input.value = p.default;
  }
  input.required = required && p.type !== 'boolean';
  const row = el ('label.elicit-field', { dataset: { field: name } },
    el ('span.elicit-name', label + (required ? ' *' : '')), input,
    p.description ? el ('span.elicit-desc', p.description) : null);
  return { name, p, input, row };
}

// The value of one field for the content, undefined when left empty (the
// schema's default, if any, is then the server's).
function value (f) {
  const { p, input } = f;
  if (p.type === 'boolean')
    return input.checked;
  if (input.value === '')
    return undefined;
  if (p.type === 'number' || p.type === 'integer')
    return Number (input.value);
  return input.value;
}

// The card. `resolve (decision, more)` answers it (more: action, content);
// returns the transcript's approvals entry (card, controls, outcome,
// status), which resolveCard() closes.
export function elicitCard (ev, body, resolve) {
  const schema = parseJson (body.schema) || {};
  const req = new Set (schema.required || []);
  const fields = Object.entries (schema.properties || {}).map (([n, p]) => field (n, p, req.has (n)));
  const form = el ('form.elicit-form', { novalidate: '' }, ...fields.map (f => f.row));
  const accept = el ('button.approve', { type: 'button' }, 'Accept');
  const decline = el ('button.reject', { type: 'button' }, 'Decline');
  const cancel = el ('button.cancel', { type: 'button' }, 'Cancel');
  const outcome = el ('div.outcome', { role: 'status', 'aria-live': 'polite' });
  const error = el ('div.elicit-error', { role: 'alert' });
  const controls = el ('div.controls', form, error, el ('div.actions', accept, decline, cancel));
  const deadline = body.deadline_at
    ? el ('span.deadline', 'cancelled by itself at ' + new Date (body.deadline_at).toLocaleTimeString ())
    : null;
  const card = el ('div.approval.elicitation.pending', { dataset: { seq: ev.seq, interaction: body.interaction_id },
                                                         role: 'group', 'aria-label': 'An MCP server asks' },
    el ('div.approval-head', el ('span.badge', 'Question'), el ('strong', body.tool || ''), deadline),
    el ('div.summary', body.summary || ''), controls, outcome);
  const a = { id: body.interaction_id, card, controls, outcome, status: 'pending', body };
  const buttons = [accept, decline, cancel];
  const send = async (decision, more) => {
    error.textContent = '';
    buttons.forEach (b => { b.disabled = true; });
    try {
      await resolve (decision, more);
    } catch (e) {
      // invalid: the field the server's schema refused, said on the card
      error.textContent = (e && e.message) || 'not answered';
      buttons.forEach (b => { b.disabled = false; });
    }
  };
  accept.addEventListener ('click', () => {
    const bad = fields.find (f => !f.input.checkValidity ());
    if (bad) {
      bad.input.reportValidity ();
      return;
    }
    const content = {};
    for (const f of fields) {
      const v = value (f);
      if (v !== undefined)
        content [f.name] = v;
    }
    send ('approve', { action: 'accept', content: JSON.stringify (content) });
  });
  decline.addEventListener ('click', () => send ('reject', { action: 'decline' }));
  cancel.addEventListener ('click', () => send ('reject', { action: 'cancel' }));
  return a;
}
