// bus.js — the Bus tab: a live view of the bus tap (op tap, docs/gateway.md).
// One line per message (time, plane, type, from, key, size) that opens to
// its JSON; a type or topic prefix filter (the gateway applies it), pause
// and clear. The DOM keeps the last MAX_LINES lines. Tapping runs only
// while the tab is shown. Every piece of message text goes in as text.

import { el, clear } from './dom.js';

const MAX_LINES = 2000;
const FILTER_DELAY_MS = 300;
const COLUMN_MAX_CH = 64;       // a type or sender wider than this is cut after all

// hh:mm:ss.mmm, local time
function clock (ts) {
  if (!ts)
    return '';
  const d = new Date (Number (ts));
  const two = (n) => String (n).padStart (2, '0');
  return two (d.getHours ()) + ':' + two (d.getMinutes ()) + ':' + two (d.getSeconds ()) + '.'
    + String (d.getMilliseconds ()).padStart (3, '0');
}

export class Bus {
  constructor (app) {
    this.app = app;
    this.pane = document.getElementById ('pane-bus');
    this.paused = false;
    this.held = [];                     // frames that came while paused (bounded)
    this.dropped = 0;                   // frames past the bound while paused
    this.timer = null;
    this.queue = [];                    // frames waiting for the next animation frame (bounded)
    this.frame = 0;
    this.filter = el ('input.bus-filter', { type: 'search', placeholder: 'type or topic prefix',
      'aria-label': 'Filter the bus by type or topic prefix', spellcheck: 'false',
      oninput: () => {
        clearTimeout (this.timer);
        this.timer = setTimeout (() => this.start (), FILTER_DELAY_MS);
      } });
    this.pauseBtn = el ('button.small', { type: 'button', onclick: () => this.togglePause () }, 'Pause');
    this.status = el ('span.note.bus-status', '');
    this.list = el ('div.bus-lines', { role: 'log', 'aria-live': 'off' });
    this.widths = { type: 0, from: 0 };     // the widest type and sender seen, in characters
    this.pane.appendChild (el ('div.pane-head', el ('h2', 'Bus'),
      el ('span.bus-tools', this.pauseBtn, ' ',
        el ('button.small', { type: 'button', onclick: () => this.clearLines () }, 'Clear'))));
    this.pane.appendChild (el ('div.bus-bar', this.filter, this.status));
    this.pane.appendChild (this.list);
  }

  // The status says `live` (and data-tapping holds the filter) once the
  // server has confirmed the tap: from then on every line is this filter's.
  start () {
    if (!this.listening) {
      this.listening = true;
      this.app.conn.addEventListener ('tapping', (e) => {
        this.status.dataset.tapping = e.detail.filter;
        if (!this.paused)
          this.status.textContent = 'live';
      });
    }
    delete this.status.dataset.tapping;
    this.status.textContent = 'starting';
    this.app.conn.tap (this.filter.value.trim (), (f) => this.onTap (f)).catch (() => {});
  }

  stop () {
    clearTimeout (this.timer);
    this.app.conn.untap ();
    delete this.status.dataset.tapping;
    this.status.textContent = 'stopped';
  }

  togglePause () {
    this.paused = !this.paused;
    this.pauseBtn.textContent = this.paused ? 'Resume' : 'Pause';
    if (!this.paused) {
      for (const f of this.held)
        this.add (f);
      if (this.dropped)
        this.add ({ op: 'tap', gap: true, skipped: this.dropped });
      this.held = [];
      this.dropped = 0;
      this.status.textContent = 'live';
    }
  }

  clearLines () {
    clear (this.list);
    this.queue = [];
    this.held = [];
    this.dropped = 0;
  }

  onTap (f) {
    if (this.paused) {
      if (this.held.length >= MAX_LINES) {
        this.held.shift ();
        this.dropped++;
      }
      this.held.push (f);
      this.status.textContent = 'paused · ' + (this.held.length + this.dropped) + ' waiting';
      return;
    }
    this.add (f);
  }

  // Lines are added once a frame, however fast the bus is.
  add (f) {
    this.queue.push (f);
    if (this.queue.length > MAX_LINES)
      this.queue.shift ();
    if (!this.frame)
      this.frame = requestAnimationFrame (() => this.flush ());
  }

  flush () {
    this.frame = 0;
    const stick = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 4;
    const batch = document.createDocumentFragment ();
    for (const f of this.queue)
      batch.appendChild (f.gap ? this.gapLine (f) : this.line (f));
    this.queue = [];
    this.list.appendChild (batch);
    this._columns ();
    while (this.list.childElementCount > MAX_LINES)
      this.list.removeChild (this.list.firstChild);
    if (stick)
      this.list.scrollTop = this.list.scrollHeight;
  }

  // The type and sender columns fit the widest of each seen so far (in ch
  // of the monospace font, style.css), so that no type is cut.
  _seen (type, from) {
    this.widths.type = Math.min (COLUMN_MAX_CH, Math.max (this.widths.type, String (type).length));
    this.widths.from = Math.min (COLUMN_MAX_CH, Math.max (this.widths.from, String (from).length));
  }

  _columns () {
    const set = (name, n) => {
      const v = (n + 1) + 'ch';
      if (this.list.style.getPropertyValue (name) !== v)
        this.list.style.setProperty (name, v);
    };
    set ('--bus-type-w', Math.max (this.widths.type, 4));
    set ('--bus-from-w', Math.max (this.widths.from, 4));
  }

  gapLine (f) {
    return el ('div.bus-gap', f.skipped
      ? f.skipped + ' messages left out while paused'
      : 'the tap fell behind and started again: messages were lost');
  }

  line (f) {
    const h = f.header || {};
    const key = f.plane === 'evt' ? f.topic : (h.corr ? 'corr ' + h.corr : f.peer);
    const d = el ('details.bus-line', { dataset: { type: h.type || '' } });
    this._seen (h.type || '?', h.from || '-');
    d.appendChild (el ('summary',
      el ('span.bus-time', clock (f.ts)),
      el ('span.bus-plane', f.plane || ''),
      el ('span.bus-type', { title: h.type || '' }, h.type || '?'),
      el ('span.bus-from', { title: h.from || '' }, h.from || '-'),
      el ('span.bus-key', { title: key || '' }, key || ''),
      el ('span.bus-size', String (f.size ?? ''))));
    // the JSON is built only when the line is opened
    d.addEventListener ('toggle', () => {
      if (d.open && !d.querySelector ('pre'))
        d.appendChild (el ('pre.bus-json', JSON.stringify ({ plane: f.plane, peer: f.peer, topic: f.topic,
          size: f.size, header: f.header, body: f.body }, null, 2)));
    });
    return d;
  }
}
