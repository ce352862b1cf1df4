/* recstack report page: renders the embedded profile payload (see recstack/report/payload.py).
 * Sections: header and key figures, provenance legend, run/environment/overhead, hierarchy (icicle +
 * sortable tree table with drill-down and breadcrumbs), stage shares, roofline, embedding tables,
 * uncovered ops, shapes seen. Optional sections say what is missing instead of drawing nothing. */
"use strict";

(() => {
  const { el, svg, clear, isNum } = RS;
  const F = RS;

  const PROV_LETTER = { measured: "m", apportioned: "a", formula: "f", derived: "d" };

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
    kpi("Step time (median)", F.time(root.time_s), isNum(root.extra.time_s_p10) ? "p10 " + F.time(root.extra.time_s_p10) + " · p90 " + F.time(root.extra.time_s_p90) : null, "measured");
    kpi("Latency p50 (uninstrumented)", F.time(lat.p50), isNum(lat.p90) ? "p90 " + F.time(lat.p90) + " · p99 " + F.time(lat.p99) : null, "measured");
    if (isNum(root.extra.throughput_samples_per_s)) kpi("Throughput", F.sig(root.extra.throughput_samples_per_s, 4) + " samples/s", "batch " + F.valueText(run.batch_size) + " / latency p50", "derived");
    if (isNum(ov.stage_pass_ratio)) kpi("Stage-pass overhead", F.ratio(ov.stage_pass_ratio), Array.isArray(ov.stage_pass_ratio_ci) ? "95% CI " + F.ratio(ov.stage_pass_ratio_ci[0]) + " – " + F.ratio(ov.stage_pass_ratio_ci[1]) : null, "measured");
    const runFlops = isNum(root.flops) ? root.flops : null;
    if (D.has_cost) {
      kpi("FLOPs / step", F.flops(runFlops), isNum(root.intensity) ? "intensity " + F.intensity(root.intensity) : null, provOf(root, "flops"));
      kpi("Bytes moved / step", F.bytes(root.bytes), isNum(root.extra.achieved_bytes_per_s) ? "attained " + F.byteRate(root.extra.achieved_bytes_per_s) : null, provOf(root, "bytes"));
    }
    if (D.cost_model && isNum(D.cost_model.uncovered_time_share)) kpi("Time in uncovered ops", F.pct(D.cost_model.uncovered_time_share), "ops with no FLOP/byte formula", "derived");
    main.appendChild(kpis);

    // ---- provenance legend ---------------------------------------------------------------------------
    const provbar = el("div", { class: "provbar", id: "provenance-legend" }, el("b", { text: "Where figures come from:" }));
    for (const [k, desc] of Object.entries(D.provenance_kinds)) provbar.appendChild(el("span", null, provTag(k), " ", el("b", { text: k }), " – " + desc));
    provbar.appendChild(el("span", { text: "Stage and run times are measured; module and op times are apportioned unless a figure says otherwise." }));
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
      if (isNum(n.bytes)) rows.push(["bytes", F.bytes(n.bytes)]);
      if (isNum(n.intensity)) rows.push(["intensity", F.intensity(n.intensity)]);
      if (n.extra.bound) rows.push(["bound", String(n.extra.bound)]);
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
    if (D.has_bound) treeCols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null });

    function renderTree() {
      clear(treeBox);
      const table = el("table", { class: "data tree" });
      const hr = el("tr");
      for (const c of treeCols) {
        const th = el("th", { class: (c.num ? "num " : "") + "sortable" + (state.sortKey === c.key ? " sorted" + (state.asc ? " asc" : "") : ""), text: c.label });
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
        if (D.has_bound) cells.push(el("td", null, n.extra.bound ? el("span", { class: "badge " + n.extra.bound, text: String(n.extra.bound) }) : "-"));
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
      if (stages.some((n) => n.extra.note)) cols.push({ key: "note", label: "note", get: (n) => n.extra.note || "", sort: false, fmt: (n) => el("span", { class: "small muted", text: n.extra.note || "" }) });
      const p10note = "p10/p90 over the timed steps show the run-to-run spread.";
      main.appendChild(F.card("stages", "Stage shares", "Median time per step of each stage in the timing pass (hooks at stage roots). " + p10note + " Click a segment to open it in the hierarchy.",
        stages.length ? [bar, F.sortableTable(cols, stages, { sortKey: null })] : F.note("This profile has no stages.", "info")));
    }

    // ---- roofline ------------------------------------------------------------------------------------
    main.appendChild(rooflineSection());

    function perfOf(n) {
      if (isNum(n.extra.achieved_flops_per_s)) return n.extra.achieved_flops_per_s;
      return isNum(n.flops) && n.time_s > 0 ? n.flops / n.time_s : null;
    }
    function intensityOf(n) {
      if (isNum(n.intensity)) return n.intensity;
      return isNum(n.flops) && isNum(n.bytes) && n.bytes > 0 ? n.flops / n.bytes : null;
    }

    function rooflineSection() {
      const lead = "Attained FLOP/s against arithmetic intensity (FLOPs per byte moved), log-log. Roofs are the machine's compute peak and memory bandwidths; a point under the sloped roof is limited by bandwidth, under the flat roof by compute. Points: stages (large, outlined) and the top ops by time.";
      const box = F.card("roofline", "Roofline", lead);
      if (!D.has_cost) {
        box.appendChild(F.note("Roofline not available: run with the cost model / machine. This profile has no FLOP or byte figures (the cost model fills them) and no machine ceilings (profile.extra.machine)."));
        return box;
      }
      const plottable = (n) => n.time_s > 0 && (intensityOf(n) || 0) > 0 && (perfOf(n) || 0) > 0;
      const cand = nodes.filter((n) => (n.level === "stage" || n.level === "op") && plottable(n));
      const stagePts = cand.filter((n) => n.level === "stage");
      // An op inside a plotted op (aten::addmm in aten::linear) would repeat its parent's point.
      const opPts = cand.filter((n) => n.level === "op" && !(n.parent && n.parent.level === "op" && plottable(n.parent)))
        .sort((a, b) => b.time_s - a.time_s).slice(0, 40);
      const pts = stagePts.concat(opPts);
      const roofs = D.roofs;
      if (!roofs) box.appendChild(F.note("Machine ceilings not available: run with the machine description (profile.extra.machine) to draw the compute and bandwidth roofs. Points are plotted without roofs.", "info"));
      if (!pts.length) {
        box.appendChild(F.note("Roofline not available: no stage or op has both FLOPs and bytes above zero (run with the cost model / machine)."));
        return box;
      }
      const xs = pts.map(intensityOf), ys = pts.map(perfOf);
      if (roofs) {
        const peak = roofs.compute[0].flops_per_s;
        for (const m of roofs.memory) xs.push(peak / m.bytes_per_s);
        for (const c of roofs.compute) ys.push(c.flops_per_s);
      }
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
      axis.appendChild(svg("text", { class: "title", x: 14, y: (mt + H - mb) / 2, "text-anchor": "middle", transform: "rotate(-90 14 " + (mt + H - mb) / 2 + ")", text: "attained performance (FLOP/s, log scale)" }));
      s.append(grid, axis);
      const clip = svg("clipPath", { id: "plotclip" }, svg("rect", { x: ml, y: mt, width: W - ml - mr, height: H - mt - mb }));
      s.appendChild(svg("defs", null, clip));
      const roofG = svg("g", { "clip-path": "url(#plotclip)" });
      const xMin = 10 ** lx0, xMax = 10 ** lx1;
      const memColors = ["#2f5bd3", "#5f86e6", "#8fa9ee", "#b7c8f3"];
      const roofLegend = [];
      if (roofs) {
        const peak = roofs.compute[0].flops_per_s;
        roofs.memory.forEach((m, i) => {
          const ridge = peak / m.bytes_per_s;
          const col = memColors[Math.min(i, memColors.length - 1)];
          const line = svg("line", { class: "roof", x1: X(xMin), y1: Y(m.bytes_per_s * xMin), x2: X(ridge), y2: Y(peak), stroke: col });
          F.hover(line, () => "bandwidth roof: " + m.name, () => [["bandwidth", F.byteRate(m.bytes_per_s)], ["ridge point", F.intensity(ridge)]]);
          roofG.appendChild(line);
          roofLegend.push([col, m.name + " " + F.byteRate(m.bytes_per_s)]);
          const lx = Math.max(xMin * 1.6, ridge / 30);
          const ang = (Math.atan2(Y(m.bytes_per_s * lx * 10) - Y(m.bytes_per_s * lx), X(lx * 10) - X(lx)) * 180) / Math.PI;
          const tx = X(lx), ty = Y(m.bytes_per_s * lx) - 6;
          roofG.appendChild(svg("text", { class: "rooflbl", x: tx, y: ty, fill: col, transform: "rotate(" + ang + " " + tx + " " + ty + ")", text: m.name + " " + F.byteRate(m.bytes_per_s) }));
        });
        const maxBw = roofs.memory[0].bytes_per_s;
        roofs.compute.forEach((c, i) => {
          const col = i === 0 ? "#b5541c" : "#d99262";
          const x0 = c.flops_per_s / maxBw;
          const line = svg("line", { class: "roof", x1: X(x0), y1: Y(c.flops_per_s), x2: X(xMax), y2: Y(c.flops_per_s), stroke: col, "stroke-dasharray": i ? "6 4" : null });
          F.hover(line, () => "compute roof: " + c.name, () => [["peak", F.flopRate(c.flops_per_s)]]);
          roofG.appendChild(line);
          roofG.appendChild(svg("text", { class: "rooflbl", x: X(xMax) - 6, y: Y(c.flops_per_s) - 6, "text-anchor": "end", fill: col, text: ["peak", c.name, F.flopRate(c.flops_per_s)].filter(Boolean).join(" ") }));
          roofLegend.push([col, ["compute peak", c.name, F.flopRate(c.flops_per_s)].filter(Boolean).join(" ")]);
        });
      }
      s.appendChild(roofG);
      const ptG = svg("g");
      for (const n of opPts.slice().reverse().concat(stagePts)) {
        const c = svg("circle", { class: "pt " + n.level, cx: X(intensityOf(n)), cy: Y(perfOf(n)), r: n.level === "stage" ? 7.5 : 4.8, fill: F.stageColor(n.stage), "fill-opacity": n.level === "stage" ? 0.95 : 0.85, data: { path: n.path } });
        F.hover(c, () => n.name, () => pointRows(n));
        c.addEventListener("click", () => { setFocus(n.parent && n.level !== "stage" ? n.parent : n); select(n); document.getElementById("hierarchy").scrollIntoView(); });
        ptG.appendChild(c);
      }
      s.appendChild(ptG);
      const chartBox = el("div", null, s, el("div", { class: "legend", style: { marginTop: "6px" } },
        roofLegend.map(([col, txt]) => el("span", { class: "item" }, el("span", { class: "swatch", style: { background: col, height: "3px" } }), txt)),
        el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#888", borderRadius: "50%", border: "1.5px solid #15202e", width: "13px", height: "13px" } }), "stage"),
        el("span", { class: "item" }, el("span", { class: "swatch", style: { background: "#aaa", borderRadius: "50%", width: "9px", height: "9px" } }), "op (top " + opPts.length + " by time)"),
        el("span", { class: "item faint", text: "colour = stage" })));
      const notPlotted = nodes.filter((n) => (n.level === "stage" || n.level === "op") && !cand.includes(n)).length;
      const nested = cand.length - stagePts.length - opPts.length;
      const rows = pts.slice().sort((a, b) => b.time_s - a.time_s).slice(0, 16);
      const tcols = [
        { key: "name", label: "node", get: (n) => n.name, fmt: (n) => el("span", { title: n.path }, el("span", { class: "dot", style: { background: F.stageColor(n.stage) } }), n.level === "op" ? n.name : n.name + " (stage)", n.level === "op" && n.parent ? el("span", { class: "small faint", text: " · " + shortName(n.parent) }) : null) },
        { key: "time", label: "time", num: true, get: (n) => n.time_s, fmt: (n) => fig(F.time(n.time_s), provOf(n, "time_s")) },
        { key: "ai", label: "intensity", num: true, get: intensityOf, fmt: (n) => fig(F.intensity(intensityOf(n)), provOf(n, "intensity")) },
        { key: "perf", label: "attained", num: true, get: perfOf, fmt: (n) => fig(F.flopRate(perfOf(n)), provOf(n, "achieved_flops_per_s")) },
      ];
      if (nodes.some((n) => isNum(n.extra.fraction_of_ceiling))) tcols.push({ key: "frac", label: "of ceiling", num: true, get: (n) => n.extra.fraction_of_ceiling, fmt: (n) => (isNum(n.extra.fraction_of_ceiling) ? fig(F.pct(n.extra.fraction_of_ceiling), provOf(n, "fraction_of_ceiling")) : "-") });
      if (D.has_bound) tcols.push({ key: "bound", label: "bound", get: (n) => n.extra.bound || null, fmt: (n) => (n.extra.bound ? el("span", { class: "badge " + n.extra.bound, title: n.extra.bound_basis ? String(n.extra.bound_basis) : "", text: String(n.extra.bound) }) : "-") });
      const side = el("div", null, el("h3", { text: "Plotted points by time" }), el("div", { class: "scroll", style: { maxHeight: "440px" } }, F.sortableTable(tcols, rows, { sortKey: "time" })),
        notPlotted ? el("p", { class: "small muted", text: notPlotted + " stage/op nodes are not plotted: no FLOPs or bytes above zero (log axes cannot show zero)." }) : null,
        nested > 0 ? el("p", { class: "small muted", text: nested + " more ops are inside a plotted op or beyond the top " + opPts.length + " by time." }) : null,
        D.machine ? el("details", { class: "shapes" }, el("summary", { text: "machine description" }), F.kvTable(Object.entries(D.machine))) : null);
      box.appendChild(el("div", { class: "grid cols-2" }, chartBox, side));
      return box;
    }
    function pointRows(n) {
      const r = [
        ["level", n.level], ["stage", n.stage || "-"], ["time / step", F.time(n.time_s)],
        ["FLOPs", F.flops(n.flops)], ["bytes", F.bytes(n.bytes)],
        ["intensity", F.intensity(intensityOf(n))], ["attained", F.flopRate(perfOf(n))],
        ["attained bandwidth", F.byteRate(isNum(n.extra.achieved_bytes_per_s) ? n.extra.achieved_bytes_per_s : isNum(n.bytes) && n.time_s > 0 ? n.bytes / n.time_s : null)],
      ];
      if (isNum(n.extra.ceiling_flops_per_s)) r.push(["ceiling", F.flopRate(n.extra.ceiling_flops_per_s)]);
      if (isNum(n.extra.fraction_of_ceiling)) r.push(["of ceiling", F.pct(n.extra.fraction_of_ceiling)]);
      if (n.extra.bound) r.push(["bound", String(n.extra.bound)]);
      if (n.extra.bound_basis) r.push(["basis", F.valueText(n.extra.bound_basis)]);
      r.push(["path", n.path]);
      return r;
    }

    // ---- embedding tables ----------------------------------------------------------------------------
    {
      const tables = D.embedding_tables;
      const box = F.card("embedding", "Embedding tables", "Per table, per step: size, lookups and the rows they touch. Requested bytes count every lookup; unique bytes count each touched row once (the traffic a perfect cache would leave).");
      if (!tables) {
        box.appendChild(F.note("Per-table embedding detail not available: run with the cost model to count lookups and unique rows per table.", "info"));
      } else {
        const tprov = (t, k, kind) => (t.provenance && typeof t.provenance[k] === "string" ? t.provenance[k] : kind);
        const num = (k, label, fmt, kind) => ({ key: k, label, num: true, get: (t) => t[k], fmt: (t) => (isNum(t[k]) ? fig(fmt(t[k]), tprov(t, k, kind)) : "-") });
        const reuse = (t) => (isNum(t.lookups) && isNum(t.unique_rows) && t.unique_rows > 0 ? t.lookups / t.unique_rows : null);
        const maxReq = Math.max(...tables.map((t) => (isNum(t.bytes_requested) ? t.bytes_requested : 0)), 1);
        const cols = [
          { key: "table", label: "table", get: (t) => String(t.table), fmt: (t) => el("span", { class: "mono", text: String(t.table) }) },
          num("rows", "rows", F.count, null),
          num("dim", "dim", F.count, null),
          { key: "dtype", label: "dtype", get: (t) => t.dtype },
          num("table_bytes", "table size", F.bytes, "derived"),
          num("lookups", "lookups", F.count, "measured"),
          num("unique_rows", "unique rows", F.count, "measured"),
          num("pooling_factor", "pooling factor", (v) => F.sig(v, 3), "derived"),
          { key: "reuse", label: "reuse", num: true, title: "lookups per unique row", get: reuse, fmt: (t) => (isNum(reuse(t)) ? fig(F.sig(reuse(t), 3) + "×", "derived") : "-") },
          { key: "bytes_requested", label: "bytes requested", num: true, get: (t) => t.bytes_requested, fmt: (t) => (isNum(t.bytes_requested) ? el("span", { class: "nowrap" }, fig(F.bytes(t.bytes_requested), tprov(t, "bytes_requested", "formula")), el("span", { class: "sharebar" }, el("i", { style: { width: (100 * t.bytes_requested) / maxReq + "%", background: F.stageColor("embedding") } }))) : "-") },
          num("bytes_unique", "bytes unique", F.bytes, "formula"),
        ];
        box.appendChild(el("div", { class: "scroll" }, F.sortableTable(cols, tables, { sortKey: "bytes_requested" })));
      }
      main.appendChild(box);
    }

    // ---- uncovered ops -------------------------------------------------------------------------------
    {
      const box = F.card("uncovered", "Ops without a cost formula", "Ops the cost model has no FLOP/byte formula for: their time is real, but they add nothing to FLOPs or bytes, so totals and the roofline understate them.");
      let list = D.cost_model && Array.isArray(D.cost_model.uncovered_ops) ? D.cost_model.uncovered_ops : null;
      if (!list) {
        const agg = new Map();
        for (const n of nodes) if (n.level === "op" && n.extra.uncovered) {
          const a = agg.get(n.name) || { name: n.name, time_s: 0, calls: 0 };
          a.time_s += n.time_s; a.calls += n.calls; agg.set(n.name, a);
        }
        list = agg.size ? [...agg.values()] : null;
      }
      if (!list && !D.cost_model) {
        box.appendChild(F.note("Not available: run with the cost model to list the ops it cannot cost.", "info"));
      } else if (!list || !list.length) {
        box.appendChild(F.note("Every op in this profile has a cost formula.", "info"));
      } else {
        if (D.cost_model && isNum(D.cost_model.uncovered_time_share)) box.appendChild(el("p", { class: "small" }, "Time in uncovered ops: ", el("b", { text: F.pct(D.cost_model.uncovered_time_share) }), " of the step."));
        const cols = [
          { key: "name", label: "op", get: (o) => String(o.name), fmt: (o) => el("span", { class: "mono", text: String(o.name) }) },
          { key: "time", label: "time / step", num: true, get: (o) => o.time_s, fmt: (o) => fig(F.time(o.time_s), "apportioned") },
          { key: "share", label: "share of step", num: true, get: (o) => (runT && isNum(o.time_s) ? o.time_s / runT : null), fmt: (o) => fig(F.pct(runT && isNum(o.time_s) ? o.time_s / runT : null), "derived") },
          { key: "calls", label: "calls / step", num: true, get: (o) => o.calls, fmt: (o) => F.count(o.calls) },
        ];
        box.appendChild(el("div", { class: "scroll", style: { maxHeight: "360px" } }, F.sortableTable(cols, list, { sortKey: "time" })));
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
