// artifacts.js — the Artifacts panel beside Changes (docs/images.md): the
// images and files the session's tape references, oldest first, as
// `switchboard artifacts` lists them (a prompt's images and the copy a
// model got, what view_image showed, what attach_file made, what a person
// attached), each with its origin, a preview (an image; the head of a text
// file) and a download; and an Attach button that stores a file of the
// person's (POST /api/blobs/SESSION) and attaches it (session.attach).

import { el, clear } from './dom.js';
import { blobUrl, uploadBlob } from './images.js';

const PAGE = 1000;                      // session.events' page
const PREVIEW_BYTES = 4096;             // of a text file, shown
const TEXT = /^(text\/|application\/(json|x-ndjson|xml|x-yaml|javascript))/;

function size (n) {
  return n >= 1048576 ? (n / 1048576).toFixed (1) + ' MiB' : n >= 1024 ? (n / 1024).toFixed (1) + ' KiB' : n + ' B';
}

// What one tape entry references: [{ref, origin, seq, run_id, call_id}].
export function artifactsOf (ev) {
  const body = ev.body || {};
  const out = [];
  if (!['prompt', 'tool.result', 'artifact'].includes (ev.kind))
    return out;
  const origin = ev.kind === 'artifact' ? 'person' : ev.kind;
  const at = { seq: ev.seq, run_id: ev.run_id, call_id: ev.kind === 'tool.result' ? body.call_id : undefined };
  for (const im of Array.isArray (body.images) ? body.images : []) {
    out.push ({ ...at, ref: im, origin });
    if (im.sent)
      out.push ({ ...at, ref: im.sent, origin: 'sent', sent_of: im.sha256 });
  }
  if (body.artifact)
    out.push ({ ...at, ref: body.artifact, origin });
  return out;
}

export class Artifacts {
  constructor (app) {
    this.app = app;
    this.pane = document.getElementById ('pane-artifacts');
    this.seq = 0;
    this.timer = null;
    this.picker = el ('input', { type: 'file', hidden: true, id: 'attach-input',
                                 onchange: () => { this.attach ([...this.picker.files]); this.picker.value = ''; } });
    this.render (null);
  }

  // Asks again soon (an entry that may reference a blob landed).
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
      const items = [];
      let after = 0;
      for (;;) {
        const r = await this.app.conn.call ('session.events', { session_id: sid, after_seq: after, limit: PAGE });
        for (const ev of r.events || [])
          items.push (...artifactsOf (ev));
        after = r.next_after;
        if (!r.more || !(r.events || []).length)
          break;
      }
      if (seq === this.seq && sid === this.app.current)
        this.render ({ sid, items });
    } catch (e) {
      if (seq === this.seq)
        this.render ({ sid, error: e });
    } finally {
      this.pane.removeAttribute ('aria-busy');
    }
  }

  // The person's files: stored, then attached to the session, in order.
  async attach (files) {
    const sid = this.app.current;
    for (const f of files) {
      if (!sid)
        return;
      try {
        const blob = await uploadBlob (sid, f, 'file');
        await this.app.conn.call ('session.attach', { session_id: sid, sha256: blob.sha256, name: f.name || undefined });
      } catch (e) {
        this.app.error (e);
      }
    }
    this.refresh ();
  }

  render (r) {
    clear (this.pane);
    const head = el ('div.pane-head', el ('h2', 'Artifacts'),
      el ('button.small', { type: 'button', disabled: !r, onclick: () => this.picker.click (),
                            'aria-label': 'Attach a file to the session' }, 'Attach'),
      el ('button.small', { type: 'button', onclick: () => this.refresh (), 'aria-label': 'Refresh artifacts' },
        'Refresh'));
    this.pane.appendChild (head);
    this.pane.appendChild (this.picker);
    if (!r) {
      this.pane.appendChild (el ('p.empty', 'Open a session to see its images and files.'));
      return;
    }
    if (r.error) {
      this.pane.appendChild (el ('p.empty', 'Could not read the session\'s artifacts: ' + r.error.code + ': ' +
                                 r.error.message));
      return;
    }
    if (!r.items.length) {
      this.pane.appendChild (el ('p.empty', 'No images or files yet: a prompt\'s images, what the agent attaches ' +
                                 'and what you attach show here.'));
      return;
    }
    this.pane.appendChild (el ('ul.artifacts', r.items.map ((a) => this._item (r.sid, a))));
  }

  _item (sid, a) {
    const ref = a.ref || {};
    const url = blobUrl (sid, ref.sha256);
    const dims = ref.width ? ' ' + ref.width + '×' + ref.height : '';
    const name = ref.name || (ref.sha256 || '').slice (0, 12);
    const origin = (a.origin === 'sent' ? 'sent to the model' : a.origin === 'person' ? 'attached by a person'
      : a.origin === 'prompt' ? 'prompt' : 'tool ' + (a.call_id || '')) + ' · seq ' + a.seq;
    const li = el ('li.artifact', { dataset: { sha256: ref.sha256 || '', origin: a.origin } },
      el ('div.artifact-head',
        el ('a.fpath', { href: url, download: ref.name || ref.sha256, title: ref.sha256 }, name),
        el ('span.hint', ' ' + (ref.mime || '?') + dims + ' · ' + size (Number (ref.bytes) || 0))),
      el ('div.hint.artifact-origin', origin));
    if (/^image\//.test (ref.mime || ''))
      li.appendChild (el ('a.thumb', { href: url, download: ref.name || ref.sha256, title: name },
        el ('img', { src: url, alt: name, loading: 'lazy' })));
    else
    if (TEXT.test (ref.mime || '') && (Number (ref.bytes) || 0) <= 1048576) {
      const pre = el ('pre.artifact-text', '…');
      li.appendChild (pre);
      this._preview (url, pre, Number (ref.bytes) || 0);
    }
    return li;
  }

  // The head of a text file, as text (textContent: never markup).
  async _preview (url, pre, bytes) {
    try {
      const r = await fetch (url, { credentials: 'same-origin', headers: { Range: 'bytes=0-' + (PREVIEW_BYTES - 1) } });
      if (!r.ok && r.status !== 206)
        throw new Error ('HTTP ' + r.status);
      const text = (await r.text ()).slice (0, PREVIEW_BYTES);
      pre.textContent = text + (bytes > PREVIEW_BYTES ? '\n…' : '');
    } catch (e) {
      pre.textContent = 'no preview: ' + e.message;
    }
  }
}
