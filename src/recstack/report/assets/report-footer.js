/* recstack report section: the page footer. */
"use strict";

REPORT.section("footer", (ctx) => {
  const { D } = ctx;
  ctx.app.appendChild(RS.el("footer", { text: "recstack " + D.recstack_version + " · run " + D.run_id + " · a self-contained page: no network access needed" }));
});
