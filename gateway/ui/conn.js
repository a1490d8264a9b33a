// conn.js — the WebSocket to the gateway (docs/gateway.md, the protocol).
//
// One socket per tab. call() maps to {op:"call"} and resolves with the
// reply's body or rejects with {code, message, detail}. subscribe() keeps, per
// session, the last seq handed to the page: after a reconnect or a
// {op:"resync"} it subscribes again from there, and it drops any event at
// or below it, so the page sees every seq once and in order. A hole (an
// event past last+1) is filled from the tape with session.events before
// the events behind it are delivered.

const PING_MS = 15000;          // a ping this often while connected
const PONG_MS = 10000;          // no answer this long: the socket is dead
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 5000;
const CALL_TIMEOUT_MS = 30000;
const FILL_PAGE = 1000;         // events per session.events page (history, or a hole)
const SLICE = 250;              // history entries rendered between two turns of the event loop

export class Conn extends EventTarget {
  constructor (url) {
    super ();
    this.url = url;
    this.ws = null;
    this.tx = 0;
    this.pending = new Map ();          // tx -> {resolve, reject, timer, type}
    this.subs = new Map ();             // session_id -> {last, onEvent, filling, held, onResync}
    this.state = 'connecting';
    this.backoff = BACKOFF_MIN_MS;
    this.pingTimer = null;
    this.pongTimer = null;
    this.retryTimer = null;
    this.everConnected = false;
    this.tapping = null;                // {filter, onTap, live} while the Bus tab taps
  }

  start () {
    this._open ();
    window.addEventListener ('online', () => this.reconnectNow ());
  }

  _setState (state, detail) {
    this.state = state;
    this.dispatchEvent (new CustomEvent ('state', { detail: { state, ...detail } }));
  }

  _open () {
    clearTimeout (this.retryTimer);
    this._setState (this.everConnected ? 'reconnecting' : 'connecting');
    let ws;
    try {
      ws = new WebSocket (this.url);
    } catch (e) {
      this._scheduleRetry ();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      if (ws !== this.ws)
        return;
      this.everConnected = true;
      this.backoff = BACKOFF_MIN_MS;
      this._setState ('live');
      this._startPing ();
      // a session still reading its history subscribes when it is read
      for (const [sid, sub] of this.subs)
        if (!sub.filling)
          this._sendSubscribe (sid, sub);
      if (this.tapping)
        this._sendTap ();
      this.dispatchEvent (new CustomEvent ('open'));
    };
    ws.onmessage = (m) => {
      if (ws !== this.ws)
        return;
      let msg;
      try {
        msg = JSON.parse (m.data);
      } catch {
        return;
      }
      this._onMessage (msg);
    };
    ws.onclose = (ev) => {
      if (ws !== this.ws)
        return;
      this.ws = null;
      this._stopPing ();
      for (const [tx, p] of this.pending) {
        clearTimeout (p.timer);
        p.reject ({ code: 'disconnected', message: 'the connection to the server closed' });
        this.pending.delete (tx);
      }
      for (const sub of this.subs.values ())
        sub.subscribed = false;
      this._setState ('offline', { code: ev.code, reason: ev.reason });
      this._scheduleRetry ();
    };
    ws.onerror = () => { /* onclose follows */ };
  }

  _scheduleRetry () {
    clearTimeout (this.retryTimer);
    const delay = this.backoff * (0.75 + Math.random () * 0.5);
    this.backoff = Math.min (BACKOFF_MAX_MS, this.backoff * 2);
    this.retryTimer = setTimeout (() => this._open (), delay);
    this._setState ('reconnecting', { in_ms: Math.round (delay) });
  }

  reconnectNow () {
    if (this.ws && this.ws.readyState <= 1)
      return;
    this.backoff = BACKOFF_MIN_MS;
    this._open ();
  }

  // Drops the socket (a test or a person forcing a reconnect).
  drop () {
    if (this.ws)
      this.ws.close ();
  }

