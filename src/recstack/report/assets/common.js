/* recstack pages: shared helpers (DOM building, stage colours, tooltip, tables); number formats are in units.js.
 * Contract: every string from the data is put into the page with textContent or setAttribute, never
 * innerHTML; element builders below are the only way the scripts create markup. */
"use strict";

const RS = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";

  function apply(node, attrs) {
    if (!attrs) return node;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = String(v);
      else if (k === "class") node.setAttribute("class", v);
      else if (k === "style" && typeof v === "object") Object.assign(node.style, v);
      else if (k === "data" && typeof v === "object") Object.entries(v).forEach(([dk, dv]) => { node.dataset[dk] = String(dv); });
      else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, String(v));
    }
    return node;
  }

  function add(node, kids) {
    for (const kid of kids.flat(Infinity)) {
      if (kid === undefined || kid === null || kid === false) continue;
      node.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }

  /** An HTML element; string children become text nodes. */
  function el(tag, attrs, ...kids) { return add(apply(document.createElement(tag), attrs), kids); }
  /** An SVG element. */
  function svg(tag, attrs, ...kids) { return add(apply(document.createElementNS(SVGNS, tag), attrs), kids); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function loadData() {
    const block = document.getElementById("recstack-data");
    return JSON.parse(block.textContent);
  }

  const isNum = UNITS.isNum;
  const sig = UNITS.sig;

  /* Stage colours: a categorical palette (Tableau 10), fixed per known stage so every chart agrees. */
  const STAGE_COLORS = {
    feature_processing: "#76b7b2",
    embedding: "#4e79a7",
    dense: "#f28e2b",
    interaction: "#b07aa1",
    sequence: "#ff9da7",
    head: "#59a14f",
    loss: "#edc948",
    backward: "#e15759",
    optimizer: "#9c755f",
    communication: "#86bcb6",
    other: "#bab0ac",
  };
  const SPARE = ["#8cd17d", "#f1ce63", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#d37295", "#499894", "#79706e"];
  const assigned = {};
  function stageColor(stage) {
    if (!stage) return "#cfd6df";
    if (STAGE_COLORS[stage]) return STAGE_COLORS[stage];
    if (!assigned[stage]) assigned[stage] = SPARE[Object.keys(assigned).length % SPARE.length];
    return assigned[stage];
  }
  /** Mix a #rrggbb colour with white: t=0 the colour, t=1 white. */
  function tint(hex, t) {
    const n = parseInt(hex.slice(1), 16);
    const ch = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((c) => Math.round(c + (255 - c) * t));
    return "#" + ch.map((c) => c.toString(16).padStart(2, "0")).join("");
  }

  /** Dark or white text, whichever reads better on a #rrggbb fill (relative luminance). */
  function inkOn(hex) {
    const n = parseInt(hex.slice(1), 16);
    const lin = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
    const L = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
    return L > 0.3 ? "#13202f" : "#ffffff";
  }

  /* Tooltip: rows of [label, value]; text only. */
  let tipEl = null;
  function tipShow(evt, title, rows) {
    tipEl = tipEl || document.getElementById("tooltip");
    clear(tipEl);
    tipEl.appendChild(el("div", { class: "tt-h", text: title }));
    for (const [k, v] of rows) if (v !== undefined && v !== null && v !== "-") {
      tipEl.appendChild(el("div", { class: "tt-r" }, el("span", { text: k }), el("span", { text: v })));
    }
    tipEl.hidden = false;
    tipMove(evt);
  }
  function tipMove(evt) {
    if (!tipEl || tipEl.hidden) return;
    const pad = 14;
    const w = tipEl.offsetWidth;
    const h = tipEl.offsetHeight;
    let x = evt.clientX + pad;
    let y = evt.clientY + pad;
    if (x + w > window.innerWidth - 8) x = evt.clientX - w - pad;
    if (y + h > window.innerHeight - 8) y = evt.clientY - h - pad;
    tipEl.style.left = Math.max(4, x) + "px";
    tipEl.style.top = Math.max(4, y) + "px";
  }
  function tipHide() { if (tipEl) tipEl.hidden = true; }
  function hover(node, titleFn, rowsFn) {
    node.addEventListener("mouseenter", (e) => tipShow(e, titleFn(), rowsFn()));
    node.addEventListener("mousemove", tipMove);
    node.addEventListener("mouseleave", tipHide);
    return node;
  }

  /** Render any JSON value as text (objects compactly). */
  function valueText(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : sig(v, 4);
    if (typeof v === "string") return v === "" ? "-" : v;
    if (Array.isArray(v)) return v.length === 0 ? "-" : v.map(valueText).join(", ");
    return JSON.stringify(v);
  }

  /** Long or nested JSON values fold into a <details> with an indented text block; short ones stay text. */
  function valueNode(v, limit = 90) {
    const nested = v !== null && typeof v === "object" && (!Array.isArray(v) || v.some((x) => x !== null && typeof x === "object"));
    const text = valueText(v);
    if (!nested && text.length <= limit) return text;
    const summary = Array.isArray(v) ? v.length + " items" : v !== null && typeof v === "object" ? Object.keys(v).length + " fields" : text.slice(0, limit) + "…";
    return el("details", { class: "json" }, el("summary", { text: summary }), el("pre", { text: typeof v === "string" ? v : JSON.stringify(v, null, 2) }));
  }

  /** A two-column key/value table; rows are [key, value-or-Node]. */
  function kvTable(rows) {
    const t = el("table", { class: "kv" });
    for (const [k, v] of rows) {
      const cell = el("td", { class: "v" });
      const shown = v instanceof Node ? v : valueNode(v, 400);
      if (shown instanceof Node) cell.appendChild(shown); else cell.textContent = shown;
      t.appendChild(el("tr", null, el("td", { class: "k", text: k }), cell));
    }
    return t;
  }

  function card(id, title, lead, ...kids) {
    return el("section", { class: "card", id }, el("h2", { text: title }), lead ? el("p", { class: "lead", text: lead }) : null, ...kids);
  }

  function note(text, cls = "") { return el("div", { class: ("note " + cls).trim(), text }); }

  /** A sortable table: cols = [{key, label, unit, num, get(row), fmt(row) -> string|Node, sort(row)}]. */
  function sortableTable(cols, rows, opts = {}) {
    let sortKey = opts.sortKey || null;
    let asc = !!opts.asc;
    const table = el("table", { class: "data" + (opts.cls ? " " + opts.cls : "") });
    const thead = el("thead");
    const tbody = el("tbody");
    table.append(thead, tbody);
    function header() {
      clear(thead);
      const tr = el("tr");
      for (const c of cols) {
        const th = el("th", { class: (c.num ? "num " : "") + (c.sort !== false ? "sortable" : "") + (sortKey === c.key ? " sorted" + (asc ? " asc" : "") : ""), title: c.title });
        th.append(c.label, c.unit ? el("span", { class: "unit", text: " (" + c.unit + ")" }) : "");
        if (c.sort !== false) th.addEventListener("click", () => {
          if (sortKey === c.key) asc = !asc; else { sortKey = c.key; asc = !c.num; }
          render();
        });
        tr.appendChild(th);
      }
      thead.appendChild(tr);
    }
    function render() {
      header();
      clear(tbody);
      let list = rows.slice();
      const c = cols.find((x) => x.key === sortKey);
      if (c) {
        const key = c.sortValue || c.get;
        list.sort((a, b) => {
          const va = key(a), vb = key(b);
          if (va === vb) return 0;
          if (va === null || va === undefined) return 1;
          if (vb === null || vb === undefined) return -1;
          return (va < vb ? -1 : 1) * (asc ? 1 : -1);
        });
      }
      if (opts.limit && list.length > opts.limit && !table.dataset.all) list = list.slice(0, opts.limit);
      for (const r of list) {
        const tr = el("tr", opts.rowAttrs ? opts.rowAttrs(r) : null);
        for (const col of cols) {
          const v = col.fmt ? col.fmt(r) : valueText(col.get(r));
          const td = el("td", { class: col.num ? "num" : (col.cls || "") });
          if (v instanceof Node) td.appendChild(v); else td.textContent = v;
          tr.appendChild(td);
        }
        tbody.appendChild(tr);
      }
    }
    table.rerender = render;
    render();
    return table;
  }

  /** Run ``fn`` once the DOM exists; show a visible message (and rethrow to the console) if it throws. */
  function boot(fn) {
    const go = () => {
      const app = document.getElementById("app");
      try {
        fn(app);
        app.dataset.state = "ready";
      } catch (err) {
        app.dataset.state = "error";
        app.appendChild(note("This page failed to render: " + (err && err.message ? err.message : String(err))));
        throw err;
      }
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", go); else go();
  }

  return {
    el, svg, clear, loadData, isNum, stageColor, tint, inkOn, valueNode, tipShow, tipMove, tipHide, hover, valueText, kvTable, card, note, sortableTable, boot,
  };
})();
