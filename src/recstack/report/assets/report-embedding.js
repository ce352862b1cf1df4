/* recstack report section: embedding tables: per table, per step, from the batch's indices
 * (profile.extra.embedding_tables): size, lookups, unique rows, bytes requested and unique; in train mode
 * backward and optimizer bytes. */
"use strict";

REPORT.section("embedding", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D, run } = ctx;
  const tables = D.embedding_tables;
  const train = !!tables && tables.some((t) => "backward_bytes" in t);
  const box = RS.card("embedding", "Embedding tables", "Per table, per step, counted from the batch's indices: size, lookups and the rows they touch. Requested bytes count every lookup; unique bytes count each touched row once (the traffic a perfect cache would leave)." +
    (train ? " Train mode (" + RS.valueText(run.backend) + " backend, " + RS.valueText(run.optimizer) + "): backward bytes are the gradient traffic of the lookups, optimizer bytes the update of the touched rows (formula), optimizer state the state tensors held per table." : ""));
  if (!tables) {
    box.appendChild(RS.note("Per-table embedding detail not recorded: the profiler records it for models whose sparse arch exposes its tables (the zoo's backends) when batches carry raw indices.", "info"));
  } else {
    const num = (k, label, fmt, kind, title) => ({ key: k, label, num: true, title, get: (t) => t[k], fmt: (t) => (isNum(t[k]) ? ctx.fig(fmt(t[k]), kind) : "-") });
    const bar = (k, label, kind, color) => {
      const max = Math.max(...tables.map((t) => (isNum(t[k]) ? t[k] : 0)), 1);
      return { key: k, label, num: true, get: (t) => t[k], fmt: (t) => (isNum(t[k]) ? el("span", { class: "nowrap" }, ctx.fig(U.bytes(t[k]), kind), el("span", { class: "sharebar" }, el("i", { style: { width: (100 * t[k]) / max + "%", background: color } }))) : "-") };
    };
    const cols = [
      { key: "table", label: "table", get: (t) => String(t.table), fmt: (t) => el("span", { title: "feature " + RS.valueText(t.feature) }, el("span", { class: "mono", text: String(t.table) }), t.kind ? el("span", { class: "small faint", text: " " + t.kind }) : null) },
      num("rows", "rows", U.count, null),
      num("dim", "dim", U.count, null),
      { key: "dtype", label: "dtype", get: (t) => t.dtype },
      num("table_bytes", "table size", U.bytes, "derived", "rows × row bytes"),
      num("lookups", "lookups", U.count, "measured"),
      num("unique_rows", "unique rows", U.count, "measured"),
      num("pooling_factor", "pooling", (v) => U.sig(v, 3), "derived", "lookups per sample"),
      num("reuse", "reuse", (v) => U.sig(v, 3) + "×", "derived", "lookups per unique row"),
      bar("bytes_requested", "bytes requested", "formula", RS.stageColor("embedding")),
      num("bytes_unique", "bytes unique", U.bytes, "formula", "unique rows × row bytes"),
    ];
    if (train) {
      cols.push(bar("backward_bytes", "backward bytes", "formula", RS.stageColor("backward")));
      cols.push(bar("optimizer_bytes", "optimizer bytes", "formula", RS.stageColor("optimizer")));
      cols.push(num("optimizer_rows_touched", "rows updated", U.count, "formula"));
      if (tables.some((t) => "optimizer_state_bytes" in t)) cols.push(num("optimizer_state_bytes", "optimizer state", U.bytes, "measured", "optimizer state tensors of this table (tensor sizes); 0 when the optimizer keeps none or it is fused into the kernel's buffers"));
    }
    box.appendChild(el("div", { class: "scroll" }, RS.sortableTable(cols, tables, { sortKey: "bytes_requested" })));
  }
  ctx.main.appendChild(box);
});
