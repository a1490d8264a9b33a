// models.js — the providers and models the server has, and the provider
// and model a session runs with.
//
// llm.info (without a provider) names the server's default provider and
// lists every configured one with its default model; llm.models, asked
// per provider, lists what each offers (its /models, else its configured
// list). A session may name its own provider and model; when it does not,
// its runs use the server's default provider and that provider's default
// model: effective() resolves that by name, as the executor does.

import { el, clear } from './dom.js';

export class Models {
  constructor (conn) {
    this.conn = conn;
    this.dflt = '';                     // the server's default provider
    this.providers = [];                // [{name, kind, model, models: [...]}], the configuration's order
    this.listeners = [];
  }

  async load () {
    // right after serve starts the llm actor may not answer yet: try again
    // for a few seconds before the dialog falls back to the default alone
    let info;
    for (let k = 0; ; k++) {
      try {
        info = await this.conn.call ('llm.info', {});
        break;
      } catch (e) {
        if (k >= 6)
          throw e;
        await new Promise ((ok) => setTimeout (ok, 100 << k));
      }
    }
    this.dflt = info.provider || '';
    // an older server lists no providers: its default alone
    const list = Array.isArray (info.providers) && info.providers.length ? info.providers
      : [{ provider: info.provider, model: info.model }];
    this.providers = list.filter (p => p && p.provider).map (p => ({
      name: p.provider, kind: p.kind || '', model: p.model || '', models: p.model ? [p.model] : [],
    }));
    this._changed ();
    await Promise.all (this.providers.map (async (p) => {
      try {
        const r = await this.conn.call ('llm.models', { provider: p.name });
        p.models = [...new Set ([...(p.model ? [p.model] : []), ...(r.models || [])])];
      } catch (e) {
        // its default model alone, as llm.info named it
      }
    }));
    this._changed ();
  }

  onChange (fn) {
    this.listeners.push (fn);
  }

  _changed () {
    for (const fn of this.listeners)
      fn ();
  }

  find (name) {
    return this.providers.find (p => p.name === name) || null;
  }

  // {provider, model, ownProvider, ownModel}: the session's own, else the
  // server's default provider, else that provider's default model.
  effective (s) {
    const provider = (s && s.provider) || this.dflt;
    const p = this.find (provider);
    const model = (s && s.model) || (p && p.model) || '';
    return { provider: provider || '?', model: model || '?', ownProvider: !!(s && s.provider),
             ownModel: !!(s && s.model) };
  }

  // Fills a <select> with the providers: "server default (NAME)" (value
  // '', "default (NAME)" when short), then each by name; `value` is selected. Untouched while the
  // person has it open, or when nothing changed.
  fillProviders (sel, value, short) {
    const names = this.providers.map (p => p.name);
    if (value && !names.includes (value))
      names.push (value);               // named by the session, gone from the server
    this._fill (sel, value || '', [['', (short ? 'default' : 'server default') + (this.dflt ? ' (' + this.dflt + ')' : '')],
      ...names.map (n => [n, n])]);
  }

  // The models of `provider` ('' for the server's default): "PROVIDER
  // default (MODEL)" (value ''), then each the provider offers.
  fillModels (sel, provider, value) {
    const p = this.find (provider || this.dflt);
    const names = p ? [...p.models] : [];
    if (value && !names.includes (value))
      names.push (value);
    const label = p && p.model ? 'default (' + p.model + ')' : 'default';
    this._fill (sel, value || '', [['', label], ...names.map (n => [n, n])]);
  }

  _fill (sel, value, options) {
    const key = JSON.stringify ([options, value]);
    if (document.activeElement === sel || sel.dataset.key === key)
      return;
    sel.dataset.key = key;
    clear (sel);
    for (const [v, label] of options)
      sel.appendChild (el ('option', { value: v }, label));
    sel.value = value;
  }
}
