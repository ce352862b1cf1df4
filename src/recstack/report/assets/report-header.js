/* recstack report section: the page header (title, run summary, run id, versions) and the <main>
 * element the later sections fill (ctx.main). */
"use strict";

REPORT.section("header", (ctx) => {
  const { el } = RS;
  const { D, run } = ctx;
  document.title = "recstack report · " + D.title;
  const subBits = [
    run.backend ? "backend " + run.backend : null,
    run.mode ? run.mode + (run.grad_mode ? " (" + run.grad_mode + ")" : "") : null,
    run.batch_size ? "batch " + run.batch_size : null,
    run.dtype ? run.dtype : null,
    run.device ? run.device : null,
    run.threads ? run.threads + " threads" : null,
    run.workload ? "workload " + RS.valueText(run.workload) : null,
    run.scale !== undefined && run.scale !== null ? "scale " + RS.valueText(run.scale) : null,
  ].filter(Boolean);
  const schema = D.schema_version !== null && D.schema_version !== undefined ? " · profile schema v" + D.schema_version : "";
  ctx.app.appendChild(el("header", { class: "top" },
    el("div", null,
      el("div", { class: "brand", text: "recstack · profile report" }),
      el("h1", { id: "report-title", text: D.title }),
      el("div", { class: "sub", text: subBits.join("  ·  ") })),
    el("div", { class: "right" },
      el("div", null, "run id ", el("span", { class: "mono", text: D.run_id })),
      el("div", { id: "versions", text: "recstack " + D.recstack_version + (D.environment && D.environment.host ? " · host " + D.environment.host : "") + schema }))));
  ctx.main = el("main");
  ctx.app.appendChild(ctx.main);
});
