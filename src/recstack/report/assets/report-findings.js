/* recstack report section: findings (profile.extra.findings), what the analyses concluded about this
 * run in words, each with its kind, stage and figure (for example kind bf16_speedup: the measured
 * bf16/fp32 time ratio of a stage). The page shows them as written; a figure flagged roof_suspect
 * (a roof fraction above a probably under-measured roof) is marked "?" with the reason. */
"use strict";

REPORT.section("findings", (ctx) => {
  const { el, isNum } = RS;
  const U = UNITS;
  const list = ctx.D.findings;
  /** The finding's figure; one that is a roof fraction above a suspect roof (roof_suspect) is marked "?". */
  // A fraction of a ceiling reads as a percentage; other units as the number itself.
  const plain = (f) => (f.unit === "fraction" && isNum(f.value) ? U.pct(f.value) : U.sig(f.value, 3));
  const value = (f) => {
    if (f.roof_suspect !== true || !isNum(f.value)) return plain(f);
    return el("span", { class: "suspect", title: "? " + (f.roof_suspect_reason || "above the measured roof") }, plain(f) + "?");
  };
  const box = RS.card("findings", "Findings", "What the analyses concluded about this run, as they wrote it.");
  if (!list) {
    box.appendChild(RS.note("No findings in this profile.", "info"));
  } else {
    const cols = [
      { key: "kind", label: "finding", get: (f) => RS.valueText(f.kind), fmt: (f) => el("span", { class: "mono", text: RS.valueText(f.kind) }) },
      { key: "stage", label: "stage", get: (f) => f.stage || null, fmt: (f) => (f.stage ? el("span", null, el("span", { class: "swatch", style: { background: RS.stageColor(f.stage), marginRight: "6px", verticalAlign: "-1px" } }), String(f.stage)) : "-") },
      { key: "text", label: "what", sort: false, get: (f) => f.text, fmt: (f) => RS.valueText(f.text) },
      { key: "value", label: "value", num: true, get: (f) => (isNum(f.value) ? f.value : null), fmt: value },
    ];
    box.appendChild(RS.sortableTable(cols, list, { sortKey: null }));
  }
  ctx.main.appendChild(box);
});
