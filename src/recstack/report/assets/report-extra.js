/* recstack report section: the profile's other top-level data (anything no section above shows). */
"use strict";

REPORT.section("extra", (ctx) => {
  const extra = ctx.D.profile_extra || {};
  if (Object.keys(extra).length) ctx.main.appendChild(RS.card("extra", "Other profile data", null, RS.kvTable(Object.entries(extra))));
});
