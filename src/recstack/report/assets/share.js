/* recstack sharing page: renders the embedded share results (see recstack/sharing/analysis.py).
 * Per model: the request-side vs candidate-side share of every stage (FLOPs, bytes, op time of the
 * batched run), the measured batched / shared times per stage at each C, and the saving curve as C
 * grows (the analysis's formula lines, the measured end-to-end savings as points). Figures come from
 * the data; this script only draws them. */
"use strict";

(() => {
  const { el, svg, isNum } = RS;
  const U = UNITS;
  const CLASS_COLORS = { request: "#4e79a7", candidate: "#f28e2b", mixed: "#b07aa1", constant: "#bab0ac" };
  const CLASSES = ["request", "candidate", "mixed", "constant"];
  const MEASURES = [["flops", "FLOPs"], ["bytes", "bytes"], ["time_s", "op time"]];

  function shareBar(byClass, key) {
    const total = CLASSES.reduce((s, c) => s + ((byClass[c] || {})[key] || 0), 0);
    const bar = el("div", { class: "stack thin", style: { minWidth: "160px" } });
    if (!(total > 0)) return el("span", { class: "muted small", text: "-" });
    for (const c of CLASSES) {
      const v = (byClass[c] || {})[key] || 0;
      if (!(v > 0)) continue;
      const w = (v / total) * 100;
      // the share as a number on the segment where it fits (the tooltip has it always)
      const seg = el("div", { style: { width: w + "%", background: CLASS_COLORS[c] }, data: { cls: c } }, w >= 16 ? el("span", { text: U.pct(v / total, 0) }) : null);
      RS.hover(seg, () => c, () => [[key === "time_s" ? "op time" : key, key === "time_s" ? U.time(v) : key === "flops" ? U.flops(v) : U.bytes(v)], ["share", U.pct(v / total)]]);
      bar.appendChild(seg);
    }
    return bar;
  }

  function legend() {
    return el("p", { class: "small" }, CLASSES.map((c) => el("span", { class: "nowrap", style: { marginRight: "14px" } },
      el("span", { class: "swatch", style: { background: CLASS_COLORS[c], marginRight: "5px", verticalAlign: "-1px" } }), c)));
  }

  function shareCard(model, r) {
    const stages = Object.keys(r.share_by_stage);
    const cols = [{ key: "stage", label: "stage", get: (s) => s, fmt: (s) => s }];
    for (const [key, label] of MEASURES) cols.push({ key, label: label + " by side", sort: false, get: (s) => s, fmt: (s) => shareBar(r.share_by_stage[s], key) });
    cols.push({ key: "req", label: "request-only FLOPs", num: true, get: (s) => ((r.share_by_stage[s].request || {}).flops || 0), fmt: (s) => U.flops((r.share_by_stage[s].request || {}).flops || 0) });
    const share = r.request_only_share;
    const lead = "Batched run of " + r.requests + " request(s) × " + r.candidates + " candidates: each op classed by the inputs it computes from (dispatch-level provenance). FLOPs and bytes: cost model; op time: " + share.time_basis + ". Request-only share: FLOPs " + U.pct(share.flops) + ", bytes " + U.pct(share.bytes) + ", op time " + U.pct(share.time) + ".";
    const table = el("div", { class: "scroll" }, RS.sortableTable(cols, stages, { sortKey: null }));
    table.firstChild.id = "share-table-" + model;
    return RS.card("share-" + model, model + ": request-side vs candidate-side share of every stage", lead, legend(), table,
      el("p", { class: "small muted", text: "Request-only modules: " + (r.request_only_modules.join(", ") || "none") + ". Expanded at the entry of: " + (r.expansions.join(", ") || "none") + "." + (r.unshared_request_modules.length ? " Request-only but inside those, so run per candidate: " + r.unshared_request_modules.join(", ") + "." : "") }));
  }

  function measuredCard(model, rs) {
    const stages = [...new Set(rs.flatMap((r) => Object.keys(r.stages)))];
    const cols = [{ key: "stage", label: "stage", get: (s) => s, fmt: (s) => s }];
    for (const r of rs) {
      const st = (s) => r.stages[s] || {};
      cols.push(
        { key: "b" + r.candidates, label: "C=" + r.candidates + " batched", num: true, get: (s) => st(s).batched_s, fmt: (s) => U.time(st(s).batched_s) },
        { key: "s" + r.candidates, label: "shared", num: true, get: (s) => st(s).shared_s, fmt: (s) => U.time(st(s).shared_s) },
        { key: "f" + r.candidates, label: "FLOPs saved / request", num: true, get: (s) => st(s).flops_saved_per_request, fmt: (s) => U.flops(st(s).flops_saved_per_request) });
    }
    const rows = rs.map((r) => el("li", { text: "C=" + r.candidates + ": " + U.time(r.total.batched_s) + " batched, " + U.time(r.total.shared_s) + " shared, speedup " + U.times(r.speedup) + ", outputs agree (rtol " + r.tolerance.rtol + ", atol " + r.tolerance.atol + "): " + (r.outputs_equal ? "yes" : "NO") + (r.sharing.reason ? " · " + r.sharing.reason : "") }));
    return RS.card("measured-" + model, model + ": batched against shared execution", "Measured wall time per stage (fastest of the interleaved iterations, stage-root hooks; beside other processes the times are contended). The shared execution's request_dedupe is its deduplication of request-side inputs.",
      el("ul", { class: "small" }, rows), el("div", { class: "scroll" }, RS.sortableTable(cols, stages, { sortKey: null })));
  }

  function curveCard(model, rs) {
    const W = 1000, H = 300, ml = 48, mr = 40, mt = 22, mb = 34;
    const pts = rs[0].curve;
    const cs = pts.map((p) => p.candidates);
    const lx = (c) => Math.log10(c);
    const x0 = lx(Math.min(...cs)), x1 = lx(Math.max(...cs));
    const X = (c) => ml + ((lx(c) - x0) / (x1 - x0 || 1)) * (W - ml - mr);
    const Y = (v) => mt + (1 - Math.max(0, Math.min(1, v))) * (H - mt - mb);
    const s = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "saving as candidates grow", id: "curve-" + model });
    const grid = svg("g", { class: "grid" }), axis = svg("g", { class: "axis" });
    for (const v of [0, 0.25, 0.5, 0.75, 1]) {
      grid.appendChild(svg("line", { x1: ml, x2: W - mr, y1: Y(v), y2: Y(v) }));
      axis.appendChild(svg("text", { x: ml - 6, y: Y(v) + 4, "text-anchor": "end", text: U.pct(v, 0) }));
    }
    for (const c of [1, 10, 100, 1000].filter((c) => c >= 10 ** x0 && c <= 10 ** x1)) axis.appendChild(svg("text", { x: X(c), y: H - 14, "text-anchor": c === 10 ** x1 ? "end" : "middle", text: "C=" + c }));
    s.append(grid, axis, svg("text", { class: "title", x: ml, y: 12, text: "share of the batched work saved" }));
    const line = (key, color, label) => {
      const d = pts.map((p, i) => (i ? "L" : "M") + X(p.candidates).toFixed(1) + "," + Y(p[key]).toFixed(1)).join(" ");
      s.appendChild(svg("path", { d, fill: "none", stroke: color, "stroke-width": 2, data: { series: key } }));
      const last = pts[pts.length - 1];
      s.appendChild(svg("text", { x: X(last.candidates) - 4, y: Y(last[key]) - 6, "text-anchor": "end", fill: color, text: label }));
    };
    line("flops_saved_share", "#4e79a7", "FLOPs (formula)");
    line("time_saved_share", "#59a14f", "op time (formula)");
    for (const r of rs) {
      if (!isNum(r.total.saved_share)) continue;
      const dot = svg("circle", { cx: X(Math.max(r.candidates, 10 ** x0)), cy: Y(r.total.saved_share), r: 5, fill: "#e15759", data: { measured: r.candidates } });
      RS.hover(dot, () => "measured, C=" + r.candidates, () => [["saved", U.pct(r.total.saved_share)], ["speedup", U.times(r.speedup)]]);
      s.appendChild(dot);
    }
    const lead = "Lines: saved(C) = (1 − 1/C) × request-only share (request-only work scales with requests, the rest with candidates; expansion costs left out). Points: measured end-to-end saving (1 − shared / batched time) at each C run (negative savings are drawn at 0).";
    return RS.card("curve-card-" + model, model + ": saving as C grows", lead, s);
  }

  function main(app) {
    const D = RS.loadData();
    app.appendChild(el("header", { class: "top" }, el("div", null,
      el("div", { class: "brand", text: "recstack · request sharing" }), el("h1", { text: D.title }),
      el("div", { class: "sub", text: "Request-side work (user, behaviour sequence) is the same for all candidates of a ranking request; the shared execution computes it once per request." })),
      el("div", { class: "right" }, el("div", { text: "recstack " + D.recstack_version }))));
    const mainEl = el("main");
    app.appendChild(mainEl);
    const byModel = {};
    for (const r of D.results) (byModel[r.model] = byModel[r.model] || []).push(r);
    if (!D.results.length) mainEl.appendChild(RS.note("No share results.", "info"));
    for (const [model, rs] of Object.entries(byModel)) {
      rs.sort((a, b) => a.candidates - b.candidates);
      mainEl.append(shareCard(model, rs[rs.length - 1]), measuredCard(model, rs), curveCard(model, rs));
    }
    app.appendChild(el("footer", { text: "recstack " + D.recstack_version }));
  }

  RS.boot(main);
})();
