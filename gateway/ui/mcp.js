// mcp.js — "Connect" for the MCP servers that ask for OAuth (docs/mcp.md,
// "Authorization"): a small list at the foot of the sidebar, shown only
// when the executor has HTTP servers. Connect asks the executor for the
// authorization URL (exec.mcp.login, the redirect being this gateway's
// /oauth/callback), opens it in a new tab for the person to approve, and
// watches exec.mcp.list until the server shows as authorized. The tokens
// stay in the control plane: the page never sees one.

import { el, clear } from './dom.js';

const WATCH_MS = 2000;          // exec.mcp.list is asked this often while a login waits
const WATCH_MAX_MS = 10 * 60 * 1000;   // as long as the executor keeps a login

export class McpConnect {
  constructor (app) {
    this.app = app;
    this.box = el ('section.mcp-connect', { 'aria-label': 'MCP servers', hidden: true });
    document.getElementById ('sidebar').appendChild (this.box);
    this.waiting = new Set ();
    this.timer = null;
  }

  async refresh () {
    let r;
    try {
      r = await this.app.conn.call ('exec.mcp.list', {});
    } catch {
      return;                   // no executor yet: the next open asks again
    }
    this.render ((r.servers || []).map (s => s.server || s).filter (s => s.transport === 'http'));
  }

  render (servers) {
    clear (this.box);
    this.box.hidden = servers.length === 0;
    if (!servers.length)
      return;
    this.box.appendChild (el ('h2', 'MCP servers'));
    const ul = el ('ul.mcp-servers');
    for (const s of servers) {
      // Not authorized, and not known to do without: a server that never
      // started may ask for OAuth at its first request.
      const needs = !s.authorized && (s.state !== 'running' || /authorization/.test (s.error || ''));
      const li = el ('li', { dataset: { server: s.name } }, el ('span.mcp-name', s.name), ' ');
      if (s.authorized && !this.waiting.has (s.name))
        li.appendChild (el ('span.mcp-state', 'connected'));
      else if (this.waiting.has (s.name))
        li.appendChild (el ('span.mcp-state', 'waiting for your approval…'));
      else if (!needs)
        li.appendChild (el ('span.mcp-state', s.state || ''));
      if (needs || s.authorized || this.waiting.has (s.name))
        li.appendChild (el ('button.small', { type: 'button', onclick: () => this.connect (s.name, s.authorized_at || 0) },
          s.authorized ? 'Reconnect' : 'Connect'));
      ul.appendChild (li);
    }
    this.box.appendChild (ul);
  }

  // Opened at the click, filled once the executor answers: a tab opened
  // later than the click would be blocked as a pop-up.
  async connect (name, before) {
    const tab = window.open ('about:blank', '_blank');
    try {
      const r = await this.app.conn.call ('exec.mcp.login',
        { server: name, redirect_uri: location.origin + '/oauth/callback' });
      if (!r.url) {                     // client credentials: authorized at once
        if (tab)
          tab.close ();
        return this.refresh ();
      }
      if (tab) {
        tab.opener = null;
        tab.location = r.url;
      } else
        window.open (r.url, '_blank', 'noopener');
      this.watch (name, before);
    } catch (e) {
      if (tab)
        tab.close ();
      this.app.error (e);
    }
  }

  watch (name, before) {
    this.waiting.add (name);
    const until = Date.now () + WATCH_MAX_MS;
    const tick = async () => {
      let r;
      try {
        r = await this.app.conn.call ('exec.mcp.list', {});
      } catch { r = null; }
      const s = r && (r.servers || []).map (x => x.server || x).find (x => x.name === name);
      if ((s && s.authorized && (s.authorized_at || 0) !== before) || Date.now () > until)
        this.waiting.delete (name);
      else
        setTimeout (tick, WATCH_MS);
      if (r)
        this.render ((r.servers || []).map (x => x.server || x).filter (x => x.transport === 'http'));
    };
    this.refresh ();
    setTimeout (tick, WATCH_MS);
  }
}
