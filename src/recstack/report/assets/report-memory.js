/* recstack report section: memory: bytes resident per stage and the process's peak memory during one
 * step (profile.extra.memory). */
"use strict";

REPORT.section("memory", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D } = ctx;
  const mem = D.memory;
  const box = RS.card("memory", "Memory", "Bytes resident per stage (parameters, buffers and optimizer state, from tensor sizes) and the process's peak memory during one step.");
  if (!mem) {
    box.appendChild(RS.note("Memory not recorded in this profile.", "info"));
  } else {
    const provs = mem.provenance || {};
    // Keys carry their unit from profile schema v2 on ("parameters_bytes"); v1 wrote "parameters".
    const kinds = ["parameters", "buffers", "optimizer_state"];
    const bytesOf = (v, k) => (isNum(v[k + "_bytes"]) ? v[k + "_bytes"] : isNum(v[k]) ? v[k] : null);
    const res = Object.entries(mem.resident_by_stage || {}).map(([stage, v]) => {
      const r = { stage };
      for (const k of kinds) r[k + "_bytes"] = bytesOf(v, k);
      r.total = kinds.reduce((s, k) => s + (r[k + "_bytes"] || 0), 0);
      return r;
    });
    const maxTotal = Math.max(...res.map((r) => r.total), 1);
    const b = (k, label) => ({ key: k, label, num: true, get: (r) => r[k], fmt: (r) => U.bytes(r[k]) });
    const cols = [
      { key: "stage", label: "stage", get: (r) => r.stage, fmt: (r) => el("span", null, el("span", { class: "swatch", style: { background: RS.stageColor(r.stage), marginRight: "6px", verticalAlign: "-1px" } }), r.stage) },
      b("parameters_bytes", "parameters"), b("buffers_bytes", "buffers"), b("optimizer_state_bytes", "optimizer state"),
      { key: "total", label: "total", num: true, get: (r) => r.total, fmt: (r) => el("span", { class: "nowrap" }, U.bytes(r.total), el("span", { class: "sharebar" }, el("i", { style: { width: (100 * r.total) / maxTotal + "%", background: RS.stageColor(r.stage) } }))) },
    ];
    const left = el("div", null, el("h3", { text: "Resident by stage" }),
      res.length ? RS.sortableTable(cols, res, { sortKey: "total" }) : RS.note("No resident tensors recorded.", "info"),
      provs.resident_by_stage ? el("p", { class: "small muted", text: "Source: " + provs.resident_by_stage + "." }) : null);
    const pk = mem.peak_step || {};
    const rows = [
      ["peak during the step", ctx.fig(U.bytes(pk.peak_rss_bytes), "measured")],
      ["at the step's start", isNum(pk.rss_before_step_bytes) ? ctx.fig(U.bytes(pk.rss_before_step_bytes), "measured") : "-"],
      ["increase over the step", isNum(pk.step_increase_bytes) ? ctx.fig(U.bytes(pk.step_increase_bytes), "derived") : "-"],
    ];
    if (isNum(pk.cuda_peak_allocated_bytes)) rows.push(["CUDA peak allocated", ctx.fig(U.bytes(pk.cuda_peak_allocated_bytes), "measured")]);
    rows.push(["basis", pk.basis || "-"]);
    const right = el("div", { id: "peak-memory" }, el("h3", { text: "Peak step memory" }), RS.kvTable(rows),
      el("p", { class: "small muted", text: "Process memory (RSS): model, inputs, temporaries and the Python interpreter." }));
    box.appendChild(el("div", { class: "grid cols-2" }, left, right));
  }
  ctx.main.appendChild(box);
});
