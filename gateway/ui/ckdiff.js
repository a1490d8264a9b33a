// ckdiff.js — the Changes panel's comparison of two checkpoints
// (exec.checkpoint_diff, docs/checkpoints.md): pick two of the session's
// checkpoints from a list, see each file that differs with its diff.
//
// The list comes from the checkpoint entries the transcript has applied
// (History.ckpts, rewind.js), so it needs no request of its own; the diff
// is the exec actor's, which holds the trees.

import { el, clear, fmtTime } from './dom.js';
import { renderFiles } from './panels.js';

export class CheckpointDiff {
  constructor (app) {
    this.app = app;
    this.from = el ('select#ckdiff-from', { 'aria-label': 'Compare from checkpoint' });
    this.to = el ('select#ckdiff-to', { 'aria-label': 'Compare to checkpoint' });
    this.go = el ('button#ckdiff-go.small', { type: 'button' }, 'Compare');
    this.result = el ('div#ckdiff-result', { 'aria-live': 'polite' });
    this.hint = el ('p.empty.ckdiff-hint');
    this.open = new Set ();
    this.node = el ('section.ckdiff', { 'aria-labelledby': 'ckdiff-title' },
      el ('h3#ckdiff-title', 'Compare checkpoints'),
      el ('div.ckdiff-pick', el ('label', 'from ', this.from), el ('label', 'to ', this.to), this.go),
      this.hint, this.result);
    this.go.addEventListener ('click', () => this.compare ());
    // until the person picks, the lists follow the first and the newest
    this.picked = false;
    for (const sel of [this.from, this.to])
      sel.addEventListener ('change', () => { this.picked = true; });
    this.count = -1;
    this.session = null;
    this.seq = 0;
  }

  // The transcript's checkpoints as options; the person's choice is kept,
  // else the first and the newest are chosen.
  refresh () {
    const t = this.app.transcript;
    const list = t ? t.history.ckpts : [];
    if (this.session !== this.app.current) {
      this.session = this.app.current;
      this.count = -1;
      this.picked = false;
      clear (this.result);
    }
    if (list.length === this.count)
      return;
    const keep = [this.from.value, this.to.value];
    const fresh = !this.picked;
    this.count = list.length;
    for (const s of [this.from, this.to]) {
      clear (s);
      for (const c of list)
        s.appendChild (el ('option', { value: String (c.seq_of) },
          '#' + c.seq_of + ' · ' + fmtTime (c.ts) + ' · ' + (c.first ? 'start'
            : c.files + (c.files === 1 ? ' file' : ' files') + (c.changed.length ? ' (' + c.changed [0] + ')' : ''))));
    }
    if (list.length) {
      this.from.value = fresh || !keep [0] ? String (list [0].seq_of) : keep [0];
      this.to.value = fresh || !keep [1] ? String (list [list.length - 1].seq_of) : keep [1];
    }
    this.go.disabled = list.length < 2;
    this.hint.hidden = list.length >= 2;
    this.hint.textContent = list.length ? 'One checkpoint so far: a second comes after the next step that writes.'
      : 'No checkpoints yet: the work tree is recorded at each run\'s start and after each step that writes.';
  }

  async compare () {
    const sid = this.app.current;
    const from = Number (this.from.value), to = Number (this.to.value);
    if (!sid || !from || !to)
      return;
    const seq = ++this.seq;
    this.go.disabled = true;
    this.result.setAttribute ('aria-busy', 'true');
    try {
      const r = await this.app.conn.call ('exec.checkpoint_diff', { session_id: sid, from_seq: from, to_seq: to });
      if (seq === this.seq && sid === this.app.current)
        this.render (r);
    } catch (e) {
      if (seq === this.seq)
        this.render ({ error: e });
    } finally {
      this.go.disabled = false;
      this.result.removeAttribute ('aria-busy');
    }
  }

  render (r) {
    clear (this.result);
    if (r.error) {
      this.result.appendChild (el ('p.empty.ckdiff-error', 'Could not compare: ' + r.error.code + ': '
        + r.error.message));
      return;
    }
    const files = (r.files || []).map (f => f.file || f);
    this.result.dataset.from = r.from ? r.from.seq_of : '';
    this.result.dataset.to = r.to ? r.to.seq_of : '';
    this.result.appendChild (el ('p.note.ckdiff-sum', 'Checkpoint #' + (r.from && r.from.seq_of) + ' → #'
      + (r.to && r.to.seq_of) + ' · ' + files.length + (files.length === 1 ? ' file' : ' files')
      + (r.store === 'shadow' ? ' · in the shadow repository' : '')));
    if (files.length)
      this.result.appendChild (renderFiles (files, this.open));
    else
      this.result.appendChild (el ('p.empty', 'The two checkpoints hold the same files.'));
    if (r.truncated)
      this.result.appendChild (el ('p.note', 'The list was cut at the server\'s limit.'));
  }
}
