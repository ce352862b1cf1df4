/* recstack report section: where the time goes, first. The stages largest first with their share (a bar
 * with its number), time, bound and % of ceiling; the run's bound read from the stages' time shares (not
 * from its largest stage alone); the top findings. Everything else on the page details this. */
"use strict";

REPORT.section("summary", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const { D, root } = ctx;
  const stages = root.children.filter((n) => n.level === "stage").sort((a, b) => b.time_s - a.time_s);
  if (!stages.length) return;
  const shareBar = (n) => {
    const s = ctx.share(n);
    return el("div", { class: "sharebar", title: U.pct(s) + " of the step" },
      el("div", { class: "fill", style: { width: (isNum(s) ? Math.min(100, s * 100) : 0) + "%", background: RS.stageColor(n.stage) } }),
      el("span", { class: "lab", text: U.pct(s) }));
  };
  const cols = [
    { key: "stage", label: "stage", get: (n) => n.name, fmt: (n) => el("span", { class: "nowrap" }, el("span", { class: "swatch", style: { background: RS.stageColor(n.stage), marginRight: "6px", verticalAlign: "-1px" } }), n.name) },
    { key: "share", label: "share of step", num: true, get: (n) => ctx.share(n), fmt: shareBar },
    { key: "time", label: "time / step", num: true, get: (n) => n.time_s, fmt: (n) => ctx.fig(U.time(n.time_s), ctx.provOf(n, "time_s")) },
  ];
  if (D.machine) cols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null, fmt: ctx.boundBadge }, { key: "ceiling", label: "% of ceiling", num: true, get: ctx.ceilingOf, fmt: ctx.ceilingCell });
  const shares = D.machine ? ctx.boundShares() : null;
  const lead = shares
    ? el("p", { class: "answer", id: "run-bound" }, "Run bound: ", el("span", { class: "badge " + shares.bound, text: shares.bound }), " — of the step's " + U.time(root.time_s) + ": " + ctx.boundSharesText(shares) + ".")
    : el("p", { class: "answer", id: "run-bound" }, "Step " + U.time(root.time_s) + (D.machine ? "; no stage was classified." : "; no machine figures, so no bound classes (recstack analyse PROFILE --machine auto)."));
  const kids = [lead, RS.sortableTable(cols, stages, { sortKey: null, cls: "compact" })];
  // the findings about the stages that take the most time first (a run-wide finding counts as the whole step);
  // a stage's bound restates the table above, so other kinds come before it
  const weight = (f) => { const s = stages.find((n) => n.name === f.stage); return (s ? s.time_s : (f.stage ? 0 : root.time_s)) / (f.kind === "stage_bound" ? 1e6 : 1); };
  const findings = Array.isArray(D.findings) ? D.findings.slice().sort((a, b) => weight(b) - weight(a)).slice(0, 3) : [];
  if (findings.length) {
    kids.push(el("h3", { text: "Top findings" }),
      el("ul", { class: "top-findings" }, findings.map((f) => el("li", null, f.stage ? el("b", { text: String(f.stage) + ": " }) : null, RS.valueText(f.text)))),
      D.findings.length > findings.length ? el("a", { href: "#findings", class: "small", text: "all " + D.findings.length + " findings" }) : null);
  }
  ctx.main.appendChild(RS.card("summary", "Where the time goes", null, kids));
});
