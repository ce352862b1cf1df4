/* recstack report section: stage shares. A stacked bar and a table per stage: time, spread, share, time
 * outside modules, apportion factor, cost, bound and % of ceiling, and the kernel's per-step counters
 * of the stage (extra.rusage: page faults, context switches) when the profile has them. */
"use strict";

REPORT.section("stages", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D, root } = ctx;
  const rusage = (n) => (n.extra.rusage && typeof n.extra.rusage === "object" ? n.extra.rusage : null);
  const stages = root.children.filter((n) => n.level === "stage");
  {
    const bar = el("div", { class: "stack", id: "stage-bar" });
    const denom = Math.max(root.time_s, stages.reduce((s, n) => s + n.time_s, 0)) || 1;
    for (const n of stages) {
      const w = (n.time_s / denom) * 100;
      const seg = el("div", { style: { width: w + "%", background: RS.stageColor(n.stage) } }, w > 9 ? el("span", { text: n.name + " " + (w).toFixed(0) + "%" }) : null);
      RS.hover(seg, () => n.name, () => ctx.nodeRows(n));
      seg.addEventListener("click", () => { ctx.setFocus(n); document.getElementById("hierarchy").scrollIntoView(); });
      bar.appendChild(seg);
    }
    const cols = [
      { key: "stage", label: "stage", get: (n) => n.name, fmt: (n) => el("span", { class: "nowrap" }, el("span", { class: "swatch", style: { background: RS.stageColor(n.stage), marginRight: "6px", verticalAlign: "-1px" } }), n.name) },
      { key: "time", label: "time / step", num: true, get: (n) => n.time_s, fmt: (n) => ctx.fig(U.time(n.time_s), ctx.provOf(n, "time_s")) },
      { key: "p10", label: "p10 – p90", num: true, get: (n) => n.extra.time_s_p10, fmt: (n) => (isNum(n.extra.time_s_p10) ? ctx.fig(U.time(n.extra.time_s_p10) + " – " + U.time(n.extra.time_s_p90), "measured") : "-") },
      { key: "share", label: "share of step", num: true, get: (n) => ctx.share(n), fmt: (n) => ctx.fig(U.pct(ctx.share(n)), "derived") },
      { key: "self", label: "outside modules", num: true, get: (n) => n.self_time_s, fmt: (n) => ctx.fig(U.time(n.self_time_s), ctx.provOf(n, "self_time_s")) },
      { key: "k", label: "apportion factor", num: true, title: "stage time over its op-pass time: how much torch.profiler stretched this stage", get: (n) => n.extra.apportion_factor, fmt: (n) => (isNum(n.extra.apportion_factor) ? ctx.fig(U.sig(n.extra.apportion_factor, 3) + "×", "derived") : "-") },
    ];
    if (D.has_cost) cols.push({ key: "flops", label: "FLOPs", num: true, get: (n) => n.flops, fmt: (n) => (isNum(n.flops) ? ctx.fig(U.flops(n.flops), ctx.provOf(n, "flops")) : "-") });
    if (D.machine) cols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null, fmt: ctx.boundBadge }, { key: "ceiling", label: "% of ceiling", num: true, get: ctx.ceilingOf, fmt: ctx.ceilingCell });
    if (stages.some(rusage)) {
      const pair = (n, a, b) => (rusage(n) ? ctx.fig(U.compact(rusage(n)[a]) + " / " + U.compact(rusage(n)[b]), "measured") : "-");
      cols.push(
        { key: "faults", label: "faults / step", num: true, title: "minor / major page faults per step (getrusage, mean over the central steps); first touches of fresh buffers show as minor faults", get: (n) => (rusage(n) ? rusage(n).minor_faults : null), fmt: (n) => pair(n, "minor_faults", "major_faults") },
        { key: "ctxsw", label: "ctx switches / step", num: true, title: "voluntary / involuntary context switches per step (getrusage, mean over the central steps); involuntary ones mean the process was preempted", get: (n) => (rusage(n) ? rusage(n).involuntary_ctx_switches : null), fmt: (n) => pair(n, "voluntary_ctx_switches", "involuntary_ctx_switches") });
    }
    const mem = (n) => (n.extra.memory_peak && typeof n.extra.memory_peak === "object" ? n.extra.memory_peak : null);
    if (stages.some(mem)) {
      cols.push(
        { key: "mem", label: "memory peak", num: true, title: "peak of live allocator bytes inside the stage, above the step's start (the memory pass, one untimed step; docs/memory.md)", get: (n) => (mem(n) ? mem(n).peak_bytes : null), fmt: (n) => (mem(n) ? ctx.fig(U.bytes(mem(n).peak_bytes), "measured") : "-") },
        { key: "mempred", label: "predicted", num: true, title: "the footprint model's prediction of the same figure (zoo models)", get: (n) => (mem(n) ? mem(n).predicted_peak_bytes : null), fmt: (n) => (mem(n) && isNum(mem(n).predicted_peak_bytes) ? ctx.fig(U.bytes(mem(n).predicted_peak_bytes), "predicted") : "-") });
    }
    if (stages.some((n) => n.extra.note)) cols.push({ key: "note", label: "note", get: (n) => n.extra.note || "", sort: false, fmt: (n) => el("span", { class: "small muted", text: n.extra.note || "" }) });
    const p10note = "p10/p90 over the timed steps show the run-to-run spread.";
    const suspects = stages.filter(ctx.suspect);
    const footnote = suspects.length ? el("p", { class: "small suspect-note" }, "? ", suspects.map((n) => n.name + ": " + ctx.suspectReason(n)).join("; ")) : null;
    ctx.main.appendChild(RS.card("stages", "Stage shares", "Time per step of each stage in the timing pass (hooks at stage roots; interquartile mean over the central steps). " + p10note + " Click a segment to open it in the hierarchy.",
      stages.length ? [bar, el("div", { class: "scroll" }, RS.sortableTable(cols, stages, { sortKey: null })), footnote] : RS.note("This profile has no stages.", "info")));
  }
});
