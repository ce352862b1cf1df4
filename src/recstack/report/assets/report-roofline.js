/* recstack report section: the roofline. Achieved FLOP/s against intensity, log-log, drawn in SVG from
 * the roofs in profile.extra.machine and each node's extra.roofline (both written by the roofline
 * classifier), the plotted points by time, the 0-FLOP nodes, the suspect fractions and the machine
 * figures. */
"use strict";

REPORT.section("roofline", (ctx) => {
  const { el, svg, isNum } = RS;
  const U = UNITS;
  const { shortName } = REPORT;
  const { D, root, nodes } = ctx;

  ctx.main.appendChild(rooflineSection());

  /** Stages, and the outermost classified ops (an op inside a classified op would repeat it). */
  function rooflineCandidates() {
    const stagesR = nodes.filter((n) => n.level === "stage" && ctx.R(n));
    const ops = [];
    (function walk(n, covered) {
      const here = n.level === "op" && !!n.extra.bound;
      if (here && !covered) ops.push(n);
      for (const c of n.children) walk(c, covered || here);
    })(root, false);
    ops.sort((a, b) => b.time_s - a.time_s);
    return { stagesR, ops };
  }

  function rooflineSection() {
    const lead = "Achieved FLOP/s against arithmetic intensity (FLOPs per byte), log-log, as the roofline classifier computed them. Roofs are this host's measured figures at the run's threads and dtype: the GEMM peak (flat), the streaming bandwidth and the random-gather bandwidth the embedding stages were held to (sloped). Points: stages (large, outlined) and the top ops by time. A gather node whose hot rows come from cache also appears on unique bytes (each row counted once: hollow, joined to its requested-bytes point).";
    const box = RS.card("roofline", "Roofline", lead);
    const M = D.machine;
    if (!D.has_cost) {
      box.appendChild(RS.note("Roofline not available: this profile has no FLOP or byte figures. Profile with the cost model on (the default)."));
      return box;
    }
    if (!M) {
      box.appendChild(RS.note("Roofline not available: no machine figures in this profile. Measure this host with `recstack machine` and profile again (the cached figures are picked up), or classify a saved profile with recstack.analysis.roofline.classify(profile, machine)."));
      return box;
    }
    const { stagesR, ops } = rooflineCandidates();
    const plottable = (n) => ctx.R(n) && ctx.R(n).intensity > 0 && ctx.R(n).achieved_flops > 0;
    const TOP = 40;
    const opPts = ops.filter(plottable).slice(0, TOP);
    const stagePts = stagesR.filter(plottable);
    const pts = stagePts.concat(opPts);
    const zeroFlop = stagesR.concat(ops.slice(0, TOP)).filter((n) => !plottable(n) && ctx.R(n).achieved_bytes_per_s > 0);
    const noCost = stagesR.filter((n) => !isNum(ctx.R(n).achieved_bytes_per_s));
    box.appendChild(el("div", { class: "grid roof" }, chart(M, stagePts, opPts), sidePanel(M, pts, zeroFlop, noCost)));
    return box;
  }

  /** The compute roofs (the run's dtype first) and the memory roofs (stream, then each gather roof). */
  function roofsOf(M) {
    const computeRoofs = (M.compute_roofs || []).slice().sort((a, b) => (b.main ? 1 : 0) - (a.main ? 1 : 0) || b.flops - a.flops);
    const streamLabel = M.stream_label || "stream";
    const memRoofs = [{ kind: "stream", short: streamLabel.split(" ")[0], label: streamLabel, bw: M.stream_bandwidth }];
    for (const g of M.gather_roofs || []) memRoofs.push({ kind: "gather", short: "gather", label: g.label, bw: g.bytes_per_s });
    if (!(M.gather_roofs || []).length && Array.isArray(M.gather_bandwidth_range)) {
      memRoofs.push({ kind: "gather", short: "gather", label: "gather, slowest measured", bw: M.gather_bandwidth_range[0] });
      memRoofs.push({ kind: "gather", short: "gather", label: "gather, fastest measured", bw: M.gather_bandwidth_range[1] });
    }
    return { computeRoofs, memRoofs };
  }

  /** Log-log scales that fit the points and every roof's ridge; X and Y map a value to the plot. */
  function scales(M, pts, roofs) {
    const peak = M.peak_flops;
    const { computeRoofs, memRoofs } = roofs;
    const xs = [], ys = [peak];
    for (const n of pts) {
      xs.push(ctx.R(n).intensity);
      ys.push(ctx.R(n).achieved_flops);
      if (ctx.uniqueIntensity(n)) xs.push(ctx.uniqueIntensity(n));
    }
    for (const m of memRoofs) xs.push(peak / m.bw);
    for (const c of computeRoofs) ys.push(c.flops);
    const lx0 = Math.floor(Math.log10(Math.min(...xs) / 1.5)), lx1 = Math.ceil(Math.log10(Math.max(...xs) * 1.5));
    const ly0 = Math.floor(Math.log10(Math.min(...ys) / 1.5)), ly1 = Math.ceil(Math.log10(Math.max(...ys) * 2));
    const W = 780, H = 470, ml = 100, mr = 20, mt = 16, mb = 50;
    const X = (v) => ml + ((Math.log10(v) - lx0) / (lx1 - lx0)) * (W - ml - mr);
    const Y = (v) => H - mb - ((Math.log10(v) - ly0) / (ly1 - ly0)) * (H - mt - mb);
    return { X, Y, W, H, ml, mr, mt, mb, lx0, lx1, ly0, ly1, peak };
  }

  function drawAxes(s, P) {
    const { X, Y, W, H, ml, mr, mt, mb, lx0, lx1, ly0, ly1 } = P;
    const grid = svg("g", { class: "grid" }), axis = svg("g", { class: "axis" });
    const stepX = lx1 - lx0 > 8 ? 2 : 1, stepY = ly1 - ly0 > 8 ? 2 : 1;
    for (let k = lx0; k <= lx1; k += stepX) {
      grid.appendChild(svg("line", { x1: X(10 ** k), x2: X(10 ** k), y1: mt, y2: H - mb }));
      axis.appendChild(svg("text", { x: X(10 ** k), y: H - mb + 16, "text-anchor": "middle", text: U.decade(10 ** k, "") }));
    }
    for (let k = ly0; k <= ly1; k += stepY) {
      grid.appendChild(svg("line", { x1: ml, x2: W - mr, y1: Y(10 ** k), y2: Y(10 ** k) }));
      axis.appendChild(svg("text", { x: ml - 8, y: Y(10 ** k) + 4, "text-anchor": "end", text: U.decade(10 ** k, "FLOP/s") }));
    }
    axis.appendChild(svg("line", { x1: ml, x2: W - mr, y1: H - mb, y2: H - mb }));
    axis.appendChild(svg("line", { x1: ml, x2: ml, y1: mt, y2: H - mb }));
    axis.appendChild(svg("text", { class: "title", x: (ml + W - mr) / 2, y: H - 10, "text-anchor": "middle", text: "arithmetic intensity (FLOP/B, log scale)" }));
    axis.appendChild(svg("text", { class: "title", x: 14, y: (mt + H - mb) / 2, "text-anchor": "middle", transform: "rotate(-90 14 " + (mt + H - mb) / 2 + ")", text: "achieved performance (FLOP/s, log scale)" }));
    s.append(grid, axis);
    s.appendChild(svg("defs", null, svg("clipPath", { id: "plotclip" }, svg("rect", { x: ml, y: mt, width: W - ml - mr, height: H - mt - mb }))));
  }

  /** The roof lines with their labels and hovers, clipped to the plot; returns the group and the legend rows. */
  function drawRoofs(M, roofs, P) {
    const { X, Y, lx0, lx1, ly0, peak } = P;
    const { computeRoofs, memRoofs } = roofs;
    const roofG = svg("g", { "clip-path": "url(#plotclip)" });
    const xMin = 10 ** lx0, xMax = 10 ** lx1;
    const ROOF_COLOR = { stream: ["#2f5bd3"], gather: ["#7b3fb0", "#a673d1", "#c9a6e6"] };
    const roofLegend = [];
    const used = { stream: 0, gather: 0 };
    memRoofs.forEach((m) => {
      const pal = ROOF_COLOR[m.kind];
      const col = pal[Math.min(used[m.kind]++, pal.length - 1)];
      const ridge = peak / m.bw;
      const line = svg("line", { class: "roof " + m.kind, x1: X(xMin), y1: Y(m.bw * xMin), x2: X(ridge), y2: Y(peak), stroke: col, "stroke-dasharray": m.kind === "gather" ? "7 4" : null });
      RS.hover(line, () => m.kind + " roof", () => [["what", m.label], ["bandwidth", U.byteRate(m.bw)], ["ridge point", U.intensity(ridge)]]);
      roofG.appendChild(line);
      roofLegend.push([col, m.label + ": " + U.byteRate(m.bw)]);
      const lx = Math.min(ridge / 3, Math.max(xMin * 1.5, 10 ** (ly0 + 0.4) / m.bw));  // left end, inside the plot
      const ang = (Math.atan2(Y(m.bw * lx * 10) - Y(m.bw * lx), X(lx * 10) - X(lx)) * 180) / Math.PI;
      const tx = X(lx), ty = Y(m.bw * lx) - 6;
      roofG.appendChild(svg("text", { class: "rooflbl", x: tx, y: ty, fill: col, transform: "rotate(" + ang + " " + tx + " " + ty + ")", text: m.short + " " + U.byteRate(m.bw) }));
    });
    const maxBw = Math.max(...memRoofs.map((m) => m.bw));
    for (const c of computeRoofs) {
      const col = c.main ? "#b5541c" : "#d99262";
      const line = svg("line", { class: "roof compute", x1: X(Math.max(xMin, c.flops / maxBw)), y1: Y(c.flops), x2: X(xMax), y2: Y(c.flops), stroke: col, "stroke-dasharray": c.main ? null : "6 4" });
      const label = c.main ? M.peak_label : c.label;
      RS.hover(line, () => "compute roof", () => [["what", label], ["peak", U.flopRate(c.flops)], ["used for the bounds", c.main ? "yes (the run's dtype)" : "no"]]);
      roofG.appendChild(line);
      roofG.appendChild(svg("text", { class: "rooflbl", x: X(xMax) - 6, y: Y(c.flops) - 6, "text-anchor": "end", fill: col, text: label + " " + U.flopRate(c.flops) }));
      roofLegend.push([col, label + ": " + U.flopRate(c.flops)]);
    }
    return { roofG, roofLegend };
  }

  /** One circle per point (stages large), plus the unique-bytes twin of a gather node; click opens it in the hierarchy. */
  function drawPoints(stagePts, opPts, P) {
    const { X, Y } = P;
    const ptG = svg("g");
    for (const n of opPts.slice().reverse().concat(stagePts)) {
      const r = ctx.R(n), y = Y(r.achieved_flops), col = RS.stageColor(n.stage), big = n.level === "stage";
      const open = () => { ctx.setFocus(n.parent && !big ? n.parent : n); ctx.select(n); document.getElementById("hierarchy").scrollIntoView(); };
      const ui = ctx.uniqueIntensity(n);
      if (ui) {
        ptG.appendChild(svg("line", { class: "pair", x1: X(r.intensity), y1: y, x2: X(ui), y2: y, style: { stroke: col } }));
        const u = svg("circle", { class: "pt unique " + n.level, cx: X(ui), cy: y, r: big ? 6.5 : 4.2, style: { stroke: col }, data: { path: n.path } });
        RS.hover(u, () => n.name + " · on unique bytes", () => pointRows(n));
        u.addEventListener("click", open);
        ptG.appendChild(u);
      }
      const c = svg("circle", { class: "pt " + n.level, cx: X(r.intensity), cy: y, r: big ? 7.5 : 4.8, fill: col, "fill-opacity": big ? 0.95 : 0.85, data: { path: n.path, bound: n.extra.bound || "" } });
      RS.hover(c, () => n.name, () => pointRows(n));
      c.addEventListener("click", open);
      ptG.appendChild(c);
    }
    return ptG;
  }

  function chart(M, stagePts, opPts) {
    const roofs = roofsOf(M);
    const P = scales(M, stagePts.concat(opPts), roofs);
    const s = svg("svg", { class: "chart", viewBox: "0 0 " + P.W + " " + P.H, role: "img", "aria-label": "roofline chart", id: "roofline-chart" });
    drawAxes(s, P);
    const { roofG, roofLegend } = drawRoofs(M, roofs, P);
    s.appendChild(roofG);
    s.appendChild(drawPoints(stagePts, opPts, P));
    return el("div", null, s, el("div", { class: "legend", style: { marginTop: "6px" } },
      roofLegend.map(([col, txt]) => el("span", { class: "item" }, el("span", { class: "swatch", style: { background: col, height: "3px" } }), txt)),
      el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#888", borderRadius: "50%", border: "1.5px solid #15202e", width: "13px", height: "13px" } }), "stage"),
      el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#aaa", borderRadius: "50%", width: "9px", height: "9px" } }), "op (top " + opPts.length + " by time)"),
      el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#fff", borderRadius: "50%", border: "1.5px solid #888", width: "11px", height: "11px" } }), "gather node on unique bytes"),
      el("span", { class: "item faint", text: "colour = stage" })));
  }

  /** Beside the chart: the plotted points by time, the 0-FLOP nodes, the unclassified stages, the suspect fractions and the machine figures. */
  function sidePanel(M, pts, zeroFlop, noCost) {
    const rows = pts.slice().sort((a, b) => b.time_s - a.time_s).slice(0, 16);
    const nameCol = { key: "name", label: "node", get: (n) => n.name, fmt: (n) => el("span", { title: n.path, class: "ptname" }, el("span", { class: "dot", style: { background: RS.stageColor(n.stage) } }), n.level === "op" ? opLabel(n) : n.path + " (stage)", n.level === "op" && n.parent ? el("span", { class: "where", text: shortName(n.parent) }) : null) };
    const timeCol = { key: "time", label: "time", num: true, get: (n) => n.time_s, fmt: (n) => ctx.fig(U.time(n.time_s), ctx.provOf(n, "time_s")) };
    const boundCol = { key: "bound", label: "bound", get: (n) => n.extra.bound || null, fmt: ctx.boundBadge };
    const tcols = [nameCol, timeCol,
      { key: "perf", label: "achieved", num: true, title: "FLOP/s; the intensity and every other figure are in the point's tooltip", get: (n) => ctx.R(n).achieved_flops, fmt: (n) => ctx.fig(U.flopRate(ctx.R(n).achieved_flops), ctx.provOf(n, "roofline")) },
      { key: "frac", label: "% of ceiling", num: true, get: ctx.ceilingOf, fmt: ctx.ceilingCell }, boundCol];
    const side = el("div", { id: "roofline-side" }, el("h3", { text: "Plotted points by time" }), el("div", { class: "scroll", style: { maxHeight: "330px" } }, RS.sortableTable(tcols, rows, { sortKey: "time", cls: "compact" })));
    if (zeroFlop.length) {
      const zcols = [nameCol, timeCol,
        { key: "bw", label: "bandwidth", num: true, get: (n) => ctx.R(n).achieved_bytes_per_s, fmt: (n) => ctx.fig(U.byteRate(ctx.R(n).achieved_bytes_per_s), ctx.provOf(n, "roofline")) },
        { key: "frac", label: "% of roof", num: true, title: "of the node's memory roof (stream or gather)", get: ctx.ceilingOf, fmt: (n) => el("span", { title: ctx.roofText(ctx.R(n)) }, ctx.ceilingCell(n)) }, boundCol];
      side.appendChild(el("h3", { style: { marginTop: "14px" }, text: "Not on the chart: 0 FLOPs (bandwidth only)" }));
      side.appendChild(el("div", { class: "scroll", id: "roofline-zero", style: { maxHeight: "200px" } }, RS.sortableTable(zcols, zeroFlop, { sortKey: "time", cls: "compact" })));
    }
    if (noCost.length) side.appendChild(el("p", { class: "small muted" }, "Not classified (no cost figures): ", noCost.map((n, i) => el("span", { title: n.extra.bound_reason || "", text: (i ? ", " : "") + n.name })), "."));
    const suspects = nodes.filter(ctx.suspect);
    if (suspects.length) {
      // one line per reason (the roof in question), its nodes folded: not one amber line per node
      const groups = new Map();
      for (const n of suspects) groups.set(ctx.suspectReason(n), [...(groups.get(ctx.suspectReason(n)) || []), n]);
      const label = (n) => (n.level === "stage" ? n.name : n.path) + ": " + ctx.roofPct(n, ctx.ceilingOf(n));
      side.appendChild(el("div", { class: "note", id: "roof-suspect", style: { marginTop: "10px" } },
        el("b", { text: "?" }), " marks a fraction above the measured roof; do not read it as a fraction of this machine's capacity:",
        el("ul", null, [...groups.entries()].map(([why, ns]) => el("li", { class: "suspect-group" },
          ns.length + " node" + (ns.length === 1 ? "" : "s") + " — " + why + " ",
          el("details", { class: "shapes", style: { display: "inline-block" } }, el("summary", { text: "which" }),
            el("ol", null, ns.map((n) => el("li", { text: label(n) })))))))));
    }
    side.appendChild(machineDetails(M));
    return side;
  }

  /** An op's name without the autograd wrapper (the full name is in the row's title). */
  function opLabel(n) { return (n.label || n.name).replace(/^autograd::engine::evaluate_function: /, "").replace(/^torch::autograd::CppNode<(.*)>$/, "$1"); }
  function pointRows(n) {
    return [["level", n.level], ["stage", n.stage || "-"], ["time / step", U.time(n.time_s)], ["FLOPs", U.flops(n.flops)], ["bytes", U.bytes(n.bytes)]]
      .concat(ctx.roofRows(n), [["path", n.path]]);
  }
  function machineDetails(M) {
    const th = M.thresholds || {};
    const rows = [
      ["host", [M.host, M.cpu_model].filter(Boolean).join(" · ")],
      ["measured", [M.measured_at, M.mode ? M.mode + " measurement" : null].filter(Boolean).join(", ")],
      ["run at", [M.device, M.threads + " thread(s)", M.dtype].join(", ")],
      ["compute peak", M.peak_label + ": " + U.flopRate(M.peak_flops)],
      ["other compute roofs", (M.compute_roofs || []).filter((c) => !c.main).map((c) => c.label + " " + U.flopRate(c.flops)).join("; ") || "-"],
      ["stream bandwidth", M.stream_label + ": " + U.byteRate(M.stream_bandwidth)],
      ["gather roofs", (M.gather_roofs || []).map((g) => g.label + ": " + U.byteRate(g.bytes_per_s)).join("; ") || "-"],
      ["gather bandwidth measured", Array.isArray(M.gather_bandwidth_range) ? U.byteRate(M.gather_bandwidth_range[0]) + " – " + U.byteRate(M.gather_bandwidth_range[1]) + " (uniform indices, by row and table size)" : "-"],
      ["ridge point (stream)", U.intensity(M.ridge_intensity)],
      // dram_latency_s from profile schema v2 on; v1 wrote latency_ns
      ["DRAM latency", isNum(M.dram_latency_s) ? U.sig(M.dram_latency_s * 1e9, 3) + " ns" : isNum(M.latency_ns) ? U.sig(M.latency_ns, 3) + " ns" : "-"],
      ["overhead floor", isNum(th.overhead_per_call_s) ? U.time(th.overhead_per_call_s) + " per call, or under " + U.pct(th.overhead_roof_fraction, 0) + " of both roofs" : "-"],
      ["roof statistic", th.roof_statistic ? th.roof_statistic + " over repeats" : "-"],
    ];
    if (Array.isArray(M.notes) && M.notes.length) rows.push(["notes", M.notes.join("; ")]);
    return el("details", { class: "shapes", id: "machine", style: { marginTop: "12px" } }, el("summary", { text: "machine figures: " + (M.host || "host") + ", " + (M.mode || "") + " measurement" }), RS.kvTable(rows));
  }
});
