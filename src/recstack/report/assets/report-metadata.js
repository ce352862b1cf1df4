/* recstack report section: run metadata (with the whole RunConfig, run.config, when the profile has
 * it), the profiler's overhead and the environment. */
"use strict";

REPORT.section("metadata", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D, run, fig } = ctx;
  const OVERHEAD_SHOWN = /^(uninstrumented_step_s|uninstrumented_step_s_p10|uninstrumented_step_s_p90|stage_pass_step_s|stage_pass_ratio|stage_pass_ratio_ci|op_pass_step_s|op_pass_ratio|pairs|profiling_wall_s|method)$/;

  function metaCard(title, rows) {
    return el("section", { class: "card", style: { marginBottom: "0" } }, el("h2", { text: title }),
      rows.length ? RS.kvTable(rows) : el("p", { class: "muted small", text: "Not recorded in this profile." }));
  }
  function stageRoots(v) {
    const list = el("div");
    for (const [path, info] of Object.entries(v)) {
      list.appendChild(el("div", null, el("span", { class: "mono", text: path }), " → ", el("span", { class: "dot", style: { background: RS.stageColor(info && info.stage), display: "inline-block", width: "8px", height: "8px", borderRadius: "2px", margin: "0 5px 0 2px" } }), String(info && info.stage), el("span", { class: "faint", text: info && info.rule ? "  (" + info.rule + ")" : "" })));
    }
    return list;
  }
  /** The run's whole configuration (every RunConfig field), folded: one row per field. */
  function runConfig(v) {
    const n = Object.keys(v).length;
    return el("details", { class: "json", id: "run-config" }, el("summary", { text: "RunConfig: " + n + " field" + (n === 1 ? "" : "s") }),
      RS.kvTable(Object.entries(v).map(([k, x]) => [k, Array.isArray(x) && x.length === 0 ? "none" : x])));
  }
  function runRows(r) {
    const rows = [];
    for (const [k, v] of Object.entries(r)) {
      if ((k === "stage_roots" || k === "stage_methods") && v && typeof v === "object") rows.push([k, stageRoots(v)]);
      else if (k === "config" && v && typeof v === "object" && !Array.isArray(v)) rows.push([k, runConfig(v)]);
      else if (Array.isArray(v) && v.length === 0) rows.push([k, "none"]);
      else rows.push([k, v]);
    }
    if (isNum(D.schema_version)) {
      const older = isNum(D.stats_version) && D.stats_version !== D.schema_version ? " (its figures were measured under v" + D.stats_version + ")" : "";
      rows.push(["profile schema version", D.schema_version + older]);
    }
    return rows;
  }
  function overheadCard(o) {
    const range = (a, b) => (isNum(a) && isNum(b) ? " (p10 " + U.time(a) + ", p90 " + U.time(b) + ")" : "");
    const ci = Array.isArray(o.stage_pass_ratio_ci) ? " (95% CI " + U.ratio(o.stage_pass_ratio_ci[0]) + " – " + U.ratio(o.stage_pass_ratio_ci[1]) + ")" : "";
    const rows = [
      ["uninstrumented step", fig(U.time(o.uninstrumented_step_s) + range(o.uninstrumented_step_s_p10, o.uninstrumented_step_s_p90), "measured")],
      ["stage-pass step", fig(U.time(o.stage_pass_step_s), "measured")],
      ["stage pass ratio", fig(U.ratio(o.stage_pass_ratio) + ci, "measured")],
      ["op pass step", o.op_pass_step_s === null || o.op_pass_step_s === undefined ? "op pass not run" : fig(U.time(o.op_pass_step_s), "measured")],
      ["op pass ratio", isNum(o.op_pass_ratio) ? fig(U.ratio(o.op_pass_ratio) + " of uninstrumented", "derived") : "-"],
      ["A/B pairs", o.pairs],
      ["profiling wall time", isNum(o.profiling_wall_s) ? U.time(o.profiling_wall_s) : "-"],
    ];
    for (const [k, v] of Object.entries(o)) if (!OVERHEAD_SHOWN.test(k)) rows.push([k, v]);
    return el("section", { class: "card", id: "overhead", style: { marginBottom: "0" } },
      el("h2", { text: "Profiler overhead" }), RS.kvTable(rows),
      o.method ? el("p", { class: "small muted", text: "Method: " + o.method }) : null);
  }

  // folded: the answer (where the time goes) comes first; the run's details are one click away
  const ratio = isNum((D.overhead || {}).stage_pass_ratio) ? ", profiler overhead " + U.ratio(D.overhead.stage_pass_ratio) : "";
  ctx.main.appendChild(el("details", { class: "fold", id: "metadata-fold" },
    el("summary", { text: "Run, profiler overhead and environment (" + Object.keys(run).length + " run fields" + ratio + ")" }),
    el("div", { class: "grid cols-2", id: "metadata" },
      metaCard("Run", runRows(run)),
      el("div", { class: "stackcol" }, overheadCard(D.overhead || {}), metaCard("Environment", Object.entries(D.environment || {})))),
    el("div", { style: { height: "18px" } })));
});
