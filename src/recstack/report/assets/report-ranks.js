/* recstack report section: a multi-rank profile's ranks. A rank selector (the page shows that rank's
 * tree; default: the critical path), per-rank compute / communication / waiting and what each rank holds,
 * the imbalance per stage (max / mean over ranks), the planner's estimates against the measurement and
 * the communication phases against the collective benchmark. Every figure comes from the profile's
 * ``distributed`` section (formulas in docs/distributed.md). */
"use strict";

REPORT.section("ranks", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const dist = ctx.D.distributed;
  if (!dist) return;
  const roots = ctx.D.rank_roots || [];
  const select = el("select", { id: "rank-select" });
  select.appendChild(el("option", { value: "", text: "critical path (rank " + dist.critical_rank + ")" }));
  roots.forEach((r, i) => { if (r) select.appendChild(el("option", { value: String(i), text: "rank " + i })); });
  select.value = ctx.shownRank === null ? "" : String(ctx.shownRank);
  select.addEventListener("change", () => REPORT.showRank(ctx.app, select.value === "" ? null : Number(select.value)));
  const shown = ctx.shownRank === null ? "the critical path: rank " + dist.critical_rank + ", the rank with the most compute per step" : "rank " + ctx.shownRank;
  const t = (v) => (isNum(v) ? ctx.fig(U.time(v), "measured") : "-");
  const d = (v) => (isNum(v) ? ctx.fig(U.time(v), "derived") : "-");
  const c = (v, f) => (isNum(v) ? ctx.fig(f(v), "formula") : "-");
  const perRank = RS.sortableTable([
    { key: "rank", label: "rank", num: true, get: (r) => r.rank, fmt: (r) => String(r.rank) + (r.rank === dist.critical_rank ? " (critical)" : "") },
    { key: "time", label: "step", num: true, get: (r) => r.time_s, fmt: (r) => t(r.time_s) },
    { key: "compute", label: "compute", num: true, get: (r) => r.compute_s, fmt: (r) => d(r.compute_s) },
    { key: "comm", label: "communication", num: true, get: (r) => r.communication_s, fmt: (r) => t(r.communication_s) },
    { key: "wait", label: "beyond the fastest", num: true, title: "communication beyond the fastest rank's (derived; the measured split is in the next three columns)", get: (r) => r.wait_s, fmt: (r) => d(r.wait_s) },
    { key: "pw", label: "waiting for the last rank", num: true, title: "collective pass: its collectives in flight before every rank had called them", get: (r) => r.peer_wait_s, fmt: (r) => t(r.peer_wait_s) },
    { key: "tr", label: "transfer", num: true, title: "collective pass: its collectives in flight after every rank had called them", get: (r) => r.transfer_measured_s, fmt: (r) => t(r.transfer_measured_s) },
    { key: "oth", label: "other", num: true, title: "communication beyond waiting and transfer: Python/TorchRec work around the collectives", get: (r) => r.communication_other_s, fmt: (r) => d(r.communication_other_s) },
    { key: "shards", label: "shards / tables", num: true, get: (r) => r.shards, fmt: (r) => r.shards + " / " + r.tables },
    { key: "lookups", label: "lookups", num: true, get: (r) => r.lookups, fmt: (r) => c(r.lookups, U.compact) },
    { key: "req", label: "bytes requested", num: true, get: (r) => r.bytes_requested, fmt: (r) => c(r.bytes_requested, U.bytes) },
    { key: "uniq", label: "bytes unique", num: true, get: (r) => r.bytes_unique, fmt: (r) => c(r.bytes_unique, U.bytes) },
    { key: "mem", label: "table memory", num: true, get: (r) => r.table_bytes, fmt: (r) => c(r.table_bytes, U.bytes) },
    { key: "ovh", label: "stage-pass overhead", num: true, title: "the rank's stage-pass step over its uninstrumented step", get: (r) => r.stage_pass_ratio, fmt: (r) => (isNum(r.stage_pass_ratio) ? ctx.fig(U.sig(r.stage_pass_ratio, 3) + "×", "measured") : "-") },
  ], dist.per_rank, { sortKey: null });
  const imb = dist.imbalance || { by_stage: {}, totals: {} };
  const ratio = (v) => (isNum(v) ? ctx.fig(U.sig(v, 3) + "×", "derived") : "-");
  const imbRows = Object.entries(imb.by_stage).map(([k, v]) => ({ k, v })).concat(Object.entries(imb.totals).map(([k, v]) => ({ k: "total " + k, v })));
  const imbTable = RS.sortableTable([
    { key: "k", label: "stage / figure", get: (r) => r.k, fmt: (r) => r.k },
    { key: "v", label: "max / mean over ranks", num: true, get: (r) => r.v, fmt: (r) => ratio(r.v) },
  ], imbRows, { sortKey: "v" });
  const kids = [
    el("p", null, el("label", { for: "rank-select", text: "Show the tree of: " }), select, el("span", { class: "small muted", text: "  now: " + shown })),
    dist.oversubscription_note ? RS.note(dist.oversubscription_note, "warn") : null,
    el("h3", { text: "Per rank" }), el("div", { class: "scroll" }, perRank),
    el("h3", { text: "Imbalance" }),
    el("p", { class: "small", text: "Longest wait of a rank " + U.time(imb.max_wait_s) + " per step, mean " + U.time(imb.mean_wait_s) + "." }),
    el("div", { class: "scroll" }, imbTable),
  ];
  const planner = dist.planner;
  if (planner) {
    kids.push(el("h3", { text: "Planner against measurement" }), el("p", { class: "small", text: planner.method }),
      el("div", { class: "scroll" }, RS.sortableTable([
        { key: "table", label: "table", get: (r) => r.table, fmt: (r) => r.table },
        { key: "rank", label: "rank", num: true, get: (r) => r.rank, fmt: (r) => String(r.rank) },
        { key: "sharding", label: "sharding", get: (r) => r.sharding, fmt: (r) => r.sharding },
        { key: "est", label: "estimated", num: true, get: (r) => r.estimated_s, fmt: (r) => ctx.fig(U.time(r.estimated_s), "formula") },
        { key: "meas", label: "measured", num: true, get: (r) => r.measured_s, fmt: (r) => d(r.measured_s) },
        { key: "err", label: "measured / estimated", num: true, get: (r) => (r.estimated_s > 0 ? r.measured_s / r.estimated_s : null), fmt: (r) => ratio(r.estimated_s > 0 ? r.measured_s / r.estimated_s : null) },
        { key: "st", label: "storage est. / tensor", num: true, get: (r) => r.estimated_storage_bytes, fmt: (r) => (isNum(r.estimated_storage_bytes) ? U.bytes(r.estimated_storage_bytes) : "-") + " / " + (isNum(r.table_bytes) ? U.bytes(r.table_bytes) : "-") },
      ], planner.shards, { sortKey: null })));
    if (planner.communication_note) {
      kids.push(RS.note("Planner communication estimate: " + planner.communication_note + ".", "info"));
    }
  } else {
    kids.push(RS.note("No planner estimates: the sharding plan was built by hand (a plan file, or row-wise on CPU).", "info"));
  }
  if (dist.communication_roofline) {
    kids.push(el("h3", { text: "Communication against the collective benchmarks (size sweep and replay)" }),
      el("div", { class: "scroll" }, RS.sortableTable([
        { key: "phase", label: "phase", get: (r) => r.phase, fmt: (r) => r.phase },
        { key: "coll", label: "benchmark", get: (r) => r.collective, fmt: (r) => r.collective },
        { key: "bytes", label: "bytes sent", num: true, get: (r) => r.bytes, fmt: (r) => c(r.bytes, U.bytes) },
        { key: "meas", label: "measured", num: true, get: (r) => r.measured_s, fmt: (r) => t(r.measured_s) },
        { key: "bench", label: "size sweep", num: true, title: "the machine's even-split size-sweep benchmark at the modelled bytes", get: (r) => r.benchmark_s, fmt: (r) => t(r.benchmark_s) },
        { key: "ratio", label: "measured / size sweep", num: true, get: (r) => r.ratio, fmt: (r) => ratio(r.ratio) },
        { key: "wait", label: "waiting", num: true, title: "collective pass: before the last rank called them", get: (r) => r.wait_s, fmt: (r) => t(r.wait_s) },
        { key: "tr", label: "transfer", num: true, title: "collective pass: the slowest rank, after every rank had called them", get: (r) => r.transfer_s, fmt: (r) => t(r.transfer_s) },
        { key: "oth", label: "other", num: true, get: (r) => r.other_s, fmt: (r) => d(r.other_s) },
        { key: "trb", label: "size sweep at those bytes", num: true, title: "the size-sweep benchmark of the kind named, at each collective's own bytes, summed", get: (r) => r.transfer_benchmark_s, fmt: (r) => t(r.transfer_benchmark_s) + (r.transfer_benchmark ? " (" + r.transfer_benchmark.replace("size sweep: ", "") + ")" : "") },
        { key: "trr", label: "transfer / size sweep", num: true, get: (r) => r.transfer_ratio, fmt: (r) => ratio(r.transfer_ratio) },
        { key: "rep", label: "replay", num: true, title: "the model's own collectives (kinds, per-peer splits, dtypes, order) replayed bare with torch.distributed", get: (r) => r.replay_s, fmt: (r) => t(r.replay_s) },
        { key: "repr", label: "transfer / replay", num: true, get: (r) => r.replay_ratio, fmt: (r) => ratio(r.replay_ratio) },
        { key: "bound", label: "bound", get: (r) => r.bound || "", fmt: (r) => r.bound || "-" },
      ], dist.communication_roofline, { sortKey: null })));
  }
  ctx.main.appendChild(RS.card("ranks", "Ranks (" + dist.world_size + ", " + dist.sharding + ")",
    "Each rank ran the same timing and op passes; the communication stage holds the collectives moved out of the stages they ran in. Beyond the fastest = a rank's communication beyond the fastest rank's (derived); the collective pass splits it into waiting for the last rank to call each collective, the transfer once all had, and other (Python/TorchRec work), all measured.", ...kids));
});
