/* recstack report section: the legend of the provenance tags (measured, formula, derived). */
"use strict";

REPORT.section("provenance", (ctx) => {
  const { el } = RS;
  const provbar = el("div", { class: "provbar", id: "provenance-legend" }, el("b", { text: "Where figures come from:" }));
  for (const [k, desc] of Object.entries(ctx.D.provenance_kinds)) provbar.appendChild(el("span", null, ctx.provTag(k), " ", el("b", { text: k }), " – " + desc));
  provbar.appendChild(el("span", { text: "Run and stage times are measured; module and op times are derived (apportioned from their stage)." }));
  ctx.main.appendChild(provbar);
});
