/* recstack advice page: draws one recstack.advice document (recstack/schema/advice_model.py) as written.
 * Sections: header (model, goal, winner), warnings and notes, the ranked table (recommended first, then by step
 * speedup, the document's order), before/after stage bars per recommended lever and for the measured
 * combination, the levers not tried, and how a recommendation is judged. Every number shown is one of the
 * document's; the page only formats and scales them. */
"use strict";

(() => {
  const { el, svg, isNum } = RS;
  const U = UNITS;

  function interval(iv) { return iv ? "[" + U.sig(iv[0], 3) + ", " + U.sig(iv[1], 3) + "]" : "-"; }

  function cost(r) {
    const parts = ["build " + U.time(r.build_s)];
    if (r.deviation) parts.push("deviation " + U.sig(r.deviation.max_rel, 2) + " rel");
    const m = r.resident;
    if (isNum(m.baseline_bytes) && isNum(m.what_if_bytes) && m.what_if_bytes !== m.baseline_bytes) parts.push("memory " + U.bytes(m.baseline_bytes) + " → " + U.bytes(m.what_if_bytes));
    if (r.loss) parts.push("loss after " + r.loss.steps + " steps " + U.sig(r.loss.base, 4) + " → " + U.sig(r.loss.what_if, 4));
    return parts.join(", ");
  }

  function rankTable(doc) {
    const cols = [
      { key: "rank", label: "#", num: true, get: (r) => r.rank },
      { key: "name", label: "lever", get: (r) => r.name, fmt: (r) => el("span", null, r.recommended ? el("b", { class: "rec", text: "★ " }) : "", r.name) },
      { key: "kind", label: "kind", get: (r) => r.kind },
      { key: "stage", label: "stage", get: (r) => r.stage },
      { key: "stage_x", label: "stage", unit: "×", num: true, get: (r) => r.stage_result.speedup, fmt: (r) => U.times(r.stage_result.speedup) },
      { key: "step_x", label: "step", unit: "×", num: true, get: (r) => r.step.speedup, fmt: (r) => U.times(r.step.speedup) },
      { key: "interval", label: "95 % interval", num: true, sort: false, get: (r) => r.step.interval, fmt: (r) => interval(r.step.interval) },
      { key: "cost", label: "cost", sort: false, get: (r) => cost(r), fmt: (r) => cost(r) },
      { key: "change", label: "exact change", sort: false, get: (r) => r.exact_change, fmt: (r) => el("span", { class: "mono", text: r.exact_change }) },
      { key: "reason", label: "verdict", sort: false, get: (r) => r.reason },
    ];
    const rows = doc.ranking.map((r, i) => Object.assign({ rank: i + 1 }, r));
    return el("div", { class: "scroll" }, RS.sortableTable(cols, rows, {
      cls: "ranking", rowAttrs: (r) => ({ class: r.recommended ? "hl" : null, data: { name: r.name, recommended: r.recommended } }),
    }));
  }

  /** Per stage two bars, before (light) and after (the stage's colour), on one scale per lever. */
  function stageBars(r) {
    const rows = [["step", r.step.base_s, r.step.what_if_s]].concat(
      Object.entries(r.stage_times).map(([st, t]) => [st, t.base_s, t.what_if_s]));
    const vals = rows.flatMap((x) => [x[1], x[2]]).filter((v) => isNum(v) && v > 0);
    if (!vals.length) return RS.note("No stage times were recorded for this lever.");
    const max = Math.max(...vals);
    const L = 130, W = 560, bh = 11, gap = 8, H = rows.length * (2 * bh + gap) + 4;
    const g = svg("svg", { viewBox: `0 0 ${L + W + 90} ${H}`, class: "chart bars", role: "img", "aria-label": "stage times before and after " + r.name, style: { width: "100%", maxWidth: (L + W + 90) + "px" } });
    rows.forEach(([st, before, after], i) => {
      const y = 2 + i * (2 * bh + gap);
      const color = st === "step" ? "#13202f" : RS.stageColor(st);
      g.append(svg("text", { x: L - 8, y: y + bh + 4, "text-anchor": "end", "font-size": 12, text: st }));
      [[before, RS.tint(color, 0.6), "before"], [after, color, "after"]].forEach(([v, fill, which], k) => {
        const w = isNum(v) && v > 0 ? (v / max) * W : 0;
        const bar = svg("rect", { x: L, y: y + k * bh, width: w, height: bh - 1, fill, class: "bar " + which, data: { stage: st } });
        RS.hover(bar, () => st + " · " + which, () => [["time per sample", U.time(v)], ["lever", r.name]]);
        g.append(bar, svg("text", { x: L + w + 4, y: y + k * bh + bh - 2, "font-size": 10, fill: "#5b6675", text: U.time(v) }));
      });
    });
    return g;
  }

  function barCards(doc) {
    const shown = doc.ranking.filter((r) => r.recommended || r.kind === "combination");
    if (!shown.length) return [RS.note("No lever beat noise, and no combination was measured: nothing to draw.")];
    return shown.map((r) => el("div", { class: "lever-bars", data: { name: r.name } },
      el("h3", { text: r.name + (r.kind === "combination" ? " (measured together)" : "") + " · step " + U.times(r.step.speedup) }),
      stageBars(r)));
  }

  function main(app) {
    const D = RS.loadData();
    const b = D.baseline;
    app.append(el("header", { class: "top" },
      el("div", null,
        el("div", { class: "brand", text: "recstack · advise" }),
        el("h1", { id: "advice-title", text: D.model }),
        el("div", { class: "sub", id: "advice-sub", text: "goal " + D.goal + " · batch " + b.batch_size + " · " + D.rounds + " alternating rounds · " + D.iters + " timed steps per arm · took " + U.time(D.elapsed_s) }),
        el("div", { class: "sub", id: "winner", text: D.winner ? "winner: " + D.winner : "no lever beat noise: keep the baseline" }))));
    const body = el("main");
    app.append(body);
    if (D.contended) body.append(RS.note("Contended run: " + (D.contention_evidence.join("; ") || "see the profile"), "warn"));
    body.append(RS.card("ranking", "Levers, ranked", "Recommended (★) first, then by step speedup. Times are per sample; speedup = baseline / what-if median of the same alternating rounds. Rule: " + D.noise_rule + "; tolerance " + D.tolerance + ".", rankTable(D)));
    body.append(RS.card("bars", "Before and after, per stage", "Median time per sample of each stage, baseline (light) and what-if (dark), from the same rounds; one scale per lever.", ...barCards(D)));
    if (D.not_tried.length) body.append(RS.card("not-tried", "Not tried", null, el("ul", null, ...D.not_tried.map((s) => el("li", { text: s.name + " (" + s.stage + "): " + s.reason })))));
    if (D.notes.length) body.append(RS.card("notes", "Notes", null, el("ul", null, ...D.notes.map((n) => el("li", { text: n })))));
    app.append(el("footer", { text: "recstack advise · " + D.schema + " v" + D.version + " · docs/advise.md" }));
  }

  RS.boot(main);
})();
