// images.js — images in prompts (docs/images.md): paste, drop or pick
// files in the composer, each uploaded at once to POST /api/blobs/SESSION
// (the cookie, and the X-Switchboard header every write of ours sends),
// shown as a thumbnail until the prompt takes them; and the thumbnails
// of a prompt's images in the transcript, read from
// GET /api/blobs/SESSION/SHA256 (an <img> shows it; a click saves it).

import { el, clear } from './dom.js';

const MAX_IMAGES = 16;
const MAX_BYTES = 24 * 1024 * 1024;

export function blobUrl (sid, sha256) {
  return '/api/blobs/' + encodeURIComponent (sid) + '/' + encodeURIComponent (sha256);
}

// Stores a file for the session: the answer's blob ({sha256, mime, ...}),
// or throws the server's error.
export async function uploadBlob (sid, f, fallbackName) {
  const r = await fetch ('/api/blobs/' + encodeURIComponent (sid) + '?name=' + encodeURIComponent (f.name || fallbackName),
                         { method: 'POST', headers: { 'X-Switchboard': '1' }, body: f, credentials: 'same-origin' });
  const j = await r.json ();
  if (!r.ok)
    throw (j.error || { code: 'internal', message: 'upload failed: HTTP ' + r.status });
  return j.blob;
}

// The thumbnails of a prompt entry's images, or null.
export function promptImages (sid, images) {
  if (!sid || !Array.isArray (images) || !images.length)
    return null;
  return el ('div.prompt-images', images.map ((im) => {
    const url = blobUrl (sid, im.sha256);
    const what = (im.name || 'image') + ' · ' + im.mime + (im.width ? ' ' + im.width + '×' + im.height : '');
    return el ('a.thumb', { href: url, title: what, download: im.name || im.sha256 },
      el ('img', { src: url, alt: im.name || 'image', loading: 'lazy' }));
  }));
}

// The composer's tray: what the next prompt will carry.
export class ImageTray {
  // session(): the current session id; onError(e): shown like any error.
  constructor (composer, input, session, onError) {
    this.session = session;
    this.onError = onError;
    this.items = [];            // {sha256, name, url, node}
    this.tray = el ('div#composer-images.composer-images', { hidden: true, 'aria-label': 'Images for the next prompt' });
    composer.insertBefore (this.tray, composer.firstChild);
    this.picker = el ('input', { type: 'file', accept: 'image/png,image/jpeg,image/gif,image/webp', multiple: true,
                                 hidden: true, onchange: () => { this.add ([...this.picker.files]); this.picker.value = ''; } });
    const button = el ('button#image-btn.secondary', { type: 'button', title: 'Add an image (or paste, or drop one)',
                                                      'aria-label': 'Add an image', onclick: () => this.picker.click () },
      'Image');
    const actions = composer.querySelector ('.composer-actions');
    (actions || composer).insertBefore (button, actions ? actions.firstChild : null);
    composer.appendChild (this.picker);
    input.addEventListener ('paste', (e) => {
      const files = [...(e.clipboardData ? e.clipboardData.files : [])].filter ((f) => /^image\//.test (f.type));
      if (files.length) {
        e.preventDefault ();
        this.add (files);
      }
    });
    composer.addEventListener ('dragover', (e) => e.preventDefault ());
    composer.addEventListener ('drop', (e) => {
      const files = [...(e.dataTransfer ? e.dataTransfer.files : [])];
      if (files.length) {
        e.preventDefault ();
        this.add (files);
      }
    });
  }

  async add (files) {
    for (const f of files) {
      const sid = this.session ();
      if (!sid)
        return;
      if (this.items.length >= MAX_IMAGES)
        return this.onError ({ code: 'invalid', message: 'at most ' + MAX_IMAGES + ' images a prompt' });
      if (f.size > MAX_BYTES)
        return this.onError ({ code: 'too_large', message: f.name + ' is over 24 MiB' });
      try {
        const blob = await uploadBlob (sid, f, 'pasted.png');
        // the page's CSP takes images from 'self' only (no blob: URLs):
        // the thumbnail is the stored blob
        this._show (blob, blobUrl (sid, blob.sha256));
      } catch (e) {
        this.onError (e);
      }
    }
  }

  _show (blob, url) {
    const item = { sha256: blob.sha256, name: blob.name, url };
    const rm = el ('button.link', { type: 'button', 'aria-label': 'Remove ' + (blob.name || 'image'),
                                    onclick: () => this._remove (item) }, '×');
    item.node = el ('span.thumb', { title: (blob.name || '') + ' · ' + blob.mime, dataset: { sha256: blob.sha256 } },
      el ('img', { src: url, alt: blob.name || 'image' }), rm);
    this.items.push (item);
    this.tray.appendChild (item.node);
    this.tray.hidden = false;
  }

  _remove (item) {
    this.items = this.items.filter ((i) => i !== item);
    item.node.remove ();
    this.tray.hidden = !this.items.length;
  }

  // The `images` of session.prompt, or undefined when there are none.
  pending () {
    return this.items.length ? this.items.map ((i) => ({ sha256: i.sha256, name: i.name })) : undefined;
  }

  // The prompt took them.
  clear () {
    this.items = [];
    clear (this.tray);
    this.tray.hidden = true;
  }
}