  _startPing () {
    this._stopPing ();
    this.pingTimer = setInterval (() => {
      this._send ({ op: 'ping', tx: String (++this.tx) });
      clearTimeout (this.pongTimer);
      this.pongTimer = setTimeout (() => {
        // no answer: the socket is half dead; start over
        if (this.ws)
          this.ws.close ();
      }, PONG_MS);
    }, PING_MS);
  }

  _stopPing () {
    clearInterval (this.pingTimer);
    clearTimeout (this.pongTimer);
  }

  _send (obj) {
    if (!this.ws || this.ws.readyState !== 1)
      return false;
    this.ws.send (JSON.stringify (obj));
    return true;
  }

  _onMessage (msg) {
    clearTimeout (this.pongTimer);
    switch (msg.op) {
    case 'reply':
    case 'error': {
      const p = this.pending.get (String (msg.tx));
      if (!p) {
        if (msg.op === 'error' && msg.tx === undefined)
          this.dispatchEvent (new CustomEvent ('servererror', { detail: msg }));
        return;
      }
      this.pending.delete (String (msg.tx));
      clearTimeout (p.timer);
      if (msg.op === 'reply')
        p.resolve (msg.body || {}, msg.type);
      else
        p.reject ({ code: msg.code || 'error', message: msg.message || 'error', type: p.type, detail: msg.detail });
      return;
    }
    case 'event':
      this._onEvent (msg);
      return;
    case 'tap':
      // only once the server said `tapping`: what comes before is the
      // previous filter's
      if (this.tapping && this.tapping.live)
        this.tapping.onTap (msg);
      return;
    case 'resync': {
      if (msg.tap) {
        // too slow for the tap: say so, and tap again
        if (this.tapping) {
          this.tapping.onTap ({ op: 'tap', gap: true });
          this._sendTap ();
        }
        return;
      }
      const sub = this.subs.get (msg.session_id);
      if (sub) {
        sub.subscribed = false;
        this._sendSubscribe (msg.session_id, sub);
      }
      return;
    }
    default:
    }
  }

  _onEvent (ev) {
    const sub = this.subs.get (ev.session_id);
    if (!sub)
      return;
    const seq = Number (ev.seq);
    if (sub.filling) {
      sub.held.push (ev);
      return;
    }
    if (seq <= sub.last)
      return;
    if (seq > sub.last + 1) {
      sub.held.push (ev);
      this._fill (ev.session_id, sub);
      return;
    }
    sub.last = seq;
    sub.onEvent (ev);
  }

  // Reads the tape from sub.last until the held events continue it.
  async _fill (sid, sub) {
    sub.filling = true;
    try {
      for (;;) {
        const page = await this.call ('session.events',
          { session_id: sid, after_seq: sub.last, limit: FILL_PAGE });
        for (const e of page.events || []) {
          const ev = e.event || e;
          if (Number (ev.seq) === sub.last + 1) {
            sub.last++;
            sub.onEvent ({ op: 'event', ...ev });
          }
        }
        if (!page.more || !(page.events || []).length)
          break;
      }
    } catch (e) {
      // the next reconnect or resync starts from sub.last again
    }
    sub.filling = false;
    const held = sub.held.sort ((a, b) => a.seq - b.seq);
    sub.held = [];
    for (const ev of held)
      this._onEvent (ev);
  }

  call (type, body = {}, { timeout = CALL_TIMEOUT_MS } = {}) {
    return new Promise ((resolve, reject) => {
      const tx = String (++this.tx);
      if (!this._send ({ op: 'call', tx, type, body })) {
        reject ({ code: 'disconnected', message: 'not connected to the server', type });
        return;
      }
      const timer = setTimeout (() => {
        this.pending.delete (tx);
        reject ({ code: 'timeout', message: type + ': no answer within ' + timeout / 1000 + ' s', type });
      }, timeout);
      this.pending.set (tx, { resolve, reject, timer, type });
    });
  }

