/* recstack report section: warnings at the top of the page. Contention (environment.contention, when
 * its producer detected other work on the machine during the run: every figure of the run may be
 * inflated) with its evidence, and the notes written when the profile was loaded (an older schema). */
"use strict";

REPORT.section("warnings", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const c = ctx.D.contention;
  /** A process entry ({pid, name, cores, ...}) as one phrase; anything else as JSON text. */
  const proc = (p) => (p && typeof p === "object" && "name" in p ? String(p.name) + (p.pid !== undefined ? " (pid " + p.pid + ")" : "") + (isNum(p.cores) ? " " + U.sig(p.cores, 2) + " cores" : "") : RS.valueText(p));
  if (c && c.detected === true) {
    const evidence = Array.isArray(c.evidence) ? c.evidence : [];
    const planned = Array.isArray(c.planned_load) ? c.planned_load : [];
    ctx.main.appendChild(el("div", { class: "banner warn", id: "contention", role: "alert" },
      el("b", { text: "Contention detected: " }),
      "other work shared this machine while the run was timed, so its times are probably inflated and its roofline fractions too low. Re-run on a quiet machine before comparing or acting on them.",
      evidence.length ? el("ul", null, evidence.map((e) => el("li", { text: RS.valueText(e) }))) : el("div", { class: "small", text: "The profile names no evidence." }),
      isNum(c.cpu_time_ratio) ? el("div", { class: "small", text: "process CPU time over wall time during the timed steps: " + U.sig(c.cpu_time_ratio, 3) }) : null,
      planned.length ? el("div", { class: "small", text: "planned load (recstack's own processes, not counted as contention): " + planned.map(proc).join("; ") }) : null));
  }
  const notes = Array.isArray(ctx.D.load_notes) ? ctx.D.load_notes : [];
  if (notes.length) {
    ctx.main.appendChild(el("div", { class: "banner info", id: "load-notes" },
      el("b", { text: "Loaded with notes" + (isNum(ctx.D.stats_version) ? " (figures measured under profile schema v" + ctx.D.stats_version + ")" : "") + ": " }),
      el("ul", null, notes.map((n) => el("li", { text: RS.valueText(n) })))));
  }
});
