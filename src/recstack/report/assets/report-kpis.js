/* recstack report section: key figures (step time, latency, throughput, overhead, FLOPs and bytes,
 * cost-model coverage, the run's bound, peak memory), each with its provenance tag. */
"use strict";

REPORT.section("kpis", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D, root, run } = ctx;
  const ov = D.overhead || {};
  const lat = root.extra.latency_s || {};
  const kpis = el("div", { class: "kpis", id: "kpis" });
  const kpiValue = (v) => {
    const i = v.indexOf(" ");
    return i < 0 ? el("div", { class: "v", text: v }) : el("div", { class: "v" }, v.slice(0, i), el("span", { class: "u", text: v.slice(i) }));
  };
  const kpi = (k, v, n, kind) => kpis.appendChild(el("div", { class: "kpi" }, el("div", { class: "k" }, k, ctx.provTag(kind)), kpiValue(v), n ? el("div", { class: "n", text: n }) : null));
  kpi("Step time (interquartile mean)", U.time(root.time_s), isNum(root.extra.time_s_p10) ? "p10 " + U.time(root.extra.time_s_p10) + " · p90 " + U.time(root.extra.time_s_p90) : null, "measured");
  kpi("Latency p50 (uninstrumented)", U.time(lat.p50), isNum(lat.p90) ? "p90 " + U.time(lat.p90) + " · p99 " + U.time(lat.p99) : null, "measured");
  if (isNum(root.extra.throughput_samples_per_s)) kpi("Throughput", U.sig(root.extra.throughput_samples_per_s, 4) + " samples/s", "batch " + RS.valueText(run.batch_size) + " / latency p50", "derived");
  if (isNum(ov.stage_pass_ratio)) kpi("Stage-pass overhead", U.ratio(ov.stage_pass_ratio), Array.isArray(ov.stage_pass_ratio_ci) ? "95% CI " + U.ratio(ov.stage_pass_ratio_ci[0]) + " – " + U.ratio(ov.stage_pass_ratio_ci[1]) : null, "measured");
  if (D.has_cost) {
    kpi("FLOPs / step", U.flops(root.flops), isNum(root.intensity) ? "intensity " + U.intensity(root.intensity) : null, ctx.provOf(root, "flops"));
    kpi("Bytes moved / step", U.bytes(root.bytes), isNum(root.extra.bytes_read) ? "read " + U.bytes(root.extra.bytes_read) + " · written " + U.bytes(root.extra.bytes_written) : null, ctx.provOf(root, "bytes"));
  }
  if (D.cost_model && isNum(D.cost_model.covered_time_share)) kpi("Op time with a cost formula", U.pct(D.cost_model.covered_time_share), (D.cost_model.uncovered_ops || []).length + " op name(s) without one", "derived");
  const shares = D.machine ? ctx.boundShares() : null;
  if (shares) kpi("Run bound (by time share)", shares.bound, ctx.boundSharesText(shares) + " of the step", "derived");
  const peakMem = D.memory && D.memory.peak_step;
  if (peakMem && isNum(peakMem.peak_rss_bytes)) kpi("Peak memory in a step", U.bytes(peakMem.peak_rss_bytes), isNum(peakMem.step_increase_bytes) ? "+" + U.bytes(peakMem.step_increase_bytes) + " over the step's start (RSS)" : "process RSS", "measured");
  ctx.main.appendChild(kpis);
});