  // Subscribes to a session's tape from after_seq; onEvent(ev) gets each
  // seq once, in order.
  //
  // The history comes first, in pages of session.events (one frame holds a
  // thousand entries, where the subscription's replay sends one frame an
  // entry); the subscription then starts from the last entry read, and its
  // own replay covers what was appended meanwhile.
  subscribe (sid, afterSeq, onEvent) {
    const sub = { last: Number (afterSeq) || 0, onEvent, filling: true, held: [], subscribed: false };
    this.subs.set (sid, sub);
    this._history (sid, sub);
    return sub;
  }

  async _history (sid, sub) {
    try {
      for (;;) {
        const page = await this.call ('session.events', { session_id: sid, after_seq: sub.last, limit: FILL_PAGE });
        if (this.subs.get (sid) !== sub)
          return;
        const events = page.events || [];
        for (let k = 0; k < events.length; k++) {
          const ev = events [k].event || events [k];
          if (Number (ev.seq) === sub.last + 1) {
            sub.last++;
            sub.onEvent ({ op: 'event', ...ev });
          }
          // a long history gives the page a turn now and then: it never freezes
          if (k % SLICE === SLICE - 1) {
            await new Promise (r => setTimeout (r, 0));
            if (this.subs.get (sid) !== sub)
              return;
          }
        }
        if (!page.more || !events.length)
          break;
      }
    } catch (e) {
      if (e.code !== 'disconnected')
        this.dispatchEvent (new CustomEvent ('servererror', { detail: e }));
    }
    if (this.subs.get (sid) !== sub)
      return;
    sub.filling = false;
    sub.held = [];
    this._sendSubscribe (sid, sub);
  }

  // The bus tap (docs/gateway.md): one per connection, tapped again
  // after a reconnect or a slow_reader resync. onTap gets each frame of
  // this filter: the frames from the server's `tapping` answer on. Each
  // such answer is also a 'tapping' event ({filter}), and the promise
  // resolves with the first (false when the socket is down: the tap
  // starts on the next connection).
  tap (filter, onTap) {
    this.tapping = { filter: filter || '', onTap, live: false };
    return this._sendTap ();
  }

  untap () {
    if (!this.tapping)
      return;
    this.tapping = null;
    this._send ({ op: 'untap', tx: String (++this.tx) });
  }

  _sendTap () {
    const t = this.tapping;
    t.live = false;
    const tx = String (++this.tx);
    if (!this._send ({ op: 'tap', tx, filter: t.filter }))
      return Promise.resolve (false);
    return new Promise ((resolve, reject) => {
      const timer = setTimeout (() => this.pending.delete (tx), CALL_TIMEOUT_MS);
      this.pending.set (tx, {
        resolve: () => {
          if (this.tapping !== t) {
            resolve (false);            // untapped or tapped again meanwhile
            return;
          }
          t.live = true;
          this.dispatchEvent (new CustomEvent ('tapping', { detail: { filter: t.filter } }));
          resolve (true);
        },
        reject, timer, type: 'tap',
      });
    });
  }

  _sendSubscribe (sid, sub) {
    const tx = String (++this.tx);
    if (!this._send ({ op: 'subscribe', tx, session_id: sid, after_seq: sub.last }))
      return;
    const timer = setTimeout (() => this.pending.delete (tx), CALL_TIMEOUT_MS);
    this.pending.set (tx, {
      resolve: () => { sub.subscribed = true; },
      reject: (err) => this.dispatchEvent (new CustomEvent ('servererror', { detail: err })),
      timer, type: 'subscribe',
    });
  }

  unsubscribe (sid) {
    if (!this.subs.delete (sid))
      return;
    this._send ({ op: 'unsubscribe', tx: String (++this.tx), session_id: sid });
  }

  lastSeq (sid) {
    const sub = this.subs.get (sid);
    return sub ? sub.last : 0;
  }
}
