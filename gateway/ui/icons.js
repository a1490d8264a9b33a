// icons.js — the UI's icons as inline SVG, drawn with lines in the text's
// colour (currentColor). Glyphs such as ❯ ✎ ⑂ ⚙ need a font that has them,
// and a machine without emoji or symbol fonts shows empty boxes instead;
// SVG paths need no font at all. Each icon is a 16x16 viewBox of strokes.

const NS = 'http://www.w3.org/2000/svg';

// name -> the SVG elements inside the viewBox, as [tag, attributes]
const SHAPES = {
  shell: [['path', { d: 'M3 4l4 4-4 4' }], ['path', { d: 'M8.5 12h4.5' }]],
  read: [['rect', { x: 3, y: 2, width: 10, height: 12, rx: 1.5 }], ['path', { d: 'M5.5 5.5h5M5.5 8h5M5.5 10.5h3' }]],
  write: [['path', { d: 'M10.5 2.5l3 3-7.5 7.5H3v-3z' }], ['path', { d: 'M9 4l3 3' }]],
  folder: [['path', { d: 'M2 4.5a1 1 0 0 1 1-1h3l1.5 1.5H13a1 1 0 0 1 1 1V12a1 1 0 0 1-1 1H3a1 1 0 0 1-1-1z' }]],
  search: [['circle', { cx: 7, cy: 7, r: 4 }], ['path', { d: 'M10 10l3.5 3.5' }]],
  git: [['circle', { cx: 4.5, cy: 3.5, r: 1.5 }], ['circle', { cx: 4.5, cy: 12.5, r: 1.5 }],
        ['circle', { cx: 11.5, cy: 6, r: 1.5 }], ['path', { d: 'M4.5 5v6M11.5 7.5c0 2.5-7 1.5-7 3.5' }]],
  plug: [['path', { d: 'M6 2v3M10 2v3M4 5h8v3a4 4 0 0 1-8 0zM8 12v2' }]],
  gear: [['circle', { cx: 8, cy: 8, r: 2.5 }],
         ['path', { d: 'M8 1.5v2M8 12.5v2M1.5 8h2M12.5 8h2M3.4 3.4l1.4 1.4M11.2 11.2l1.4 1.4M3.4 12.6l1.4-1.4M11.2 4.8l1.4-1.4' }]],
  check: [['path', { d: 'M3 8.5l3 3 7-7' }]],
  stop: [['rect', { x: 4, y: 4, width: 8, height: 8, rx: 1 }]],
  cross: [['path', { d: 'M4 4l8 8M12 4l-8 8' }]],
  menu: [['path', { d: 'M2.5 4h11M2.5 8h11M2.5 12h11' }]],
  panel: [['rect', { x: 2, y: 3, width: 12, height: 10, rx: 1.5 }], ['path', { d: 'M10 3v10' }]],
};

const TOOLS = {
  shell: 'shell', read_file: 'read', write_file: 'write', edit_file: 'write', list_dir: 'folder', grep: 'search',
  git_status: 'git', git_diff: 'git',
};

// An <svg> of the named icon (the gear for a name it does not know).
export function icon (name) {
  const svg = document.createElementNS (NS, 'svg');
  for (const [k, v] of Object.entries ({ viewBox: '0 0 16 16', width: 14, height: 14, fill: 'none',
    stroke: 'currentColor', 'stroke-width': 1.6, 'stroke-linecap': 'round', 'stroke-linejoin': 'round',
    'aria-hidden': 'true', focusable: 'false' }))
    svg.setAttribute (k, String (v));
  svg.classList.add ('icon', 'icon-' + (SHAPES [name] ? name : 'gear'));
  for (const [tag, attrs] of SHAPES [name] || SHAPES.gear) {
    const node = document.createElementNS (NS, tag);
    for (const [k, v] of Object.entries (attrs))
      node.setAttribute (k, String (v));
    svg.appendChild (node);
  }
  return svg;
}

// The icon of a tool: its own, a plug for an MCP server's, else the gear.
export function toolIconName (tool) {
  if (TOOLS [tool])
    return TOOLS [tool];
  return String (tool || '').startsWith ('mcp__') ? 'plug' : 'gear';
}
