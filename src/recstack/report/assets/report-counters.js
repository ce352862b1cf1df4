/* recstack report section: hardware counters: per forward stage, from perf (profile.extra.counters);
 * says why when they are unavailable. */
"use strict";

REPORT.section("counters", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D } = ctx;
  const TOPDOWN = [["retiring", "retiring"], ["bad_speculation", "bad spec."], ["frontend_bound", "frontend"], ["backend_bound", "backend"]];
  const C = D.counters;
  const box = RS.card("counters", "Hardware counters", "Per forward stage, from perf: cycles, instructions and cache misses per step, IPC, misses per 1000 instructions and top-down level 1 where the CPU reports it.");
  if (!C) {
    box.appendChild(RS.note("Hardware counters not recorded in this profile (profiled with counters off).", "info"));
  } else if (!C.available) {
    box.appendChild(RS.note("unavailable: " + (C.reason || "no reason given"), "info"));
  } else {
    const list = Object.entries(C.stages || {}).map(([stage, v]) => ({ stage, ...v }));
    const n = (k, label, fmt) => ({ key: k, label, num: true, get: (r) => r[k], fmt: (r) => (isNum(r[k]) ? ctx.fig(fmt(r[k]), "measured") : "-") });
    const cols = [
      { key: "stage", label: "stage", get: (r) => r.stage, fmt: (r) => el("span", null, el("span", { class: "swatch", style: { background: RS.stageColor(r.stage), marginRight: "6px", verticalAlign: "-1px" } }), r.stage) },
      n("cycles", "cycles / step", (v) => U.si(v, "")), n("instructions", "instructions / step", (v) => U.si(v, "")),
      { key: "ipc", label: "IPC", num: true, get: (r) => r.ipc, fmt: (r) => (isNum(r.ipc) ? ctx.fig(U.sig(r.ipc, 3), "derived") : "-") },
      n("cache_misses", "cache misses / step", (v) => U.si(v, "")),
      { key: "mpki", label: "misses / 1k instr.", num: true, get: (r) => r.cache_misses_per_kinstr, fmt: (r) => (isNum(r.cache_misses_per_kinstr) ? ctx.fig(U.sig(r.cache_misses_per_kinstr, 3), "derived") : "-") },
      { key: "topdown", label: "top-down L1", sort: false, get: () => null, fmt: (r) => (r.topdown ? el("span", { class: "small", text: TOPDOWN.filter(([k]) => isNum(r.topdown[k])).map(([k, lbl]) => lbl + " " + U.pct(r.topdown[k], 0)).join(" · ") }) : "-") },
      { key: "note", label: "note", sort: false, get: () => null, fmt: (r) => el("span", { class: "small muted", text: r.available === false ? "unavailable: " + (r.reason || "") : r.multiplexed ? "multiplexed (scaled counts)" : "" }) },
    ];
    box.appendChild(RS.kvTable([["method", C.method || "-"], ["perf", C.perf || "-"]]));
    box.appendChild(el("div", { class: "scroll", style: { marginTop: "10px" } }, RS.sortableTable(cols, list, { sortKey: null })));
  }
  ctx.main.appendChild(box);
});
