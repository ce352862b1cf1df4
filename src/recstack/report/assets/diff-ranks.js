/* recstack diff page section: the ranks of two profiles when at least one ran several ranks
 * (DiffResult.ranks, see recstack/report/diff_ranks.py). A rank selector (each side's critical path, or
 * rank i of A against rank i of B) with that rank's stages A / B / delta, each side's per-rank figures
 * (step, compute, communication split into waiting for the last rank, transfer and other), and the
 * imbalance ratios of A and B. Every figure comes from the payload; nothing is computed here. */
"use strict";

const DIFF_RANKS = (main, D) => {
  const R = D.ranks;
  if (!R) return;
  const { el, isNum } = RS;
  const U = UNITS;
  const fig = (text, how) => el("span", { class: "nowrap", title: how }, text);
  const t = (v, how) => (isNum(v) ? fig(U.time(v), how || "measured") : "-");
  const select = el("select", { id: "diff-rank-select" });
  R.views.forEach((v) => select.appendChild(el("option", { value: v.key, text: v.label })));
  const holder = el("div", { class: "scroll", id: "diff-rank-stages" });
  const show = (key) => {
    const view = R.views.find((v) => v.key === key) || R.views[0];
    holder.replaceChildren(RS.sortableTable([
      { key: "stage", label: "stage", get: (r) => r.stage, fmt: (r) => r.stage },
      { key: "a", label: "A time/step", num: true, get: (r) => r.a, fmt: (r) => t(r.a) },
      { key: "b", label: "B time/step", num: true, get: (r) => r.b, fmt: (r) => t(r.b) },
      { key: "d", label: "delta", num: true, get: (r) => r.delta_s, fmt: (r) => (isNum(r.delta_s) ? U.signed(U.time(r.delta_s), r.delta_s) : "-") },
      { key: "rel", label: "delta %", num: true, get: (r) => r.rel, fmt: (r) => U.relPct(r.rel) },
    ], view.rows, { sortKey: null, cls: "compact", rowAttrs: (r) => ({ data: { stage: r.stage } }) }));
    holder.dataset.view = view.key;
  };
  select.addEventListener("change", () => show(select.value));
  show("critical");
  const sideTable = (name) => {
    const s = R.sides[name];
    return el("div", null,
      el("h3", { text: name + ": " + s.world_size + " rank(s)" + (s.sharding ? ", " + s.sharding : "") + ", critical rank " + s.critical_rank + (s.oversubscribed ? " (oversubscribed)" : "") }),
      el("div", { class: "scroll" }, RS.sortableTable([
        { key: "rank", label: "rank", num: true, get: (r) => r.rank, fmt: (r) => String(r.rank) + (r.rank === s.critical_rank ? " (critical)" : "") },
        { key: "time", label: "step", num: true, get: (r) => r.time_s, fmt: (r) => t(r.time_s) },
        { key: "compute", label: "compute", num: true, get: (r) => r.compute_s, fmt: (r) => t(r.compute_s, "derived") },
        { key: "comm", label: "communication", num: true, get: (r) => r.communication_s, fmt: (r) => t(r.communication_s) },
        { key: "pw", label: "waiting for the last rank", num: true, title: "collective pass: its collectives in flight before every rank had called them", get: (r) => r.peer_wait_s, fmt: (r) => t(r.peer_wait_s) },
        { key: "tr", label: "transfer", num: true, title: "collective pass: its collectives in flight after every rank had called them", get: (r) => r.transfer_measured_s, fmt: (r) => t(r.transfer_measured_s) },
        { key: "other", label: "other", num: true, title: "communication beyond waiting and transfer: Python/TorchRec work around the collectives", get: (r) => r.communication_other_s, fmt: (r) => t(r.communication_other_s, "derived") },
      ], s.per_rank, { sortKey: null, cls: "compact" })));
  };
  const ratio = (v) => (isNum(v) ? fig(U.sig(v, 3) + "×", "derived") : "-");
  const imb = RS.sortableTable([
    { key: "f", label: "figure (max / mean over ranks)", get: (r) => r.figure, fmt: (r) => r.figure },
    { key: "a", label: "A", num: true, get: (r) => r.a, fmt: (r) => ratio(r.a) },
    { key: "b", label: "B", num: true, get: (r) => r.b, fmt: (r) => ratio(r.b) },
    { key: "d", label: "B − A", num: true, get: (r) => r.delta, fmt: (r) => (isNum(r.delta) ? U.sig(r.delta, 3) : "-") },
  ], R.imbalance, { sortKey: null, cls: "compact" });
  const w = R.waits;
  main.appendChild(RS.card("ranks", "Ranks",
    "A multi-rank side's tree above is its critical path (the rank with the most compute per step); choose a rank to compare rank by rank.",
    el("p", null, el("label", { for: "diff-rank-select", text: "Compare: " }), select), holder,
    sideTable("A"), sideTable("B"),
    el("h3", { text: "Imbalance" }),
    el("p", { class: "small", text: "Longest wait of a rank per step: A " + (isNum(w.max_wait_s.a) ? U.time(w.max_wait_s.a) : "-") + ", B " + (isNum(w.max_wait_s.b) ? U.time(w.max_wait_s.b) : "-") + "." }),
    el("div", { class: "scroll", id: "diff-imbalance" }, imb)));
};
