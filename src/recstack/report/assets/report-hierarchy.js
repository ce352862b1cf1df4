/* recstack report section: the hierarchy. An icicle chart of time per step above a sortable tree
 * table, with drill-down and breadcrumbs. Exposes ctx.setFocus(node) and ctx.select(node) for the
 * sections that link into it (stages, roofline). Nodes a producer added for time no op accounts for
 * ([unattributed], [python/framework between ops]: extra.kind) are grey and italic, with a note. */
"use strict";

REPORT.section("hierarchy", (ctx) => {
  const { el, svg, clear, isNum } = RS;
  const U = UNITS;
  const { ancestors, shortName, syntheticNote } = REPORT;
  const { D, root, nodes } = ctx;
  const SYNTHETIC_FILL = "#e6e6e6";

  const state = { focus: root, selected: null, expanded: new Set([root.id]), sortKey: "time", asc: false };
  const crumbs = el("nav", { class: "crumbs", id: "breadcrumbs", "aria-label": "hierarchy path" });
  const icicleBox = el("div", { id: "icicle" });
  const treeBox = el("div", { class: "scroll", id: "tree" });
  ctx.main.appendChild(RS.card("hierarchy", "Hierarchy: run → stage → module → op",
    "Width is time per step. Click a block (or a name in the table) to drill down; click the top block or a breadcrumb to go back up. Hover for figures.",
    crumbs, el("div", { class: "grid hier" }, icicleBox, treeBox)));

  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(renderIcicle, 120);
  });

  function setFocus(n) {
    state.focus = n;
    state.expanded.add(n.id);
    // Open single-child chains (stage -> its one root module -> ...) so a drill shows content at once.
    for (let x = n, i = 0; x.children.length === 1 && i < 4; x = x.children[0], i++) state.expanded.add(x.children[0].id);
    ctx.app.dataset.focus = n.path;
    ctx.app.dataset.focusLevel = n.level;
    renderCrumbs();
    renderIcicle();
    renderTree();
  }
  function select(n) {
    state.selected = n;
    renderIcicle();
    renderTree();
    const row = treeBox.querySelector('tr[data-id="' + n.id + '"]');
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  function renderCrumbs() {
    clear(crumbs);
    const chain = ancestors(state.focus);
    chain.forEach((n, i) => {
      if (i) crumbs.appendChild(el("span", { class: "sep", text: "›" }));
      if (i === chain.length - 1) crumbs.appendChild(el("span", { class: "here", text: shortName(n), title: n.path }));
      else crumbs.appendChild(el("button", { type: "button", text: shortName(n), title: n.path, onclick: () => setFocus(n) }));
    });
    crumbs.appendChild(el("span", { class: "lvltag", text: "  " + state.focus.level + " · " + U.time(state.focus.time_s) + " · " + U.pct(ctx.share(state.focus)) + " of step" }));
  }

  function nodeColor(n) {
    if (n.level === "run") return "#d5dbe3";
    if (syntheticNote(n)) return SYNTHETIC_FILL;
    const base = RS.stageColor(n.stage);
    const stageDepth = n.level === "stage" ? 0 : ancestors(n).filter((a) => a.level !== "run" && a.level !== "stage").length;
    return RS.tint(base, Math.min(0.1 + 0.15 * stageDepth, 0.75));
  }

  function renderIcicle() {
    clear(icicleBox);
    const W = Math.max(320, Math.round(icicleBox.clientWidth || 760)), rowH = 32, maxRows = 6;
    const cells = [];
    (function lay(n, x0, x1, d) {
      cells.push({ n, x0, x1, d });
      if (d + 1 >= maxRows) return;
      const kids = n.children.slice().sort((a, b) => b.time_s - a.time_s);
      const tot = kids.reduce((s, k) => s + Math.max(k.time_s, 0), 0);
      const denom = Math.max(n.time_s, tot);
      if (!(denom > 0)) return;
      let x = x0;
      for (const k of kids) {
        const w = ((x1 - x0) * Math.max(k.time_s, 0)) / denom;
        if (w >= 0.6) lay(k, x, x + w, d + 1);
        x += w;
      }
    })(state.focus, 0, W, 0);
    const depth = cells.reduce((m, c) => Math.max(m, c.d), 0) + 1;
    const H = depth * rowH;
    const s = svg("svg", { class: "icicle", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "icicle chart of time per step" });
    for (const c of cells) {
      const n = c.n;
      const w = c.x1 - c.x0;
      const g = svg("g");
      const rect = svg("rect", {
        class: "cell" + (state.selected === n ? " sel" : "") + (syntheticNote(n) ? " synthetic" : ""), x: c.x0, y: c.d * rowH, width: Math.max(w - 0.5, 0.5), height: rowH - 1,
        rx: 2, fill: nodeColor(n), data: { path: n.path, level: n.level, id: n.id },
      });
      rect.addEventListener("click", () => {
        RS.tipHide();
        if (c.d === 0 && n.parent) setFocus(n.parent);
        else if (c.d > 0 && n.children.length) setFocus(n);
        else select(n);
      });
      RS.hover(rect, () => n.label || n.name, () => ctx.nodeRows(n));
      g.appendChild(rect);
      const label = shortName(n);
      const maxChars = Math.floor((w - 10) / 6.7);
      if (maxChars >= 3) {
        const t = U.time(n.time_s);
        let txt = label.length + t.length + 2 <= maxChars ? label + "  " + t : label;
        if (txt.length > maxChars) txt = txt.slice(0, Math.max(1, maxChars - 1)) + "…";
        g.appendChild(svg("text", { x: c.x0 + 5, y: c.d * rowH + rowH / 2 + 4, text: txt, fill: RS.inkOn(nodeColor(n)), class: syntheticNote(n) ? "synthetic" : null }));
      }
      s.appendChild(g);
    }
    icicleBox.appendChild(s);
    const stages = [...new Set(nodes.filter((n) => n.level === "stage").map((n) => n.stage))];
    icicleBox.appendChild(el("div", { class: "legend", style: { marginTop: "8px" } },
      stages.map((st) => el("span", { class: "item" }, el("span", { class: "swatch", style: { background: RS.stageColor(st) } }), st)),
      nodes.some(syntheticNote) ? el("span", { class: "item" }, el("span", { class: "swatch", style: { background: SYNTHETIC_FILL } }), el("i", { text: "time no op accounts for (unattributed, Python/framework between ops)" })) : null,
      el("span", { class: "item faint", text: "deeper levels are lighter tints of their stage colour; blank space is self time" })));
  }

  const treeCols = [
    { key: "name", label: "node", get: (n) => shortName(n).toLowerCase() },
    { key: "time", label: "time / step", num: true, get: (n) => n.time_s },
    { key: "share", label: "share of step", num: true, get: (n) => n.time_s },
    { key: "self", label: "self time", num: true, get: (n) => n.self_time_s },
    { key: "calls", label: "calls", num: true, get: (n) => n.calls },
  ];
  if (D.has_cost) {
    treeCols.push({ key: "flops", label: "FLOPs", num: true, get: (n) => n.flops });
    treeCols.push({ key: "bytes", label: "bytes", num: true, get: (n) => n.bytes });
    treeCols.push({ key: "intensity", label: "intensity", num: true, get: (n) => n.intensity });
  }
  if (D.machine) {
    treeCols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null });
    treeCols.push({ key: "ceiling", label: "% of ceiling", num: true, title: "achieved over the roofline ceiling at the node's intensity (u: on unique bytes)", get: ctx.ceilingOf });
  }

  function renderTree() {
    clear(treeBox);
    const table = el("table", { class: "data tree" });
    const hr = el("tr");
    for (const c of treeCols) {
      const th = el("th", { class: (c.num ? "num " : "") + "sortable" + (state.sortKey === c.key ? " sorted" + (state.asc ? " asc" : "") : ""), text: c.label, title: c.title });
      th.addEventListener("click", () => {
        if (state.sortKey === c.key) state.asc = !state.asc; else { state.sortKey = c.key; state.asc = !c.num; }
        renderTree();
      });
      hr.appendChild(th);
    }
    table.appendChild(el("thead", null, hr));
    const tbody = el("tbody");
    const col = treeCols.find((c) => c.key === state.sortKey) || treeCols[1];
    const cmp = (a, b) => {
      const va = col.get(a), vb = col.get(b);
      if (va === vb) return 0;
      if (va === null || va === undefined) return 1;
      if (vb === null || vb === undefined) return -1;
      return (va < vb ? -1 : 1) * (state.asc ? 1 : -1);
    };
    (function row(n, rel) {
      const open = state.expanded.has(n.id);
      const tog = el("span", { class: "tog", text: n.children.length ? (open ? "▾" : "▸") : "" });
      if (n.children.length) tog.addEventListener("click", (e) => {
        e.stopPropagation();
        if (open) state.expanded.delete(n.id); else state.expanded.add(n.id);
        renderTree();
      });
      const note = syntheticNote(n);
      const lbl = el("span", { class: "lbl" + (note ? " synthetic" : ""), text: shortName(n), title: note ? n.path + ": " + note : n.path });
      lbl.addEventListener("click", () => (n.children.length && n !== state.focus ? setFocus(n) : select(n)));
      const nameTd = el("td", { class: "name", style: { paddingLeft: 6 + rel * 16 + "px" } },
        tog, el("span", { class: "dot", style: { background: nodeColor(n) } }), lbl, " ", el("span", { class: "lvltag", text: n.level }), note ? el("span", { class: "synth-note", title: note, text: " not an op" }) : null);
      const sh = ctx.share(n);
      const cells = [nameTd,
        el("td", { class: "num" }, ctx.fig(U.time(n.time_s), ctx.provOf(n, "time_s"))),
        el("td", { class: "num" }, U.pct(sh), el("span", { class: "sharebar" }, el("i", { style: { width: Math.min(100, Math.max(0, (sh || 0) * 100)) + "%", background: RS.stageColor(n.stage) } }))),
        el("td", { class: "num" }, ctx.fig(U.time(n.self_time_s), ctx.provOf(n, "self_time_s"))),
        el("td", { class: "num", text: U.count(n.calls) })];
      if (D.has_cost) {
        cells.push(el("td", { class: "num" }, isNum(n.flops) ? ctx.fig(U.flops(n.flops), ctx.provOf(n, "flops")) : "-"));
        cells.push(el("td", { class: "num" }, isNum(n.bytes) ? ctx.fig(U.bytes(n.bytes), ctx.provOf(n, "bytes")) : "-"));
        cells.push(el("td", { class: "num" }, isNum(n.intensity) ? ctx.fig(U.intensity(n.intensity), ctx.provOf(n, "intensity")) : "-"));
      }
      if (D.machine) cells.push(el("td", null, ctx.boundBadge(n)), el("td", { class: "num" }, ctx.ceilingCell(n)));
      tbody.appendChild(el("tr", { class: (n === state.focus ? "focus" : "") + (n === state.selected ? " hl" : "") + (note ? " synthetic" : ""), data: { id: n.id, path: n.path, level: n.level } }, cells));
      if (open) n.children.slice().sort(cmp).forEach((k) => row(k, rel + 1));
    })(state.focus, 0);
    table.appendChild(tbody);
    treeBox.appendChild(table);
  }

  ctx.setFocus = setFocus;
  ctx.select = select;
  ctx.ready.push(() => setFocus(root));
});
