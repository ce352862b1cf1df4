/* recstack sweep report: renders the embedded sweep figures (see recstack/results/sweep_figures.py).
 * Sections: header and counts; the answer first: the best-configuration table (and, when the store's serving
 * table has probes, recstack/results/serving_figures.py, QPS at the target per configuration; when the advice
 * table has rows, recstack/results/advice.py, advise's what-ifs by rank); then
 * throughput vs batch size, step latency vs batch size (p50, p99 dashed), stage shares vs batch size
 * (stacked), the speedup heat map over two fields, and latency vs load per serving configuration. */
"use strict";

(() => {
  const { el, svg, isNum } = RS;
  const U = UNITS;
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  const W = 720, H = 340, M = { l: 70, r: 16, t: 12, b: 40 };

  function logScale(vals, lo, hi) {
    const v = vals.filter((x) => isNum(x) && x > 0);
    const a = Math.log10(Math.min(...v)), b = Math.log10(Math.max(...v));
    const pad = a === b ? 0.5 : 0.05 * (b - a);
    const d0 = a - pad, d1 = b + pad;
    const f = (x) => lo + (Math.log10(x) - d0) / (d1 - d0) * (hi - lo);
    // a labelled tick per decade; where the axis spans less than about two decades, at 2x and 5x as well
    f.ticks = () => {
      const inside = (v) => Math.log10(v) >= d0 && Math.log10(v) <= d1;
      const decades = [];
      for (let e = Math.floor(d0); e <= Math.ceil(d1); e++) decades.push(10 ** e);
      let out = decades.filter(inside);
      if (out.length < 3) out = decades.flatMap((v) => [v, 2 * v, 5 * v]).filter(inside);
      if (out.length < 3) {  // under a factor of ~2.5 (a latency that barely moves): evenly spaced round values
        const lo = 10 ** d0, hi = 10 ** d1, raw = (hi - lo) / 8, mag = 10 ** Math.floor(Math.log10(raw));
        const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= raw);  // at most 2.5 x raw: 3 ticks or more
        out = [];
        for (let k = Math.ceil(lo / step); k * step <= hi; k++) out.push(k * step);
      }
      return out.length ? out : [10 ** ((d0 + d1) / 2)];
    };
    return f;
  }

  function lineChart(id, series, yOf, yFmt, yLabel, dashedOf) {
    const pts = series.flatMap((s) => s.points);
    const ys = pts.flatMap((p) => [yOf(p), dashedOf ? dashedOf(p) : null]).filter((v) => isNum(v) && v > 0);
    if (!ys.length) return RS.note("No successful points to draw.");
    const xs = [...new Set(pts.map((p) => p.batch_size))].sort((a, b) => a - b);
    const x = logScale(xs, M.l, W - M.r), y = logScale(ys, H - M.b, M.t);
    const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", id, role: "img", "aria-label": yLabel + " vs batch size" });
    for (const t of y.ticks()) g.append(svg("line", { x1: M.l, x2: W - M.r, y1: y(t), y2: y(t), stroke: "#e3e7ec" }), svg("text", { x: M.l - 6, y: y(t) + 4, "text-anchor": "end", "font-size": 11, text: yFmt(t) }));
    for (const b of xs) g.append(svg("text", { x: x(b), y: H - M.b + 16, "text-anchor": "middle", "font-size": 11, text: String(b) }));
    g.append(svg("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, text: "batch size" }));
    series.forEach((s, i) => {
      const color = PALETTE[i % PALETTE.length];
      const draw = (get, dash) => {
        const ok = s.points.filter((p) => isNum(get(p)) && get(p) > 0);
        if (!ok.length) return;
        g.append(svg("polyline", { points: ok.map((p) => x(p.batch_size) + "," + y(get(p))).join(" "), fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": dash ? "5 4" : null, class: "series", data: { label: s.label } }));
        for (const p of ok) {
          const c = svg("circle", { cx: x(p.batch_size), cy: y(get(p)), r: 4, fill: p.contended ? "#fff" : color, class: "pt", style: { stroke: color, strokeWidth: "1.6px" } });
          RS.hover(c, () => s.label + " · batch " + p.batch_size, () => [["value", yFmt(get(p))], ["contended", p.contended ? "yes" : "no"]]);
          g.append(c);
        }
      };
      draw(yOf, false);
      if (dashedOf) draw(dashedOf, true);
    });
    return el("div", null, g, legend(series));
  }

  function legend(series) {
    return el("div", { class: "legend small" }, ...series.map((s, i) => el("span", { style: { marginRight: "14px" } },
      el("span", { style: { display: "inline-block", width: "12px", height: "12px", background: PALETTE[i % PALETTE.length], marginRight: "4px", verticalAlign: "middle" } }), s.label)));
  }

  function stageBars(series) {
    const wrap = el("div", { class: "stage-grid", id: "stage-shares", style: { display: "flex", flexWrap: "wrap", gap: "12px" } });
    const stages = [...new Set(series.flatMap((s) => s.points.flatMap((p) => Object.keys(p.stage_shares))))];
    for (const s of series) {
      const bw = 34, h = 160, w = 40 + s.points.length * (bw + 10);
      const g = svg("svg", { viewBox: `0 0 ${w} ${h + 40}`, class: "stack", style: { width: w + "px", height: h + 40 + "px", flex: "none" } });
      s.points.forEach((p, i) => {
        let top = h;
        for (const st of stages) {
          const v = p.stage_shares[st] || 0;
          if (v <= 0) continue;
          const r = svg("rect", { x: 30 + i * (bw + 10), y: top - v * h, width: bw, height: v * h, fill: RS.stageColor(st), class: "seg", data: { stage: st } });
          RS.hover(r, () => s.label + " · batch " + p.batch_size, () => [[st, U.pct(v)]]);
          g.append(r);
          top -= v * h;
        }
        g.append(svg("text", { x: 30 + i * (bw + 10) + bw / 2, y: h + 14, "text-anchor": "middle", "font-size": 10, text: String(p.batch_size) }));
      });
      g.append(svg("text", { x: 2, y: h + 32, "font-size": 11, text: s.label }));
      wrap.append(g);
    }
    const keys = el("div", { class: "legend small" }, ...stages.map((st) => el("span", { style: { marginRight: "12px" } },
      el("span", { style: { display: "inline-block", width: "12px", height: "12px", background: RS.stageColor(st), marginRight: "4px", verticalAlign: "middle" } }), st)));
    return el("div", null, wrap, keys);
  }

  function heatmaps(maps) {
    const wrap = el("div", { id: "heatmaps", style: { display: "flex", flexWrap: "wrap", gap: "18px" } });
    for (const m of maps) {
      const max = Math.max(...m.speedup.flat().filter(isNum));
      const t = el("table", { class: "data heat", data: { model: m.model }, style: { width: "auto" } });
      t.append(el("caption", { text: m.model + " (" + m.y + " down, " + m.x + " across)" }));
      t.append(el("tr", null, el("th", { text: m.y + " \\ " + m.x }), ...m.x_values.map((v) => el("th", { text: String(v) }))));
      m.y_values.forEach((yv, i) => {
        t.append(el("tr", null, el("th", { text: String(yv) }), ...m.speedup[i].map((v) => {
          const share = isNum(v) && max > 1 ? Math.log(v) / Math.log(max) : 0;
          return el("td", { class: "num cell", style: { background: isNum(v) ? `rgba(78,121,167,${0.1 + 0.8 * share})` : "#f4f4f4", color: share > 0.55 ? "#fff" : "#111" }, text: isNum(v) ? v.toFixed(2) + "x" : "-" });
        })));
      });
      wrap.append(t);
    }
    return wrap;
  }

  function cfgText(b) {
    if (!b) return "-";
    const parts = ["batch " + b.batch_size, b.backend];
    for (const f of ["table_dtype", "dtype"]) if (b[f] && b[f] !== "fp32") parts.push(b[f]);
    if (b.threads) parts.push(b.threads + (b.threads === 1 ? " thread" : " threads"));
    if (b.mode === "train") parts.push("train");
    parts.push(b.workload);
    return parts.join(", ");
  }

  function bestTable(rows) {
    const ratio = (v) => (isNum(v) ? v.toFixed(2) + "x" : "-");
    const cols = [
      { key: "model", label: "model", get: (r) => r.model },
      { key: "best", label: "best configuration", get: (r) => (r.best ? cfgText(r.best) : r.mostly_contended ? "none presented: mostly contended" : "-"), sort: false },
      { key: "tput", label: "throughput", unit: "samples/s", num: true, get: (r) => (r.best ? r.best.throughput : null), fmt: (r) => U.compact(r.best ? r.best.throughput : null) },
      { key: "p50", label: "p50", num: true, get: (r) => (r.best ? r.best.step_p50_s : null), fmt: (r) => U.time(r.best ? r.best.step_p50_s : null) },
      { key: "p99", label: "p99", num: true, get: (r) => (r.best ? r.best.step_p99_s : null), fmt: (r) => U.time(r.best ? r.best.step_p99_s : null) },
      { key: "worst", label: "vs worst", num: true, get: (r) => r.speedup_vs_worst, fmt: (r) => ratio(r.speedup_vs_worst) },
      { key: "default", label: "vs default", num: true, get: (r) => r.speedup_vs_default, fmt: (r) => ratio(r.speedup_vs_default) },
      { key: "from", label: "from", get: (r) => (!r.best ? "-" : r.best.source === "advise" ? "advise " + r.best.advice_id + ": " + r.best.lever : "sweep"), sort: false },
      { key: "left", label: "left out", get: (r) => r.contended_left_out + " contended, " + r.failed + " failed" + (r.advice_ranked ? ", " + r.advice_ranked + " what-if(s) ranked" : ""), sort: false },
    ];
    return el("div", { id: "best-table" }, RS.sortableTable(cols, rows, { sortKey: "model", asc: true }));
  }

  // recstack advise's what-ifs (recstack/results/advice.py: advice_section), per model and run, by rank
  function adviceTable(rows) {
    const ratio = (v) => (isNum(v) ? v.toFixed(2) + "x" : "-");
    const cols = [
      { key: "model", label: "model", get: (r) => r.model },
      { key: "run", label: "advise run", get: (r) => r.advice_id + " (" + r.goal + ", " + r.host + ")" },
      { key: "rank", label: "rank", num: true, get: (r) => r.rank, fmt: (r) => String(r.rank) },
      { key: "lever", label: "lever", get: (r) => r.name + (r.winner ? " (winner)" : "") },
      { key: "change", label: "change", get: (r) => r.exact_change, sort: false },
      { key: "speedup", label: "step speedup", num: true, get: (r) => r.step_speedup, fmt: (r) => ratio(r.step_speedup) },
      { key: "ci", label: "95% interval", get: (r) => (isNum(r.step_ci_low) ? ratio(r.step_ci_low) + " - " + ratio(r.step_ci_high) : "-"), sort: false },
      { key: "tput", label: "what-if", unit: "samples/s", num: true, get: (r) => (isNum(r.what_if_s) && r.what_if_s > 0 ? 1 / r.what_if_s : null), fmt: (r) => (isNum(r.what_if_s) && r.what_if_s > 0 ? U.compact(1 / r.what_if_s) : "-") },
      { key: "verdict", label: "verdict", get: (r) => r.verdict + (r.recommended ? ", recommended" : "") + (r.contended ? ", contended" : "") },
    ];
    return el("div", { id: "advice-table" }, RS.sortableTable(cols, rows, { sortKey: "model", asc: true }));
  }

  function loadChart(S) {
    const cfgs = S.configurations;
    const pts = cfgs.flatMap((c) => c.points);
    const lats = pts.map((p) => p.latency_s).concat(S.targets.map((t) => t[1])).filter((v) => isNum(v) && v > 0);
    if (!lats.length) return RS.note("No probe finished with a latency to draw.");
    const qs = pts.map((p) => p.qps).filter((v) => isNum(v) && v > 0);
    const x = logScale(qs, M.l, W - M.r), y = logScale(lats, H - M.b, M.t);
    const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", id: "serving-chart", role: "img", "aria-label": "latency vs load" });
    for (const t of y.ticks()) g.append(svg("line", { x1: M.l, x2: W - M.r, y1: y(t), y2: y(t), stroke: "#e3e7ec" }), svg("text", { x: M.l - 6, y: y(t) + 4, "text-anchor": "end", "font-size": 11, text: U.time(t) }));
    for (const t of x.ticks()) g.append(svg("text", { x: x(t), y: H - M.b + 16, "text-anchor": "middle", "font-size": 11, text: U.compact(t) }));
    g.append(svg("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, text: "scheduled load (queries/s)" }));
    for (const [pct, s] of S.targets) {
      g.append(svg("line", { x1: M.l, x2: W - M.r, y1: y(s), y2: y(s), stroke: "#e15759", "stroke-width": 1.5, "stroke-dasharray": "6 4", class: "target" }));
      g.append(svg("text", { x: W - M.r - 4, y: y(s) - 5, "text-anchor": "end", "font-size": 11, fill: "#e15759", text: "target p" + pct + " " + U.time(s) }));
    }
    cfgs.forEach((c, i) => {
      const color = PALETTE[i % PALETTE.length];
      const ok = c.points.filter((p) => isNum(p.latency_s) && p.latency_s > 0);
      if (!ok.length) return;
      g.append(svg("polyline", { points: ok.map((p) => x(p.qps) + "," + y(p.latency_s)).join(" "), fill: "none", stroke: color, "stroke-width": 2, class: "series", data: { label: c.label } }));
      for (const p of ok) {
        const dot = svg("circle", { cx: x(p.qps), cy: y(p.latency_s), r: 4, fill: p.contended ? "#fff" : color, class: "pt", style: { stroke: color, strokeWidth: "1.6px" } });
        RS.hover(dot, () => c.label + " · " + U.compact(p.qps) + " q/s", () => [["p" + c.target_pct, U.time(p.latency_s)], ["achieved", U.compact(p.achieved_qps) + " q/s"], ["meets target", p.meets_target ? "yes" : "no"], ["probe", p.screening ? "screening (fewer samples)" : "full"], ["contended", p.contended ? "yes" : "no"]]);
        g.append(dot);
      }
    });
    return el("div", null, g, legend(cfgs));
  }

  function qpsTable(cfgs) {
    const cols = [
      { key: "cfg", label: "configuration", get: (c) => c.label },
      { key: "target", label: "target", get: (c) => "p" + c.target_pct + " ≤ " + U.time(c.target_s), sort: false },
      { key: "qps", label: "QPS at target", unit: "queries/s", num: true, get: (c) => c.qps_at_target, fmt: (c) => (isNum(c.qps_at_target) ? U.compact(c.qps_at_target) : "not met") },
      { key: "probes", label: "probes", num: true, get: (c) => c.probes, fmt: (c) => String(c.probes) },
    ];
    return el("div", { id: "serving-table" }, RS.sortableTable(cols, cfgs, { sortKey: "qps", asc: false }));
  }

  function main(app) {
    const D = RS.loadData();
    const F = D.figures;
    const c = F.counts;
    app.append(el("header", { class: "top" },
      el("div", null,
        el("div", { class: "brand", text: "recstack · sweep report" }),
        el("h1", { id: "sweep-title", text: D.title }),
        el("div", { class: "sub", id: "counts", text: c.points + " points: " + c.ok + " ok (" + c.contended + " contended), " + c.failed + " failed · store " + D.store })),
      el("div", { class: "right" }, el("div", { text: "recstack " + D.recstack_version }))));
    const body = el("main");
    app.append(body);
    for (const w of F.warnings || []) body.append(RS.note("Warning: " + w, "warn"));
    if (c.contended) body.append(RS.note(c.contended + " of the successful points ran contended (other processes shared the CPUs); their figures are drawn hollow and left out of the best table.", "warn"));
    // the answer first: the best configuration per model (and, from serving searches, the QPS at the target)
    body.append(RS.card("best", "Best configuration per model", "Highest throughput among the uncontended successful points; 'vs worst' and 'vs default' are throughput ratios (default: RunConfig's default deployment fields, when the sweep holds that point). Points that ran contended are left out: their times are inflated by other work on the machine, so a configuration is only as good as its quiet measurement (recstack best --include-contended shows them).", bestTable(F.best)));
    const S = F.serving;
    if (S) body.append(RS.card("serving-qps", "Serving: QPS at the target", S.formulas.qps_at_target + ".", qpsTable(S.configurations)));
    if (F.advice && F.advice.length) body.append(RS.card("advice", "Advice: measured what-ifs (recstack advise)", "Every what-if of recstack advise --store, per model and advise run, by rank. The step speedup and its 95% interval are over that run's own baseline, measured in its alternating rounds; what-if samples/s is its measured median time per sample. The best table ranks a what-if beside the sweep points only when it ran on the same host, scale, workload and mode, uncontended.", adviceTable(F.advice)));
    body.append(RS.card("throughput", "Throughput vs batch size", F.formulas.throughput + ". One line per " + ["model"].concat(F.group_fields).join(" · ") + "; log-log.",
      lineChart("throughput-chart", F.series, (p) => p.throughput, U.compact, "throughput")));
    body.append(RS.card("latency", "Step latency vs batch size", "p50 (solid) and p99 (dashed) of the uninstrumented steps (measured); log-log.",
      lineChart("latency-chart", F.series, (p) => p.step_p50_s, U.time, "step latency", (p) => p.step_p99_s)));
    body.append(RS.card("stages", "Stage shares vs batch size", F.formulas.stage_share + ".", stageBars(F.series)));
    body.append(RS.card("heatmap", "Speedup heat map", F.formulas.heatmap + ".", heatmaps(F.heatmaps)));
    if (S) body.append(RS.card("serving", "Serving: latency vs load", S.formulas.latency + ". One line per configuration of recstack serve --search; the dashed line is the target; hollow: contended; log-log.", loadChart(S)));
    app.append(el("footer", { text: "recstack " + D.recstack_version + " · " + D.sweeps + " sweep(s) wrote this store" }));
  }

  RS.boot(main);
})();
