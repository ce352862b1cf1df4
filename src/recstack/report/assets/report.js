/* recstack report page: renders the embedded profile payload (see recstack/report/payload.py).
 * Sections: header and key figures, provenance legend, run/environment/overhead, hierarchy (icicle +
 * sortable tree table with drill-down and breadcrumbs), stage shares, roofline (roofs from
 * profile.extra.machine, points from each node's extra.roofline), embedding tables, memory, hardware
 * counters, cost-model coverage, shapes seen. A section the profile lacks says what is missing. */
"use strict";

(() => {
  const { el, svg, clear, isNum } = RS;
  const F = RS;

  const PROV_LETTER = { measured: "m", formula: "f", derived: "d" };
  const TOPDOWN = [["retiring", "retiring"], ["bad_speculation", "bad spec."], ["frontend_bound", "frontend"], ["backend_bound", "backend"]];

  function indexTree(root) {
    let id = 0;
    const all = [];
    (function walk(n, parent, depth) {
      n.id = id++;
      n.parent = parent;
      n.depth = depth;
      n.extra = n.extra || {};
      all.push(n);
      for (const c of n.children) walk(c, n, depth + 1);
    })(root, null, 0);
    return all;
  }

  function ancestors(n) {
    const out = [];
    for (let p = n; p; p = p.parent) out.unshift(p);
    return out;
  }

  function shortName(n) {
    const p = n.parent;
    if (n.level === "module" && p && p.level === "module" && n.name.startsWith(p.name + ".")) {
      const rest = n.name.slice(p.name.length + 1);
      // "layers.0" reads better than "0"
      return /^\d+$/.test(rest) ? p.name.split(".").pop() + "." + rest : rest;
    }
    return n.name;
  }

  function main(app) {
    const D = RS.loadData();
    const root = D.root;
    const nodes = indexTree(root);
    const runT = root.time_s > 0 ? root.time_s : null;
    const share = (n) => (runT ? n.time_s / runT : null);

    function provOf(n, field) {
      const own = n.extra.provenance;
      if (own && typeof own === "object" && typeof own[field] === "string") return own[field];
      const d = D.provenance_defaults[field];
      if (!d) return null;
      return d[n.level] || d["*"] || null;
    }
    function provTag(kind) {
      if (!kind) return null;
      const letter = PROV_LETTER[kind] || kind.slice(0, 1);
      return el("span", { class: "prov " + (PROV_LETTER[kind] ? kind : "derived"), title: kind + ": " + (D.provenance_kinds[kind] || ""), text: letter });
    }
    /** A figure with its unit and a provenance tag. */
    function fig(text, kind) { return el("span", { class: "nowrap" }, text, provTag(kind)); }

    // Roofline figures of a node, as the classifier wrote them (extra.roofline, extra.bound*).
    const R = (n) => (n.extra.roofline && typeof n.extra.roofline === "object" ? n.extra.roofline : null);
    const ceilingOf = (n) => (R(n) && isNum(R(n).ceiling_fraction) ? R(n).ceiling_fraction : null);
    /** Intensity on unique bytes (each gathered row once): only for gather nodes with unique bytes. */
    function uniqueIntensity(n) {
      const r = R(n);
      if (!r || r.roof !== "gather" || !isNum(r.achieved_flops) || !(r.achieved_unique_bytes_per_s > 0)) return null;
      return r.achieved_flops / r.achieved_unique_bytes_per_s;
    }
    function boundBadge(n) {
      const ex = n.extra;
      const why = [ex.bound_reason, ex.bound_basis ? "basis: " + ex.bound_basis : null].filter(Boolean).join(" · ");
      if (!ex.bound) return el("span", { class: "faint", title: why || null, text: "-" });
      return el("span", { class: "badge " + ex.bound, title: why, text: String(ex.bound) });
    }
    function ceilingCell(n) {
      const r = R(n), f = ceilingOf(n);
      if (f === null) return "-";
      const uniq = n.extra.bound_basis === "unique bytes";
      return el("span", { class: "nowrap", title: "of a " + F.flopRate(r.ceiling_flops) + " ceiling on " + (n.extra.bound_basis || "requested bytes") },
        F.pct(f), uniq ? el("span", { class: "basis", title: "on unique bytes (hot rows served from cache)", text: "u" }) : null, provTag(provOf(n, "roofline")));
    }
    function roofText(r) {
      const g = r.gather;
      const turn = g && g.footprint_bytes > g.table_bytes ? ", " + F.bytes(g.footprint_bytes) + " of tables read in turn; one table alone " + F.byteRate(g.one_table_bytes_per_s) : "";
      return r.roof + " " + F.byteRate(r.roof_bytes_per_s) + (g ? " (" + F.bytes(g.row_bytes) + " rows, " + F.bytes(g.table_bytes) + " tables" + turn + ")" : "");
    }
    /** Tooltip rows with a node's roofline figures (nothing when it was not classified). */
    function roofRows(n) {
      const r = R(n), ex = n.extra;
      if (!r) return [];
      const rows = [["bound", ex.bound ? ex.bound + (ex.bound_basis ? " (on " + ex.bound_basis + ")" : "") : "none"], ["why", ex.bound_reason]];
      if (!isNum(r.achieved_bytes_per_s)) return rows;
      rows.push(
        ["of ceiling", F.pct(r.ceiling_fraction) + " of " + F.flopRate(r.ceiling_flops)],
        ["achieved", F.flopRate(r.achieved_flops)],
        ["intensity, requested bytes", F.intensity(r.intensity)],
        ["intensity, unique bytes", F.intensity(uniqueIntensity(n))],
        ["bandwidth, requested bytes", F.byteRate(r.achieved_bytes_per_s) + " = " + F.pct(r.memory_fraction_requested) + " of roof"],
        ["bandwidth, unique bytes", isNum(r.achieved_unique_bytes_per_s) ? F.byteRate(r.achieved_unique_bytes_per_s) + " = " + F.pct(r.memory_fraction_unique) + " of roof" : null],
        ["memory roof", roofText(r)],
        ["compute", F.pct(r.compute_fraction) + " of " + F.flopRate(r.peak_flops)],
        ["time per call", F.time(r.per_call_s)]);
      if (r.partial) rows.push(["partial", "some ops below have no cost formula"]);
      return rows;
    }

    document.title = "recstack report · " + D.title;

    // ---- header -------------------------------------------------------------------------------------
    const run = D.run || {};
    const subBits = [
      run.backend ? "backend " + run.backend : null,
      run.mode ? run.mode + (run.grad_mode ? " (" + run.grad_mode + ")" : "") : null,
      run.batch_size ? "batch " + run.batch_size : null,
      run.dtype ? run.dtype : null,
      run.device ? run.device : null,
      run.threads ? run.threads + " threads" : null,
      run.workload ? "workload " + F.valueText(run.workload) : null,
      run.scale !== undefined && run.scale !== null ? "scale " + F.valueText(run.scale) : null,
    ].filter(Boolean);
    app.appendChild(el("header", { class: "top" },
      el("div", null,
        el("div", { class: "brand", text: "recstack · profile report" }),
        el("h1", { id: "report-title", text: D.title }),
        el("div", { class: "sub", text: subBits.join("  ·  ") })),
      el("div", { class: "right" },
        el("div", null, "run id ", el("span", { class: "mono", text: D.run_id })),
        el("div", { text: "recstack " + D.recstack_version + (D.environment && D.environment.host ? " · host " + D.environment.host : "") }))));

    const main = el("main");
    app.appendChild(main);

    // ---- key figures ---------------------------------------------------------------------------------
    const ov = D.overhead || {};
    const lat = root.extra.latency_s || {};
    const kpis = el("div", { class: "kpis", id: "kpis" });
    const kpiValue = (v) => {
      const i = v.indexOf(" ");
      return i < 0 ? el("div", { class: "v", text: v }) : el("div", { class: "v" }, v.slice(0, i), el("span", { class: "u", text: v.slice(i) }));
    };
    const kpi = (k, v, n, kind) => kpis.appendChild(el("div", { class: "kpi" }, el("div", { class: "k" }, k, provTag(kind)), kpiValue(v), n ? el("div", { class: "n", text: n }) : null));
    kpi("Step time (interquartile mean)", F.time(root.time_s), isNum(root.extra.time_s_p10) ? "p10 " + F.time(root.extra.time_s_p10) + " · p90 " + F.time(root.extra.time_s_p90) : null, "measured");
    kpi("Latency p50 (uninstrumented)", F.time(lat.p50), isNum(lat.p90) ? "p90 " + F.time(lat.p90) + " · p99 " + F.time(lat.p99) : null, "measured");
    if (isNum(root.extra.throughput_samples_per_s)) kpi("Throughput", F.sig(root.extra.throughput_samples_per_s, 4) + " samples/s", "batch " + F.valueText(run.batch_size) + " / latency p50", "derived");
    if (isNum(ov.stage_pass_ratio)) kpi("Stage-pass overhead", F.ratio(ov.stage_pass_ratio), Array.isArray(ov.stage_pass_ratio_ci) ? "95% CI " + F.ratio(ov.stage_pass_ratio_ci[0]) + " – " + F.ratio(ov.stage_pass_ratio_ci[1]) : null, "measured");
    if (D.has_cost) {
      kpi("FLOPs / step", F.flops(root.flops), isNum(root.intensity) ? "intensity " + F.intensity(root.intensity) : null, provOf(root, "flops"));
      kpi("Bytes moved / step", F.bytes(root.bytes), isNum(root.extra.bytes_read) ? "read " + F.bytes(root.extra.bytes_read) + " · written " + F.bytes(root.extra.bytes_written) : null, provOf(root, "bytes"));
    }
    if (D.cost_model && isNum(D.cost_model.covered_time_share)) kpi("Op time with a cost formula", F.pct(D.cost_model.covered_time_share), (D.cost_model.uncovered_ops || []).length + " op name(s) without one", "derived");
    if (D.machine && root.extra.bound) kpi("Run bound", root.extra.bound, isNum(ceilingOf(root)) ? F.pct(ceilingOf(root)) + " of its roofline ceiling" : null, "derived");
    const peakMem = D.memory && D.memory.peak_step;
    if (peakMem && isNum(peakMem.peak_rss_bytes)) kpi("Peak memory in a step", F.bytes(peakMem.peak_rss_bytes), isNum(peakMem.step_increase_bytes) ? "+" + F.bytes(peakMem.step_increase_bytes) + " over the step's start (RSS)" : "process RSS", "measured");
    main.appendChild(kpis);

    // ---- provenance legend ---------------------------------------------------------------------------
    const provbar = el("div", { class: "provbar", id: "provenance-legend" }, el("b", { text: "Where figures come from:" }));
    for (const [k, desc] of Object.entries(D.provenance_kinds)) provbar.appendChild(el("span", null, provTag(k), " ", el("b", { text: k }), " – " + desc));
    provbar.appendChild(el("span", { text: "Run and stage times are measured; module and op times are derived (apportioned from their stage)." }));
    main.appendChild(provbar);

    // ---- run, environment, overhead ------------------------------------------------------------------
    main.appendChild(el("div", { class: "grid cols-2", id: "metadata" },
      metaCard("Run", runRows(run)),
      el("div", { class: "stackcol" }, overheadCard(ov), metaCard("Environment", Object.entries(D.environment || {})))));

    function metaCard(title, rows) {
      return el("section", { class: "card", style: { marginBottom: "0" } }, el("h2", { text: title }),
        rows.length ? F.kvTable(rows) : el("p", { class: "muted small", text: "Not recorded in this profile." }));
    }
    function runRows(r) {
      const rows = [];
      for (const [k, v] of Object.entries(r)) {
        if (k === "stage_roots" && v && typeof v === "object") {
          const list = el("div");
          for (const [path, info] of Object.entries(v)) {
            list.appendChild(el("div", null, el("span", { class: "mono", text: path }), " → ", el("span", { class: "dot", style: { background: F.stageColor(info && info.stage), display: "inline-block", width: "8px", height: "8px", borderRadius: "2px", margin: "0 5px 0 2px" } }), String(info && info.stage), el("span", { class: "faint", text: info && info.rule ? "  (" + info.rule + ")" : "" })));
          }
          rows.push([k, list]);
        } else if (Array.isArray(v) && v.length === 0) {
          rows.push([k, "none"]);
        } else {
          rows.push([k, v]);
        }
      }
      return rows;
    }
    function overheadCard(o) {
      const range = (a, b) => (isNum(a) && isNum(b) ? " (p10 " + F.time(a) + ", p90 " + F.time(b) + ")" : "");
      const ci = Array.isArray(o.stage_pass_ratio_ci) ? " (95% CI " + F.ratio(o.stage_pass_ratio_ci[0]) + " – " + F.ratio(o.stage_pass_ratio_ci[1]) + ")" : "";
      const rows = [
        ["uninstrumented step", fig(F.time(o.uninstrumented_step_s) + range(o.uninstrumented_step_s_p10, o.uninstrumented_step_s_p90), "measured")],
        ["stage-pass step", fig(F.time(o.stage_pass_step_s), "measured")],
        ["stage pass ratio", fig(F.ratio(o.stage_pass_ratio) + ci, "measured")],
        ["op pass step", o.op_pass_step_s === null || o.op_pass_step_s === undefined ? "op pass not run" : fig(F.time(o.op_pass_step_s), "measured")],
        ["op pass ratio", isNum(o.op_pass_ratio) ? fig(F.ratio(o.op_pass_ratio) + " of uninstrumented", "derived") : "-"],
        ["A/B pairs", o.pairs],
        ["profiling wall time", isNum(o.profiling_wall_s) ? F.time(o.profiling_wall_s) : "-"],
      ];
      for (const [k, v] of Object.entries(o)) {
        if (!/^(uninstrumented_step_s|uninstrumented_step_s_p10|uninstrumented_step_s_p90|stage_pass_step_s|stage_pass_ratio|stage_pass_ratio_ci|op_pass_step_s|op_pass_ratio|pairs|profiling_wall_s|method)$/.test(k)) rows.push([k, v]);
      }
      return el("section", { class: "card", id: "overhead", style: { marginBottom: "0" } },
        el("h2", { text: "Profiler overhead" }), F.kvTable(rows),
        o.method ? el("p", { class: "small muted", text: "Method: " + o.method }) : null);
    }
    main.appendChild(el("div", { style: { height: "18px" } }));

    // ---- hierarchy -----------------------------------------------------------------------------------
    const state = { focus: root, selected: null, expanded: new Set([root.id]), sortKey: "time", asc: false };
    const crumbs = el("nav", { class: "crumbs", id: "breadcrumbs", "aria-label": "hierarchy path" });
    const icicleBox = el("div", { id: "icicle" });
    const treeBox = el("div", { class: "scroll", id: "tree" });
    main.appendChild(F.card("hierarchy", "Hierarchy: run → stage → module → op",
      "Width is time per step. Click a block (or a name in the table) to drill down; click the top block or a breadcrumb to go back up. Hover for figures.",
      crumbs, el("div", { class: "grid hier" }, icicleBox, treeBox)));

    let resizeTimer = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(renderIcicle, 120);
    });

    function setFocus(n) {
      state.focus = n;
      state.expanded.add(n.id);
      // Open single-child chains (stage -> its one root module -> ...) so a drill shows content at once.
      for (let x = n, i = 0; x.children.length === 1 && i < 4; x = x.children[0], i++) state.expanded.add(x.children[0].id);
      app.dataset.focus = n.path;
      app.dataset.focusLevel = n.level;
      renderCrumbs();
      renderIcicle();
      renderTree();
    }
    function select(n) {
      state.selected = n;
      renderIcicle();
      renderTree();
      const row = treeBox.querySelector('tr[data-id="' + n.id + '"]');
      if (row) row.scrollIntoView({ block: "nearest" });
    }

    function renderCrumbs() {
      clear(crumbs);
      const chain = ancestors(state.focus);
      chain.forEach((n, i) => {
        if (i) crumbs.appendChild(el("span", { class: "sep", text: "›" }));
        if (i === chain.length - 1) crumbs.appendChild(el("span", { class: "here", text: shortName(n), title: n.path }));
        else crumbs.appendChild(el("button", { type: "button", text: shortName(n), title: n.path, onclick: () => setFocus(n) }));
      });
      crumbs.appendChild(el("span", { class: "lvltag", text: "  " + state.focus.level + " · " + F.time(state.focus.time_s) + " · " + F.pct(share(state.focus)) + " of step" }));
    }

    function nodeColor(n) {
      if (n.level === "run") return "#d5dbe3";
      const base = F.stageColor(n.stage);
      const stageDepth = n.level === "stage" ? 0 : ancestors(n).filter((a) => a.level !== "run" && a.level !== "stage").length;
      return F.tint(base, Math.min(0.1 + 0.15 * stageDepth, 0.75));
    }

    function nodeRows(n) {
      const rows = [
        ["level", n.level],
        ["stage", n.stage || "-"],
        ["time / step", F.time(n.time_s) + " (" + (provOf(n, "time_s") || "") + ")"],
        ["share of step", F.pct(share(n))],
        ["self time", F.time(n.self_time_s)],
        ["calls / step", F.count(n.calls)],
      ];
      if (isNum(n.extra.time_s_p10)) rows.push(["p10 – p90", F.time(n.extra.time_s_p10) + " – " + F.time(n.extra.time_s_p90)]);
      if (isNum(n.flops)) rows.push(["FLOPs", F.flops(n.flops)]);
      if (isNum(n.bytes)) rows.push(["bytes", F.bytes(n.bytes) + (isNum(n.extra.bytes_read) ? " (read " + F.bytes(n.extra.bytes_read) + ", written " + F.bytes(n.extra.bytes_written) + ")" : "")]);
      if (isNum(n.intensity)) rows.push(["intensity", F.intensity(n.intensity)]);
      if (n.extra.uncovered) rows.push(["cost", "uncovered: " + (n.extra.uncovered_reason || "no formula")]);
      if (n.extra.cost_in_parent) rows.push(["cost", "counted at the enclosing op"]);
      rows.push(...roofRows(n));
      if (n.extra.module_type) rows.push(["module type", String(n.extra.module_type)]);
      if (isNum(n.extra.distinct_shapes)) rows.push(["distinct shapes", String(n.extra.distinct_shapes)]);
      rows.push(["path", n.path]);
      return rows;
    }

    function renderIcicle() {
      clear(icicleBox);
      const W = Math.max(320, Math.round(icicleBox.clientWidth || 760)), rowH = 32, maxRows = 6;
      const cells = [];
      (function lay(n, x0, x1, d) {
        cells.push({ n, x0, x1, d });
        if (d + 1 >= maxRows) return;
        const kids = n.children.slice().sort((a, b) => b.time_s - a.time_s);
        const tot = kids.reduce((s, k) => s + Math.max(k.time_s, 0), 0);
        const denom = Math.max(n.time_s, tot);
        if (!(denom > 0)) return;
        let x = x0;
        for (const k of kids) {
          const w = ((x1 - x0) * Math.max(k.time_s, 0)) / denom;
          if (w >= 0.6) lay(k, x, x + w, d + 1);
          x += w;
        }
      })(state.focus, 0, W, 0);
      const depth = cells.reduce((m, c) => Math.max(m, c.d), 0) + 1;
      const H = depth * rowH;
      const s = svg("svg", { class: "icicle", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "icicle chart of time per step" });
      for (const c of cells) {
        const n = c.n;
        const w = c.x1 - c.x0;
        const g = svg("g");
        const rect = svg("rect", {
          class: "cell" + (state.selected === n ? " sel" : ""), x: c.x0, y: c.d * rowH, width: Math.max(w - 0.5, 0.5), height: rowH - 1,
          rx: 2, fill: nodeColor(n), data: { path: n.path, level: n.level, id: n.id },
        });
        rect.addEventListener("click", () => {
          F.tipHide();
          if (c.d === 0 && n.parent) setFocus(n.parent);
          else if (c.d > 0 && n.children.length) setFocus(n);
          else select(n);
        });
        F.hover(rect, () => n.name, () => nodeRows(n));
        g.appendChild(rect);
        const label = shortName(n);
        const maxChars = Math.floor((w - 10) / 6.7);
        if (maxChars >= 3) {
          const t = F.time(n.time_s);
          let txt = label.length + t.length + 2 <= maxChars ? label + "  " + t : label;
          if (txt.length > maxChars) txt = txt.slice(0, Math.max(1, maxChars - 1)) + "…";
          g.appendChild(svg("text", { x: c.x0 + 5, y: c.d * rowH + rowH / 2 + 4, text: txt, fill: F.inkOn(nodeColor(n)) }));
        }
        s.appendChild(g);
      }
      icicleBox.appendChild(s);
      const stages = [...new Set(nodes.filter((n) => n.level === "stage").map((n) => n.stage))];
      icicleBox.appendChild(el("div", { class: "legend", style: { marginTop: "8px" } },
        stages.map((st) => el("span", { class: "item" }, el("span", { class: "swatch", style: { background: F.stageColor(st) } }), st)),
        el("span", { class: "item faint", text: "deeper levels are lighter tints of their stage colour; blank space is self time" })));
    }

    const treeCols = [
      { key: "name", label: "node", get: (n) => shortName(n).toLowerCase() },
      { key: "time", label: "time / step", num: true, get: (n) => n.time_s },
      { key: "share", label: "share of step", num: true, get: (n) => n.time_s },
      { key: "self", label: "self time", num: true, get: (n) => n.self_time_s },
      { key: "calls", label: "calls", num: true, get: (n) => n.calls },
    ];
    if (D.has_cost) {
      treeCols.push({ key: "flops", label: "FLOPs", num: true, get: (n) => n.flops });
      treeCols.push({ key: "bytes", label: "bytes", num: true, get: (n) => n.bytes });
      treeCols.push({ key: "intensity", label: "intensity", num: true, get: (n) => n.intensity });
    }
    if (D.machine) {
      treeCols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null });
      treeCols.push({ key: "ceiling", label: "% of ceiling", num: true, title: "achieved over the roofline ceiling at the node's intensity (u: on unique bytes)", get: ceilingOf });
    }

    function renderTree() {
      clear(treeBox);
      const table = el("table", { class: "data tree" });
      const hr = el("tr");
      for (const c of treeCols) {
        const th = el("th", { class: (c.num ? "num " : "") + "sortable" + (state.sortKey === c.key ? " sorted" + (state.asc ? " asc" : "") : ""), text: c.label, title: c.title });
        th.addEventListener("click", () => {
          if (state.sortKey === c.key) state.asc = !state.asc; else { state.sortKey = c.key; state.asc = !c.num; }
          renderTree();
        });
        hr.appendChild(th);
      }
      table.appendChild(el("thead", null, hr));
      const tbody = el("tbody");
      const col = treeCols.find((c) => c.key === state.sortKey) || treeCols[1];
      const cmp = (a, b) => {
        const va = col.get(a), vb = col.get(b);
        if (va === vb) return 0;
        if (va === null || va === undefined) return 1;
        if (vb === null || vb === undefined) return -1;
        return (va < vb ? -1 : 1) * (state.asc ? 1 : -1);
      };
      (function row(n, rel) {
        const open = state.expanded.has(n.id);
        const tog = el("span", { class: "tog", text: n.children.length ? (open ? "▾" : "▸") : "" });
        if (n.children.length) tog.addEventListener("click", (e) => {
          e.stopPropagation();
          if (open) state.expanded.delete(n.id); else state.expanded.add(n.id);
          renderTree();
        });
        const lbl = el("span", { class: "lbl", text: shortName(n), title: n.path });
        lbl.addEventListener("click", () => (n.children.length && n !== state.focus ? setFocus(n) : select(n)));
        const nameTd = el("td", { class: "name", style: { paddingLeft: 6 + rel * 16 + "px" } },
          tog, el("span", { class: "dot", style: { background: nodeColor(n) } }), lbl, " ", el("span", { class: "lvltag", text: n.level }));
        const sh = share(n);
        const cells = [nameTd,
          el("td", { class: "num" }, fig(F.time(n.time_s), provOf(n, "time_s"))),
          el("td", { class: "num" }, F.pct(sh), el("span", { class: "sharebar" }, el("i", { style: { width: Math.min(100, Math.max(0, (sh || 0) * 100)) + "%", background: F.stageColor(n.stage) } }))),
          el("td", { class: "num" }, fig(F.time(n.self_time_s), provOf(n, "self_time_s"))),
          el("td", { class: "num", text: F.count(n.calls) })];
        if (D.has_cost) {
          cells.push(el("td", { class: "num" }, isNum(n.flops) ? fig(F.flops(n.flops), provOf(n, "flops")) : "-"));
          cells.push(el("td", { class: "num" }, isNum(n.bytes) ? fig(F.bytes(n.bytes), provOf(n, "bytes")) : "-"));
          cells.push(el("td", { class: "num" }, isNum(n.intensity) ? fig(F.intensity(n.intensity), provOf(n, "intensity")) : "-"));
        }
        if (D.machine) cells.push(el("td", null, boundBadge(n)), el("td", { class: "num" }, ceilingCell(n)));
        tbody.appendChild(el("tr", { class: (n === state.focus ? "focus" : "") + (n === state.selected ? " hl" : ""), data: { id: n.id, path: n.path, level: n.level } }, cells));
        if (open) n.children.slice().sort(cmp).forEach((k) => row(k, rel + 1));
      })(state.focus, 0);
      table.appendChild(tbody);
      treeBox.appendChild(table);
    }

    // ---- stage shares --------------------------------------------------------------------------------
    const stages = root.children.filter((n) => n.level === "stage");
    {
      const bar = el("div", { class: "stack", id: "stage-bar" });
      const denom = Math.max(root.time_s, stages.reduce((s, n) => s + n.time_s, 0)) || 1;
      for (const n of stages) {
        const w = (n.time_s / denom) * 100;
        const seg = el("div", { style: { width: w + "%", background: F.stageColor(n.stage) } }, w > 9 ? el("span", { text: n.name + " " + (w).toFixed(0) + "%" }) : null);
        F.hover(seg, () => n.name, () => nodeRows(n));
        seg.addEventListener("click", () => { setFocus(n); document.getElementById("hierarchy").scrollIntoView(); });
        bar.appendChild(seg);
      }
      const cols = [
        { key: "stage", label: "stage", get: (n) => n.name, fmt: (n) => el("span", null, el("span", { class: "swatch", style: { background: F.stageColor(n.stage), marginRight: "6px", verticalAlign: "-1px" } }), n.name) },
        { key: "time", label: "time / step", num: true, get: (n) => n.time_s, fmt: (n) => fig(F.time(n.time_s), provOf(n, "time_s")) },
        { key: "p10", label: "p10 – p90", num: true, get: (n) => n.extra.time_s_p10, fmt: (n) => (isNum(n.extra.time_s_p10) ? fig(F.time(n.extra.time_s_p10) + " – " + F.time(n.extra.time_s_p90), "measured") : "-") },
        { key: "share", label: "share of step", num: true, get: (n) => share(n), fmt: (n) => fig(F.pct(share(n)), "derived") },
        { key: "self", label: "outside modules", num: true, get: (n) => n.self_time_s, fmt: (n) => fig(F.time(n.self_time_s), provOf(n, "self_time_s")) },
        { key: "k", label: "apportion factor", num: true, title: "stage time over its op-pass time: how much torch.profiler stretched this stage", get: (n) => n.extra.apportion_factor, fmt: (n) => (isNum(n.extra.apportion_factor) ? fig(F.sig(n.extra.apportion_factor, 3) + "×", "derived") : "-") },
      ];
      if (D.has_cost) cols.push({ key: "flops", label: "FLOPs", num: true, get: (n) => n.flops, fmt: (n) => (isNum(n.flops) ? fig(F.flops(n.flops), provOf(n, "flops")) : "-") });
      if (D.machine) cols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null, fmt: boundBadge }, { key: "ceiling", label: "% of ceiling", num: true, get: ceilingOf, fmt: ceilingCell });
      if (stages.some((n) => n.extra.note)) cols.push({ key: "note", label: "note", get: (n) => n.extra.note || "", sort: false, fmt: (n) => el("span", { class: "small muted", text: n.extra.note || "" }) });
      const p10note = "p10/p90 over the timed steps show the run-to-run spread.";
      main.appendChild(F.card("stages", "Stage shares", "Median time per step of each stage in the timing pass (hooks at stage roots). " + p10note + " Click a segment to open it in the hierarchy.",
        stages.length ? [bar, F.sortableTable(cols, stages, { sortKey: null })] : F.note("This profile has no stages.", "info")));
    }

    // ---- roofline ------------------------------------------------------------------------------------
    main.appendChild(rooflineSection());

    /** Stages, and the outermost classified ops (an op inside a classified op would repeat it). */
    function rooflineCandidates() {
      const stagesR = nodes.filter((n) => n.level === "stage" && R(n));
      const ops = [];
      (function walk(n, covered) {
        const here = n.level === "op" && !!n.extra.bound;
        if (here && !covered) ops.push(n);
        for (const c of n.children) walk(c, covered || here);
      })(root, false);
      ops.sort((a, b) => b.time_s - a.time_s);
      return { stagesR, ops };
    }

    function rooflineSection() {
      const lead = "Achieved FLOP/s against arithmetic intensity (FLOPs per byte), log-log, as the roofline classifier computed them. Roofs are this host's measured figures at the run's threads and dtype: the GEMM peak (flat), the streaming bandwidth and the random-gather bandwidth the embedding stages were held to (sloped). Points: stages (large, outlined) and the top ops by time. A gather node whose hot rows come from cache also appears on unique bytes (each row counted once: hollow, joined to its requested-bytes point).";
      const box = F.card("roofline", "Roofline", lead);
      const M = D.machine;
      if (!D.has_cost) {
        box.appendChild(F.note("Roofline not available: this profile has no FLOP or byte figures. Profile with the cost model on (the default)."));
        return box;
      }
      if (!M) {
        box.appendChild(F.note("Roofline not available: no machine figures in this profile. Measure this host with `recstack machine` and profile again (the cached figures are picked up), or classify a saved profile with recstack.analysis.roofline.classify(profile, machine)."));
        return box;
      }
      const { stagesR, ops } = rooflineCandidates();
      const plottable = (n) => R(n) && R(n).intensity > 0 && R(n).achieved_flops > 0;
      const TOP = 40;
      const opPts = ops.filter(plottable).slice(0, TOP);
      const stagePts = stagesR.filter(plottable);
      const pts = stagePts.concat(opPts);
      const zeroFlop = stagesR.concat(ops.slice(0, TOP)).filter((n) => !plottable(n) && R(n).achieved_bytes_per_s > 0);
      const noCost = stagesR.filter((n) => !isNum(R(n).achieved_bytes_per_s));

      const peak = M.peak_flops;
      const computeRoofs = (M.compute_roofs || []).slice().sort((a, b) => (b.main ? 1 : 0) - (a.main ? 1 : 0) || b.flops - a.flops);
      const streamLabel = M.stream_label || "stream";
      const memRoofs = [{ kind: "stream", short: streamLabel.split(" ")[0], label: streamLabel, bw: M.stream_bandwidth }];
      for (const g of M.gather_roofs || []) memRoofs.push({ kind: "gather", short: "gather", label: g.label, bw: g.bytes_per_s });
      if (!(M.gather_roofs || []).length && Array.isArray(M.gather_bandwidth_range)) {
        memRoofs.push({ kind: "gather", short: "gather", label: "gather, slowest measured", bw: M.gather_bandwidth_range[0] });
        memRoofs.push({ kind: "gather", short: "gather", label: "gather, fastest measured", bw: M.gather_bandwidth_range[1] });
      }
      const xs = [], ys = [peak];
      for (const n of pts) {
        xs.push(R(n).intensity);
        ys.push(R(n).achieved_flops);
        if (uniqueIntensity(n)) xs.push(uniqueIntensity(n));
      }
      for (const m of memRoofs) xs.push(peak / m.bw);
      for (const c of computeRoofs) ys.push(c.flops);
      const lx0 = Math.floor(Math.log10(Math.min(...xs) / 1.5)), lx1 = Math.ceil(Math.log10(Math.max(...xs) * 1.5));
      const ly0 = Math.floor(Math.log10(Math.min(...ys) / 1.5)), ly1 = Math.ceil(Math.log10(Math.max(...ys) * 2));
      const W = 780, H = 470, ml = 100, mr = 20, mt = 16, mb = 50;
      const X = (v) => ml + ((Math.log10(v) - lx0) / (lx1 - lx0)) * (W - ml - mr);
      const Y = (v) => H - mb - ((Math.log10(v) - ly0) / (ly1 - ly0)) * (H - mt - mb);
      const s = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "roofline chart", id: "roofline-chart" });
      const grid = svg("g", { class: "grid" }), axis = svg("g", { class: "axis" });
      const stepX = lx1 - lx0 > 8 ? 2 : 1, stepY = ly1 - ly0 > 8 ? 2 : 1;
      for (let k = lx0; k <= lx1; k += stepX) {
        grid.appendChild(svg("line", { x1: X(10 ** k), x2: X(10 ** k), y1: mt, y2: H - mb }));
        axis.appendChild(svg("text", { x: X(10 ** k), y: H - mb + 16, "text-anchor": "middle", text: F.decade(10 ** k, "") }));
      }
      for (let k = ly0; k <= ly1; k += stepY) {
        grid.appendChild(svg("line", { x1: ml, x2: W - mr, y1: Y(10 ** k), y2: Y(10 ** k) }));
        axis.appendChild(svg("text", { x: ml - 8, y: Y(10 ** k) + 4, "text-anchor": "end", text: F.decade(10 ** k, "FLOP/s") }));
      }
      axis.appendChild(svg("line", { x1: ml, x2: W - mr, y1: H - mb, y2: H - mb }));
      axis.appendChild(svg("line", { x1: ml, x2: ml, y1: mt, y2: H - mb }));
      axis.appendChild(svg("text", { class: "title", x: (ml + W - mr) / 2, y: H - 10, "text-anchor": "middle", text: "arithmetic intensity (FLOP/B, log scale)" }));
      axis.appendChild(svg("text", { class: "title", x: 14, y: (mt + H - mb) / 2, "text-anchor": "middle", transform: "rotate(-90 14 " + (mt + H - mb) / 2 + ")", text: "achieved performance (FLOP/s, log scale)" }));
      s.append(grid, axis);
      s.appendChild(svg("defs", null, svg("clipPath", { id: "plotclip" }, svg("rect", { x: ml, y: mt, width: W - ml - mr, height: H - mt - mb }))));
      const roofG = svg("g", { "clip-path": "url(#plotclip)" });
      const xMin = 10 ** lx0, xMax = 10 ** lx1;
      const ROOF_COLOR = { stream: ["#2f5bd3"], gather: ["#7b3fb0", "#a673d1", "#c9a6e6"] };
      const roofLegend = [];
      const used = { stream: 0, gather: 0 };
      memRoofs.forEach((m) => {
        const pal = ROOF_COLOR[m.kind];
        const col = pal[Math.min(used[m.kind]++, pal.length - 1)];
        const ridge = peak / m.bw;
        const line = svg("line", { class: "roof " + m.kind, x1: X(xMin), y1: Y(m.bw * xMin), x2: X(ridge), y2: Y(peak), stroke: col, "stroke-dasharray": m.kind === "gather" ? "7 4" : null });
        F.hover(line, () => m.kind + " roof", () => [["what", m.label], ["bandwidth", F.byteRate(m.bw)], ["ridge point", F.intensity(ridge)]]);
        roofG.appendChild(line);
        roofLegend.push([col, m.label + ": " + F.byteRate(m.bw)]);
        const lx = Math.min(ridge / 3, Math.max(xMin * 1.5, 10 ** (ly0 + 0.4) / m.bw));  // left end, inside the plot
        const ang = (Math.atan2(Y(m.bw * lx * 10) - Y(m.bw * lx), X(lx * 10) - X(lx)) * 180) / Math.PI;
        const tx = X(lx), ty = Y(m.bw * lx) - 6;
        roofG.appendChild(svg("text", { class: "rooflbl", x: tx, y: ty, fill: col, transform: "rotate(" + ang + " " + tx + " " + ty + ")", text: m.short + " " + F.byteRate(m.bw) }));
      });
      const maxBw = Math.max(...memRoofs.map((m) => m.bw));
      for (const c of computeRoofs) {
        const col = c.main ? "#b5541c" : "#d99262";
        const line = svg("line", { class: "roof compute", x1: X(Math.max(xMin, c.flops / maxBw)), y1: Y(c.flops), x2: X(xMax), y2: Y(c.flops), stroke: col, "stroke-dasharray": c.main ? null : "6 4" });
        const label = c.main ? M.peak_label : c.label;
        F.hover(line, () => "compute roof", () => [["what", label], ["peak", F.flopRate(c.flops)], ["used for the bounds", c.main ? "yes (the run's dtype)" : "no"]]);
        roofG.appendChild(line);
        roofG.appendChild(svg("text", { class: "rooflbl", x: X(xMax) - 6, y: Y(c.flops) - 6, "text-anchor": "end", fill: col, text: label + " " + F.flopRate(c.flops) }));
        roofLegend.push([col, label + ": " + F.flopRate(c.flops)]);
      }
      s.appendChild(roofG);
      const ptG = svg("g");
      for (const n of opPts.slice().reverse().concat(stagePts)) {
        const r = R(n), y = Y(r.achieved_flops), col = F.stageColor(n.stage), big = n.level === "stage";
        const open = () => { setFocus(n.parent && !big ? n.parent : n); select(n); document.getElementById("hierarchy").scrollIntoView(); };
        const ui = uniqueIntensity(n);
        if (ui) {
          ptG.appendChild(svg("line", { class: "pair", x1: X(r.intensity), y1: y, x2: X(ui), y2: y, style: { stroke: col } }));
          const u = svg("circle", { class: "pt unique " + n.level, cx: X(ui), cy: y, r: big ? 6.5 : 4.2, style: { stroke: col }, data: { path: n.path } });
          F.hover(u, () => n.name + " · on unique bytes", () => pointRows(n));
          u.addEventListener("click", open);
          ptG.appendChild(u);
        }
        const c = svg("circle", { class: "pt " + n.level, cx: X(r.intensity), cy: y, r: big ? 7.5 : 4.8, fill: col, "fill-opacity": big ? 0.95 : 0.85, data: { path: n.path, bound: n.extra.bound || "" } });
        F.hover(c, () => n.name, () => pointRows(n));
        c.addEventListener("click", open);
        ptG.appendChild(c);
      }
      s.appendChild(ptG);
      const chartBox = el("div", null, s, el("div", { class: "legend", style: { marginTop: "6px" } },
        roofLegend.map(([col, txt]) => el("span", { class: "item" }, el("span", { class: "swatch", style: { background: col, height: "3px" } }), txt)),
        el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#888", borderRadius: "50%", border: "1.5px solid #15202e", width: "13px", height: "13px" } }), "stage"),
        el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#aaa", borderRadius: "50%", width: "9px", height: "9px" } }), "op (top " + opPts.length + " by time)"),
        el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#fff", borderRadius: "50%", border: "1.5px solid #888", width: "11px", height: "11px" } }), "gather node on unique bytes"),
        el("span", { class: "item faint", text: "colour = stage" })));

      const rows = pts.slice().sort((a, b) => b.time_s - a.time_s).slice(0, 16);
      const nameCol = { key: "name", label: "node", get: (n) => n.name, fmt: (n) => el("span", { title: n.path, class: "ptname" }, el("span", { class: "dot", style: { background: F.stageColor(n.stage) } }), n.level === "op" ? opLabel(n) : n.path + " (stage)", n.level === "op" && n.parent ? el("span", { class: "where", text: shortName(n.parent) }) : null) };
      const timeCol = { key: "time", label: "time", num: true, get: (n) => n.time_s, fmt: (n) => fig(F.time(n.time_s), provOf(n, "time_s")) };
      const boundCol = { key: "bound", label: "bound", get: (n) => n.extra.bound || null, fmt: boundBadge };
      const tcols = [nameCol, timeCol,
        { key: "perf", label: "achieved", num: true, title: "FLOP/s; the intensity and every other figure are in the point's tooltip", get: (n) => R(n).achieved_flops, fmt: (n) => fig(F.flopRate(R(n).achieved_flops), provOf(n, "roofline")) },
        { key: "frac", label: "% of ceiling", num: true, get: ceilingOf, fmt: ceilingCell }, boundCol];
      const side = el("div", { id: "roofline-side" }, el("h3", { text: "Plotted points by time" }), el("div", { class: "scroll", style: { maxHeight: "330px" } }, F.sortableTable(tcols, rows, { sortKey: "time", cls: "compact" })));
      if (zeroFlop.length) {
        const zcols = [nameCol, timeCol,
          { key: "bw", label: "bandwidth", num: true, get: (n) => R(n).achieved_bytes_per_s, fmt: (n) => fig(F.byteRate(R(n).achieved_bytes_per_s), provOf(n, "roofline")) },
          { key: "frac", label: "% of roof", num: true, title: "of the node's memory roof (stream or gather)", get: ceilingOf, fmt: (n) => el("span", { title: roofText(R(n)) }, ceilingCell(n)) }, boundCol];
        side.appendChild(el("h3", { style: { marginTop: "14px" }, text: "Not on the chart: 0 FLOPs (bandwidth only)" }));
        side.appendChild(el("div", { class: "scroll", id: "roofline-zero", style: { maxHeight: "200px" } }, F.sortableTable(zcols, zeroFlop, { sortKey: "time", cls: "compact" })));
      }
      if (noCost.length) side.appendChild(el("p", { class: "small muted" }, "Not classified (no cost figures): ", noCost.map((n, i) => el("span", { title: n.extra.bound_reason || "", text: (i ? ", " : "") + n.name })), "."));
      side.appendChild(machineDetails(M));
      box.appendChild(el("div", { class: "grid roof" }, chartBox, side));
      return box;
    }
    /** An op's name without the autograd wrapper (the full name is in the row's title). */
    function opLabel(n) { return n.name.replace(/^autograd::engine::evaluate_function: /, "").replace(/^torch::autograd::CppNode<(.*)>$/, "$1"); }
    function pointRows(n) {
      return [["level", n.level], ["stage", n.stage || "-"], ["time / step", F.time(n.time_s)], ["FLOPs", F.flops(n.flops)], ["bytes", F.bytes(n.bytes)]]
        .concat(roofRows(n), [["path", n.path]]);
    }
    function machineDetails(M) {
      const th = M.thresholds || {};
      const rows = [
        ["host", [M.host, M.cpu_model].filter(Boolean).join(" · ")],
        ["measured", [M.measured_at, M.mode ? M.mode + " measurement" : null].filter(Boolean).join(", ")],
        ["run at", [M.device, M.threads + " thread(s)", M.dtype].join(", ")],
        ["compute peak", M.peak_label + ": " + F.flopRate(M.peak_flops)],
        ["other compute roofs", (M.compute_roofs || []).filter((c) => !c.main).map((c) => c.label + " " + F.flopRate(c.flops)).join("; ") || "-"],
        ["stream bandwidth", M.stream_label + ": " + F.byteRate(M.stream_bandwidth)],
        ["gather roofs", (M.gather_roofs || []).map((g) => g.label + ": " + F.byteRate(g.bytes_per_s)).join("; ") || "-"],
        ["gather bandwidth measured", Array.isArray(M.gather_bandwidth_range) ? F.byteRate(M.gather_bandwidth_range[0]) + " – " + F.byteRate(M.gather_bandwidth_range[1]) + " (uniform indices, by row and table size)" : "-"],
        ["ridge point (stream)", F.intensity(M.ridge_intensity)],
        ["DRAM latency", isNum(M.dram_latency_s) ? F.sig(M.dram_latency_s * 1e9, 3) + " ns" : "-"],
        ["overhead floor", isNum(th.overhead_per_call_s) ? F.time(th.overhead_per_call_s) + " per call, or under " + F.pct(th.overhead_roof_fraction, 0) + " of both roofs" : "-"],
        ["roof statistic", th.roof_statistic ? th.roof_statistic + " over repeats" : "-"],
      ];
      if (Array.isArray(M.notes) && M.notes.length) rows.push(["notes", M.notes.join("; ")]);
      return el("details", { class: "shapes", id: "machine", style: { marginTop: "12px" } }, el("summary", { text: "machine figures: " + (M.host || "host") + ", " + (M.mode || "") + " measurement" }), F.kvTable(rows));
    }

    // ---- embedding tables ----------------------------------------------------------------------------
    {
      const tables = D.embedding_tables;
      const train = !!tables && tables.some((t) => "backward_bytes" in t);
      const box = F.card("embedding", "Embedding tables", "Per table, per step, counted from the batch's indices: size, lookups and the rows they touch. Requested bytes count every lookup; unique bytes count each touched row once (the traffic a perfect cache would leave)." +
        (train ? " Train mode (" + F.valueText(run.backend) + " backend, " + F.valueText(run.optimizer) + "): backward bytes are the gradient traffic of the lookups, optimizer bytes the update of the touched rows (formula), optimizer state the state tensors held per table." : ""));
      if (!tables) {
        box.appendChild(F.note("Per-table embedding detail not recorded: the profiler records it for models whose sparse arch exposes its tables (the zoo's backends) when batches carry raw indices.", "info"));
      } else {
        const num = (k, label, fmt, kind, title) => ({ key: k, label, num: true, title, get: (t) => t[k], fmt: (t) => (isNum(t[k]) ? fig(fmt(t[k]), kind) : "-") });
        const bar = (k, label, kind, color) => {
          const max = Math.max(...tables.map((t) => (isNum(t[k]) ? t[k] : 0)), 1);
          return { key: k, label, num: true, get: (t) => t[k], fmt: (t) => (isNum(t[k]) ? el("span", { class: "nowrap" }, fig(F.bytes(t[k]), kind), el("span", { class: "sharebar" }, el("i", { style: { width: (100 * t[k]) / max + "%", background: color } }))) : "-") };
        };
        const cols = [
          { key: "table", label: "table", get: (t) => String(t.table), fmt: (t) => el("span", { title: "feature " + F.valueText(t.feature) }, el("span", { class: "mono", text: String(t.table) }), t.kind ? el("span", { class: "small faint", text: " " + t.kind }) : null) },
          num("rows", "rows", F.count, null),
          num("dim", "dim", F.count, null),
          { key: "dtype", label: "dtype", get: (t) => t.dtype },
          num("table_bytes", "table size", F.bytes, "derived", "rows × row bytes"),
          num("lookups", "lookups", F.count, "measured"),
          num("unique_rows", "unique rows", F.count, "measured"),
          num("pooling_factor", "pooling", (v) => F.sig(v, 3), "derived", "lookups per sample"),
          num("reuse", "reuse", (v) => F.sig(v, 3) + "×", "derived", "lookups per unique row"),
          bar("bytes_requested", "bytes requested", "formula", F.stageColor("embedding")),
          num("bytes_unique", "bytes unique", F.bytes, "formula", "unique rows × row bytes"),
        ];
        if (train) {
          cols.push(bar("backward_bytes", "backward bytes", "formula", F.stageColor("backward")));
          cols.push(bar("optimizer_bytes", "optimizer bytes", "formula", F.stageColor("optimizer")));
          cols.push(num("optimizer_rows_touched", "rows updated", F.count, "formula"));
          if (tables.some((t) => "optimizer_state_bytes" in t)) cols.push(num("optimizer_state_bytes", "optimizer state", F.bytes, "measured", "optimizer state tensors of this table (tensor sizes); 0 when the optimizer keeps none or it is fused into the kernel's buffers"));
        }
        box.appendChild(el("div", { class: "scroll" }, F.sortableTable(cols, tables, { sortKey: "bytes_requested" })));
      }
      main.appendChild(box);
    }

    // ---- memory --------------------------------------------------------------------------------------
    {
      const mem = D.memory;
      const box = F.card("memory", "Memory", "Bytes resident per stage (parameters, buffers and optimizer state, from tensor sizes) and the process's peak memory during one step.");
      if (!mem) {
        box.appendChild(F.note("Memory not recorded in this profile.", "info"));
      } else {
        const provs = mem.provenance || {};
        const res = Object.entries(mem.resident_by_stage || {}).map(([stage, v]) => ({ stage, ...v, total: (v.parameters_bytes || 0) + (v.buffers_bytes || 0) + (v.optimizer_state_bytes || 0) }));
        const maxTotal = Math.max(...res.map((r) => r.total), 1);
        const b = (k, label) => ({ key: k, label, num: true, get: (r) => r[k], fmt: (r) => F.bytes(r[k]) });
        const cols = [
          { key: "stage", label: "stage", get: (r) => r.stage, fmt: (r) => el("span", null, el("span", { class: "swatch", style: { background: F.stageColor(r.stage), marginRight: "6px", verticalAlign: "-1px" } }), r.stage) },
          b("parameters_bytes", "parameters"), b("buffers_bytes", "buffers"), b("optimizer_state_bytes", "optimizer state"),
          { key: "total", label: "total", num: true, get: (r) => r.total, fmt: (r) => el("span", { class: "nowrap" }, F.bytes(r.total), el("span", { class: "sharebar" }, el("i", { style: { width: (100 * r.total) / maxTotal + "%", background: F.stageColor(r.stage) } }))) },
        ];
        const left = el("div", null, el("h3", { text: "Resident by stage" }),
          res.length ? F.sortableTable(cols, res, { sortKey: "total" }) : F.note("No resident tensors recorded.", "info"),
          provs.resident_by_stage ? el("p", { class: "small muted", text: "Source: " + provs.resident_by_stage + "." }) : null);
        const pk = mem.peak_step || {};
        const rows = [
          ["peak during the step", fig(F.bytes(pk.peak_rss_bytes), "measured")],
          ["at the step's start", isNum(pk.rss_before_step_bytes) ? fig(F.bytes(pk.rss_before_step_bytes), "measured") : "-"],
          ["increase over the step", isNum(pk.step_increase_bytes) ? fig(F.bytes(pk.step_increase_bytes), "derived") : "-"],
        ];
        if (isNum(pk.cuda_peak_allocated_bytes)) rows.push(["CUDA peak allocated", fig(F.bytes(pk.cuda_peak_allocated_bytes), "measured")]);
        rows.push(["basis", pk.basis || "-"]);
        const right = el("div", { id: "peak-memory" }, el("h3", { text: "Peak step memory" }), F.kvTable(rows),
          el("p", { class: "small muted", text: "Process memory (RSS): model, inputs, temporaries and the Python interpreter." }));
        box.appendChild(el("div", { class: "grid cols-2" }, left, right));
      }
      main.appendChild(box);
    }

    // ---- hardware counters ---------------------------------------------------------------------------
    {
      const C = D.counters;
      const box = F.card("counters", "Hardware counters", "Per forward stage, from perf: cycles, instructions and cache misses per step, IPC, misses per 1000 instructions and top-down level 1 where the CPU reports it.");
      if (!C) {
        box.appendChild(F.note("Hardware counters not recorded in this profile (profiled with counters off).", "info"));
      } else if (!C.available) {
        box.appendChild(F.note("unavailable: " + (C.reason || "no reason given"), "info"));
      } else {
        const list = Object.entries(C.stages || {}).map(([stage, v]) => ({ stage, ...v }));
        const n = (k, label, fmt) => ({ key: k, label, num: true, get: (r) => r[k], fmt: (r) => (isNum(r[k]) ? fig(fmt(r[k]), "measured") : "-") });
        const cols = [
          { key: "stage", label: "stage", get: (r) => r.stage, fmt: (r) => el("span", null, el("span", { class: "swatch", style: { background: F.stageColor(r.stage), marginRight: "6px", verticalAlign: "-1px" } }), r.stage) },
          n("cycles", "cycles / step", (v) => F.si(v, "")), n("instructions", "instructions / step", (v) => F.si(v, "")),
          { key: "ipc", label: "IPC", num: true, get: (r) => r.ipc, fmt: (r) => (isNum(r.ipc) ? fig(F.sig(r.ipc, 3), "derived") : "-") },
          n("cache_misses", "cache misses / step", (v) => F.si(v, "")),
          { key: "mpki", label: "misses / 1k instr.", num: true, get: (r) => r.cache_misses_per_kinstr, fmt: (r) => (isNum(r.cache_misses_per_kinstr) ? fig(F.sig(r.cache_misses_per_kinstr, 3), "derived") : "-") },
          { key: "topdown", label: "top-down L1", sort: false, get: () => null, fmt: (r) => (r.topdown ? el("span", { class: "small", text: TOPDOWN.filter(([k]) => isNum(r.topdown[k])).map(([k, lbl]) => lbl + " " + F.pct(r.topdown[k], 0)).join(" · ") }) : "-") },
          { key: "note", label: "note", sort: false, get: () => null, fmt: (r) => el("span", { class: "small muted", text: r.available === false ? "unavailable: " + (r.reason || "") : r.multiplexed ? "multiplexed (scaled counts)" : "" }) },
        ];
        box.appendChild(F.kvTable([["method", C.method || "-"], ["perf", C.perf || "-"]]));
        box.appendChild(el("div", { class: "scroll", style: { marginTop: "10px" } }, F.sortableTable(cols, list, { sortKey: null })));
      }
      main.appendChild(box);
    }

    // ---- cost model coverage -------------------------------------------------------------------------
    {
      const CM = D.cost_model;
      const box = F.card("uncovered", "Cost-model coverage", "Ops the cost model has no FLOP/byte formula for: their time is real, but their FLOPs and bytes are unknown, so the sums above them are partial and the roofline understates them.");
      if (!CM) {
        box.appendChild(F.note("Not available: this profile was taken without the cost model.", "info"));
      } else {
        box.appendChild(F.kvTable([
          ["op time with a formula", fig(F.pct(CM.covered_time_share), "derived")],
          ["op time without one", fig(F.pct(CM.uncovered_time_share), "derived")],
          ["formula errors", F.count(CM.formula_errors)],
        ]));
        const list = CM.uncovered_ops || [];
        if (!list.length) {
          box.appendChild(el("div", { style: { marginTop: "10px" } }, F.note("Every op in this profile has a cost formula.", "info")));
        } else {
          const cols = [
            { key: "name", label: "op", get: (o) => String(o.name), fmt: (o) => el("span", { class: "mono", text: String(o.name) }) },
            { key: "reason", label: "why", get: (o) => o.reason, fmt: (o) => el("span", { class: "small muted", text: F.valueText(o.reason) }) },
            { key: "time", label: "time / step", num: true, get: (o) => o.time_s, fmt: (o) => fig(F.time(o.time_s), "derived") },
            { key: "share", label: "share of step", num: true, get: (o) => (runT && isNum(o.time_s) ? o.time_s / runT : null), fmt: (o) => fig(F.pct(runT && isNum(o.time_s) ? o.time_s / runT : null), "derived") },
            { key: "calls", label: "calls / step", num: true, get: (o) => o.calls, fmt: (o) => F.count(o.calls) },
          ];
          box.appendChild(el("div", { class: "scroll", style: { maxHeight: "360px", marginTop: "10px" } }, F.sortableTable(cols, list, { sortKey: "time" })));
        }
        const unplaced = CM.unplaced || [];
        if (unplaced.length) {
          const cols = [
            { key: "module", label: "module", get: (o) => String(o.module), fmt: (o) => el("span", { class: "mono", text: String(o.module) }) },
            { key: "op", label: "op", get: (o) => String(o.op), fmt: (o) => el("span", { class: "mono", text: String(o.op) }) },
            { key: "calls", label: "calls / step", num: true, get: (o) => o.calls, fmt: (o) => F.count(o.calls) },
            { key: "flops", label: "FLOPs", num: true, get: (o) => o.flops, fmt: (o) => fig(F.flops(o.flops), "formula") },
            { key: "bytes", label: "bytes", num: true, get: (o) => o.bytes, fmt: (o) => fig(F.bytes(o.bytes), "formula") },
          ];
          box.appendChild(el("h3", { style: { marginTop: "14px" }, text: "Counted but not placed" }));
          box.appendChild(el("p", { class: "small muted", text: "Work the cost counter saw that matched no node of the tree; it is in no node's figures." }));
          box.appendChild(el("div", { class: "scroll", id: "unplaced" }, F.sortableTable(cols, unplaced, { sortKey: "bytes" })));
        }
      }
      main.appendChild(box);
    }

    // ---- shapes --------------------------------------------------------------------------------------
    {
      const ops = nodes.filter((n) => n.level === "op" && isNum(n.extra.distinct_shapes));
      const dyn = ops.filter((n) => n.extra.distinct_shapes > 1).length;
      const box = F.card("shapes", "Shapes seen", "Input shapes per op over the op pass. More than one distinct shape means the op saw dynamic shapes (variable bag sizes, sequence lengths): a signal for padding, bucketing or recompilation cost.");
      if (!ops.length) {
        box.appendChild(F.note("No op shapes in this profile (the op pass did not run).", "info"));
        main.appendChild(box);
      } else {
        box.appendChild(el("p", { class: "small" }, el("b", { text: String(dyn) }), " of " + ops.length + " op nodes saw more than one input shape."));
        const search = el("input", { type: "search", placeholder: "filter by op or module…", "aria-label": "filter shapes" });
        const onlyDyn = el("input", { type: "checkbox", id: "only-dynamic" });
        box.appendChild(el("div", { class: "toolbar" }, search, el("label", null, onlyDyn, " only ops with more than one shape")));
        const fmtShape = (sh) => (Array.isArray(sh) ? sh.map((a) => (Array.isArray(a) ? (a.length ? a.join("×") : "·") : F.valueText(a))).join(", ") : F.valueText(sh));
        const cols = [
          { key: "op", label: "op", get: (n) => n.name, fmt: (n) => el("span", { class: "mono", text: n.name }) },
          { key: "where", label: "module / stage", get: (n) => (n.parent ? n.parent.path : ""), fmt: (n) => el("span", { class: "small muted", text: n.parent ? shortName(n.parent) + (n.stage ? " · " + n.stage : "") : "" }) },
          { key: "calls", label: "calls / step", num: true, get: (n) => n.calls, fmt: (n) => F.count(n.calls) },
          { key: "time", label: "time / step", num: true, get: (n) => n.time_s, fmt: (n) => fig(F.time(n.time_s), provOf(n, "time_s")) },
          { key: "distinct", label: "distinct shapes", num: true, get: (n) => n.extra.distinct_shapes, fmt: (n) => el("span", null, n.extra.distinct_shapes > 1 ? el("span", { class: "badge added", text: "dynamic", style: { marginRight: "6px" } }) : null, String(n.extra.distinct_shapes)) },
          { key: "shapes", label: "shapes (per input, × between dims, · scalar)", sort: false, get: () => null, fmt: (n) => {
            const shapes = Array.isArray(n.extra.shapes) ? n.extra.shapes : [];
            if (shapes.length === 1) return el("span", { class: "mono", text: fmtShape(shapes[0]) });
            const total = isNum(n.extra.shapes_total) ? n.extra.shapes_total : shapes.length;
            return el("details", { class: "shapes" }, el("summary", { text: "show " + (total > shapes.length ? shapes.length + " of " + total : total) + " shapes" }), el("ol", null, shapes.map((sh) => el("li", { text: fmtShape(sh) }))));
          } },
        ];
        const holder = el("div", { class: "scroll" });
        const draw = () => {
          const q = search.value.trim().toLowerCase();
          const rows = ops.filter((n) => (!onlyDyn.checked || n.extra.distinct_shapes > 1) && (!q || n.path.toLowerCase().includes(q)));
          rows.sort((a, b) => b.extra.distinct_shapes - a.extra.distinct_shapes || b.time_s - a.time_s);
          clear(holder).appendChild(F.sortableTable(cols, rows, { sortKey: null }));
        };
        search.addEventListener("input", draw);
        onlyDyn.addEventListener("change", draw);
        draw();
        box.appendChild(holder);
        main.appendChild(box);
      }
    }

    // ---- other top-level data ------------------------------------------------------------------------
    const extraKeys = Object.keys(D.profile_extra || {});
    if (extraKeys.length) main.appendChild(F.card("extra", "Other profile data", null, F.kvTable(Object.entries(D.profile_extra))));
    app.appendChild(el("footer", { text: "recstack " + D.recstack_version + " · run " + D.run_id + " · a self-contained page: no network access needed" }));

    setFocus(root);
  }

  RS.boot(main);
})();
