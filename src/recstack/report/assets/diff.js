/* recstack diff page: renders the embedded DiffResult (see recstack/report/diff.py).
 * Sections: header and verdict, the noise rule, run/stage comparison chart with p10-p90 whiskers,
 * settings that differ, and the node-by-node table (when module trees match). */
"use strict";

(() => {
  const { el, svg, clear, isNum } = RS;
  const F = RS;
  const U = UNITS;
  const VERDICT_COLOR = { regression: "#c62f3a", improvement: "#1f8a4c", noise: "#8a95a3", added: "#a86a00", removed: "#a86a00" };

  const relText = (d) => U.relPct(d.rel);
  const deltaText = (d) => (isNum(d.delta_s) ? U.signed(U.time(d.delta_s), d.delta_s) : "-");
  const badge = (v) => el("span", { class: "badge " + v, text: v });

  function main(app) {
    const D = RS.loadData();
    document.title = "recstack diff · " + D.label_a + " vs " + D.label_b;
    app.dataset.matchedLevel = D.matched_level;

    app.appendChild(el("header", { class: "top" },
      el("div", null,
        el("div", { class: "brand", text: "recstack · profile diff" }),
        el("h1", { id: "diff-title", text: "Profile diff" }),
        el("div", { class: "runs" },
          el("div", null, el("span", { class: "ab", text: "A" }), el("span", { text: D.label_a }), el("span", { class: "faint", text: "  baseline" })),
          el("div", null, el("span", { class: "ab b", text: "B" }), el("span", { text: D.label_b }), el("span", { class: "faint", text: "  candidate" }))),
        el("div", { class: "sub", text: "Times are per step (interquartile means over the central steps); Δ = B − A." })),
      el("div", { class: "right" }, el("div", { text: "recstack " + D.recstack_version }))));
    const main = el("main");
    app.appendChild(main);

    // ---- key figures ---------------------------------------------------------------------------------
    const r = D.run;
    const anyCost = [r].concat(D.stages, D.nodes).some((d) => isNum(d.flops_a) || isNum(d.flops_b) || isNum(d.bytes_a) || isNum(d.bytes_b));
    const kpis = el("div", { class: "kpis", id: "kpis" });
    const kpi = (k, v, n, cls) => kpis.appendChild(el("div", { class: "kpi " + (cls || "") }, el("div", { class: "k", text: k }), el("div", { class: "v", text: v }), n ? el("div", { class: "n", text: n }) : null));
    kpi("Step time, B", U.time(r.time_b), "A: " + U.time(r.time_a) + " (median, measured)");
    kpi("Change", relText(r), deltaText(r) + " · " + r.verdict, r.verdict === "regression" ? "bad" : r.verdict === "improvement" ? "good" : "");
    kpi("Regressions beyond noise", String(D.counts.regressions), "run, stages" + (D.nodes.length ? ", modules and ops" : ""), D.counts.regressions ? "bad" : "");
    kpi("Improvements beyond noise", String(D.counts.improvements), null, D.counts.improvements ? "good" : "");
    kpi("Matched at", D.matched_level === "op" ? "every level" : "stage level", D.matched_level === "op" ? "run, stages, modules, ops by path" : "run and stages by name");
    if (isNum(D.fail_pct)) {
      const failed = D.failures && D.failures.length;
      kpi("CI gate (> " + D.fail_pct + " % slower)", failed ? "FAIL" : "pass", failed ? D.failures.join(", ") : "no run or stage over the limit", failed ? "bad" : "good");
    }
    main.appendChild(kpis);
    (D.notes || []).forEach((n) => main.appendChild(F.note(n)));

    main.appendChild(F.card("rule", "How changes are judged", null,
      F.kvTable([
        ["matched level", D.matched_level + " — " + D.match_note],
        ["noise rule", D.rule.text],
        ["FLOPs and bytes", "computed by formula, so any difference is a change (no noise judgement); " + D.counts.cost_changes + " node(s) changed"],
      ])));

    // ---- stage chart ---------------------------------------------------------------------------------
    main.appendChild(F.card("stages", "Run and stages", "Bars are median time per step, A above B; whiskers span p10–p90 over the timed steps. A change is real only when the whiskers do not overlap and it passes the floor above.", stageChart([r].concat(D.stages), main.clientWidth - 42), stageTable([r].concat(D.stages))));
    DIFF_RANKS(main, D);  // diff-ranks.js: only when a side ran several ranks

    function stageChart(rows, width) {
      const W = Math.max(640, Math.min(width || 1000, 1400)), rowH = 50, ml = 170, mr = 230, mt = 24;
      const H = mt + rows.length * rowH + 24;
      const vals = [];
      for (const d of rows) {
        for (const v of [d.time_a, d.time_b]) if (isNum(v)) vals.push(v);
        for (const s of [d.spread_a, d.spread_b]) if (Array.isArray(s)) vals.push(s[1]);
      }
      const max = Math.max(...vals, 1e-9) * 1.05;
      const X = (v) => ml + (v / max) * (W - ml - mr);
      const s = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "run and stage times, A and B", id: "stage-chart" });
      const grid = svg("g", { class: "grid" }), axis = svg("g", { class: "axis" });
      const step = niceStep(max / 6);
      for (let v = 0; v <= max; v += step) {
        grid.appendChild(svg("line", { x1: X(v), x2: X(v), y1: mt - 6, y2: H - 22 }));
        axis.appendChild(svg("text", { x: X(v), y: H - 8, "text-anchor": "middle", text: U.tick(U.time(v)) }));
      }
      s.append(grid, axis);
      s.appendChild(svg("text", { class: "title", x: ml, y: 12, text: "time per step" }));
      rows.forEach((d, i) => {
        const y = mt + i * rowH;
        const col = d.level === "run" ? "#5b6b7f" : F.stageColor(d.stage);
        s.appendChild(svg("text", { x: ml - 10, y: y + 20, "text-anchor": "end", "font-size": 13, "font-weight": d.level === "run" ? 700 : 500, fill: "#1d2633", text: d.level === "run" ? "run (" + d.name + ")" : d.name }));
        s.appendChild(svg("text", { x: ml - 10, y: y + 35, "text-anchor": "end", "font-size": 10.5, fill: "#8a95a3", text: "A / B" }));
        [["a", d.time_a, d.spread_a, F.tint(col, 0.55)], ["b", d.time_b, d.spread_b, col]].forEach(([k, t, sp, fill], j) => {
          const by = y + 8 + j * 16;
          if (!isNum(t)) {
            s.appendChild(svg("text", { x: ml + 4, y: by + 10, "font-size": 11, fill: "#a86a00", text: k === "a" ? "not in A" : "not in B" }));
            return;
          }
          const bar = svg("rect", { x: ml, y: by, width: Math.max(1, X(t) - ml), height: 13, rx: 2, fill, data: { path: d.path, run: k } });
          F.hover(bar, () => d.name + " · " + k.toUpperCase(), () => [["time / step", U.time(t)], ["p10 – p90", Array.isArray(sp) ? U.time(sp[0]) + " – " + U.time(sp[1]) : "-"]]);
          s.appendChild(bar);
          if (Array.isArray(sp)) {
            const cy = by + 6.5;
            s.appendChild(svg("line", { x1: X(sp[0]), x2: X(sp[1]), y1: cy, y2: cy, stroke: "#15202e", "stroke-width": 1.3 }));
            for (const v of sp) s.appendChild(svg("line", { x1: X(v), x2: X(v), y1: cy - 4, y2: cy + 4, stroke: "#15202e", "stroke-width": 1.3 }));
          }
        });
        const vc = VERDICT_COLOR[d.verdict] || "#8a95a3";
        s.appendChild(svg("text", { x: W - mr + 16, y: y + 24, "font-size": 14, "font-weight": 650, fill: d.verdict === "noise" ? "#5f6b7a" : vc, text: relText(d) }));
        s.appendChild(svg("rect", { x: W - mr + 120, y: y + 11, width: 92, height: 18, rx: 9, fill: F.tint(vc, 0.85) }));
        s.appendChild(svg("text", { x: W - mr + 166, y: y + 24, "text-anchor": "middle", "font-size": 11, "font-weight": 650, fill: vc, text: d.verdict }));
        if (i < rows.length - 1) s.appendChild(svg("line", { x1: 10, x2: W - 10, y1: y + rowH - 4, y2: y + rowH - 4, stroke: "#eef1f5" }));
      });
      return s;
    }
    function trimMiddle(text, width) {
      if (text.length <= width) return text;
      const head = Math.floor((width - 1) / 3);
      return text.slice(0, head) + "…" + text.slice(text.length - (width - 1 - head));
    }
    function niceStep(raw) {
      const p = 10 ** Math.floor(Math.log10(raw));
      for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
      return 10 * p;
    }

    function cols(withCost, withSpread) {
      const c = [
        { key: "path", label: "node", get: (d) => d.path, fmt: (d) => el("span", { title: d.path, class: "nowrap" }, el("span", { class: "dot", style: { background: d.level === "run" ? "#5b6b7f" : F.stageColor(d.stage), display: "inline-block", width: "8px", height: "8px", borderRadius: "2px", marginRight: "6px" } }), d.name, d.level === "run" || d.level === "stage" ? null : el("span", { class: "small faint", text: "  in " + trimMiddle(d.path.slice(0, Math.max(0, d.path.length - d.name.length - 1)), 56) })) },
        { key: "level", label: "level", get: (d) => d.level, fmt: (d) => el("span", { class: "lvltag", text: d.level }) },
        { key: "a", label: "A time / step", num: true, get: (d) => d.time_a, fmt: (d) => U.time(d.time_a) },
        { key: "b", label: "B time / step", num: true, get: (d) => d.time_b, fmt: (d) => U.time(d.time_b) },
        { key: "delta", label: "Δ", num: true, get: (d) => d.delta_s, sortValue: (d) => (isNum(d.delta_s) ? Math.abs(d.delta_s) : null), fmt: (d) => el("span", { class: d.verdict === "regression" ? "pos" : d.verdict === "improvement" ? "neg" : "", text: deltaText(d) }) },
        { key: "rel", label: "Δ %", num: true, get: (d) => d.rel, fmt: (d) => el("span", { class: d.verdict === "regression" ? "pos" : d.verdict === "improvement" ? "neg" : "", text: relText(d) }) },
        withSpread && { key: "spread", label: "A / B spread (p10–p90)", num: true, sort: false, get: () => null, fmt: (d) => (Array.isArray(d.spread_a) && Array.isArray(d.spread_b) ? el("span", { class: "small" }, "A " + U.time(d.spread_a[0]) + " – " + U.time(d.spread_a[1]), el("br"), "B " + U.time(d.spread_b[0]) + " – " + U.time(d.spread_b[1])) : "-") },
        { key: "basis", label: "judged by", get: (d) => d.basis, fmt: (d) => el("span", { class: "small muted nowrap", text: d.basis }) },
        { key: "verdict", label: "verdict", get: (d) => d.verdict, fmt: (d) => badge(d.verdict) },
      ].filter(Boolean);
      if (withCost) {
        c.push({ key: "flops", label: "FLOPs A → B", num: true, get: (d) => d.flops_b, fmt: (d) => (isNum(d.flops_a) || isNum(d.flops_b) ? el("span", { class: d.cost_changed ? "" : "muted", text: U.flops(d.flops_a) + " → " + U.flops(d.flops_b) }) : "-") });
        c.push({ key: "bytes", label: "bytes A → B", num: true, get: (d) => d.bytes_b, fmt: (d) => (isNum(d.bytes_a) || isNum(d.bytes_b) ? el("span", { class: d.cost_changed ? "" : "muted", text: U.bytes(d.bytes_a) + " → " + U.bytes(d.bytes_b) }) : "-") });
      }
      return c;
    }
    function stageTable(rows) { return el("div", { style: { marginTop: "10px" } }, F.sortableTable(cols(anyCost, true), rows, { sortKey: null, cls: "compact", rowAttrs: (d) => ({ data: { verdict: d.verdict, path: d.path } }) })); }

    // ---- settings that differ ------------------------------------------------------------------------
    if (D.setting_changes.length) {
      const t = F.sortableTable([
        { key: "k", label: "setting", get: (c) => c[0], fmt: (c) => el("span", { class: "mono", text: c[0] }) },
        { key: "a", label: "A", get: (c) => F.valueText(c[1]), fmt: (c) => F.valueNode(c[1]), cls: "small" },
        { key: "b", label: "B", get: (c) => F.valueText(c[2]), fmt: (c) => F.valueNode(c[2]), cls: "small" },
      ], D.setting_changes, { sortKey: "k", asc: true });
      main.appendChild(F.card("settings", "Settings that differ", "Run options and environment facts that are not the same in A and B: read the deltas with these in mind.", el("div", { class: "scroll", style: { maxHeight: "320px" } }, t)));
    }

    // ---- nodes ---------------------------------------------------------------------------------------
    const nodesCard = F.card("nodes", "Modules and ops", null);
    if (D.matched_level !== "op") {
      nodesCard.appendChild(F.note("Not compared below stage level: " + D.match_note + ".", "info"));
    } else {
      nodesCard.appendChild(el("p", { class: "lead", text: "Every node below stage level, matched by path. Module and op times are apportioned from their stage, so each is judged against its stage's relative p10–p90 spread (shown), the fixed floor and the absolute floor." }));
      let mode = "changed";
      const search = el("input", { type: "search", placeholder: "filter by path…", "aria-label": "filter nodes" });
      const seg = el("div", { class: "seg" });
      const modes = [["changed", "beyond noise"], ["unmatched", "added / removed"], ["all", "all"]];
      const holder = el("div", { class: "scroll" });
      const draw = () => {
        for (const b of seg.children) b.classList.toggle("on", b.dataset.mode === mode);
        const q = search.value.trim().toLowerCase();
        const rows = D.nodes.filter((d) => (mode === "all" || (mode === "changed" ? d.verdict === "regression" || d.verdict === "improvement" || d.cost_changed : d.verdict === "added" || d.verdict === "removed")) && (!q || d.path.toLowerCase().includes(q)));
        clear(holder);
        if (!rows.length) holder.appendChild(el("p", { class: "muted small", style: { padding: "8px 12px" }, text: "No nodes in this view." }));
        else holder.appendChild(F.sortableTable(cols(anyCost, rows.some((d) => Array.isArray(d.spread_a))), rows, { sortKey: "delta", rowAttrs: (d) => ({ data: { verdict: d.verdict, path: d.path } }) }));
      };
      for (const [m, label] of modes) seg.appendChild(el("button", { type: "button", text: label, data: { mode: m }, onclick: () => { mode = m; draw(); } }));
      search.addEventListener("input", draw);
      const counts = D.nodes.reduce((acc, d) => { acc[d.verdict] = (acc[d.verdict] || 0) + 1; return acc; }, {});
      nodesCard.appendChild(el("div", { class: "toolbar" }, seg, search, el("span", { class: "small muted", text: Object.entries(counts).map(([k, v]) => v + " " + k).join(" · ") })));
      nodesCard.appendChild(holder);
      draw();
    }
    main.appendChild(nodesCard);
    app.appendChild(el("footer", { text: "recstack " + D.recstack_version + " · A run " + D.run_a.run_id + " · B run " + D.run_b.run_id }));
  }

  RS.boot(main);
})();
