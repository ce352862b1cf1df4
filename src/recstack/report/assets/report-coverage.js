/* recstack report section: cost-model coverage: op time with and without a cost formula, the ops
 * without one and the work the counter could not place (profile.extra.cost_model). */
"use strict";

REPORT.section("coverage", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D, runT } = ctx;
  const CM = D.cost_model;
  const box = RS.card("uncovered", "Cost-model coverage", "Ops the cost model has no FLOP/byte formula for: their time is real, but their FLOPs and bytes are unknown, so the sums above them are partial and the roofline understates them.");
  if (!CM) {
    box.appendChild(RS.note("Not available: this profile was taken without the cost model.", "info"));
  } else {
    box.appendChild(RS.kvTable([
      ["op time with a formula", ctx.fig(U.pct(CM.covered_time_share), "derived")],
      ["op time without one", ctx.fig(U.pct(CM.uncovered_time_share), "derived")],
      ["formula errors", U.count(CM.formula_errors)],
    ]));
    const list = CM.uncovered_ops || [];
    if (!list.length) {
      box.appendChild(el("div", { style: { marginTop: "10px" } }, RS.note("Every op in this profile has a cost formula.", "info")));
    } else {
      const cols = [
        { key: "name", label: "op", get: (o) => String(o.name), fmt: (o) => el("span", { class: "mono", text: String(o.name) }) },
        { key: "reason", label: "why", get: (o) => o.reason, fmt: (o) => el("span", { class: "small muted", text: RS.valueText(o.reason) }) },
        { key: "time", label: "time / step", num: true, get: (o) => o.time_s, fmt: (o) => ctx.fig(U.time(o.time_s), "derived") },
        { key: "share", label: "share of step", num: true, get: (o) => (runT && isNum(o.time_s) ? o.time_s / runT : null), fmt: (o) => ctx.fig(U.pct(runT && isNum(o.time_s) ? o.time_s / runT : null), "derived") },
        { key: "calls", label: "calls / step", num: true, get: (o) => o.calls, fmt: (o) => U.count(o.calls) },
      ];
      box.appendChild(el("div", { class: "scroll", style: { maxHeight: "360px", marginTop: "10px" } }, RS.sortableTable(cols, list, { sortKey: "time" })));
    }
    const unplaced = CM.unplaced || [];
    if (unplaced.length) {
      const cols = [
        { key: "module", label: "module", get: (o) => String(o.module), fmt: (o) => el("span", { class: "mono", text: String(o.module) }) },
        { key: "op", label: "op", get: (o) => String(o.op), fmt: (o) => el("span", { class: "mono", text: String(o.op) }) },
        { key: "calls", label: "calls / step", num: true, get: (o) => o.calls, fmt: (o) => U.count(o.calls) },
        { key: "flops", label: "FLOPs", num: true, get: (o) => o.flops, fmt: (o) => ctx.fig(U.flops(o.flops), "formula") },
        { key: "bytes", label: "bytes", num: true, get: (o) => o.bytes, fmt: (o) => ctx.fig(U.bytes(o.bytes), "formula") },
      ];
      box.appendChild(el("h3", { style: { marginTop: "14px" }, text: "Counted but not placed" }));
      box.appendChild(el("p", { class: "small muted", text: "Work the cost counter saw that matched no node of the tree; it is in no node's figures." }));
      box.appendChild(el("div", { class: "scroll", id: "unplaced" }, RS.sortableTable(cols, unplaced, { sortKey: "bytes" })));
    }
  }
  ctx.main.appendChild(box);
});
