/* recstack report page, core: the section registry and what every section shares (the payload, the
 * indexed node tree, provenance tags, the roofline figures of a node as the classifier wrote them).
 * The page is built by the section modules report-*.js, one file per section, run in the order
 * recstack/report/build.py lists them (see docs/report.md); report-main.js starts it. */
"use strict";

const REPORT = (() => {
  const { el, isNum } = RS;
  const U = UNITS;
  const PROV_LETTER = { measured: "m", formula: "f", derived: "d" };
  /* Nodes a producer adds for time no op accounts for (extra.kind); drawn apart from measured ops. */
  const SYNTHETIC = {
    unattributed: "time the stage's timing pass measured that the op pass did not see; shown here, not spread over the ops",
    framework: "Python and framework time between ops, outside every op the op pass recorded",
  };
  const sections = [];

  /** Register a section: ``fn(ctx)`` adds its part of the page. Sections run in registration order. */
  function section(name, fn) { sections.push({ name, fn }); }

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

  /** The producer's display label (disambiguated among siblings) when it wrote one, else the name
   * without its parent's prefix. */
  function shortName(n) {
    if (typeof n.label === "string" && n.label) return n.label;
    const p = n.parent;
    if (n.level === "module" && p && p.level === "module" && n.name.startsWith(p.name + ".")) {
      const rest = n.name.slice(p.name.length + 1);
      // "layers.0" reads better than "0"
      return /^\d+$/.test(rest) ? p.name.split(".").pop() + "." + rest : rest;
    }
    return n.name;
  }

  /** The explanation of a synthetic node ([unattributed], [python/framework between ops]), or null. */
  const syntheticNote = (n) => SYNTHETIC[n.extra.kind] || null;

  /** Everything the sections share; ``app`` is the page's root element. */
  let shownRank = null;  // a multi-rank profile: the rank whose tree the page shows (null: the critical path)

  function context(app) {
    const D = RS.loadData();
    const root = shownRank !== null && D.rank_roots && D.rank_roots[shownRank] ? D.rank_roots[shownRank] : D.root;
    const nodes = indexTree(root);
    const runT = root.time_s > 0 ? root.time_s : null;
    const ctx = { D, app, root, nodes, run: D.run || {}, runT, ready: [], shownRank };
    ctx.share = (n) => (runT ? n.time_s / runT : null);

    ctx.provOf = (n, field) => {
      const own = n.extra.provenance;
      if (own && typeof own === "object" && typeof own[field] === "string") return own[field];
      const d = D.provenance_defaults[field];
      if (!d) return null;
      return d[n.level] || d["*"] || null;
    };
    ctx.provTag = (kind) => {
      if (!kind) return null;
      const letter = PROV_LETTER[kind] || kind.slice(0, 1);
      return el("span", { class: "prov " + (PROV_LETTER[kind] ? kind : "derived"), title: kind + ": " + (D.provenance_kinds[kind] || ""), text: letter });
    };
    /** A figure with its unit and a provenance tag. */
    ctx.fig = (text, kind) => el("span", { class: "nowrap" }, text, ctx.provTag(kind));

    // Roofline figures of a node, as the classifier wrote them (extra.roofline, extra.bound*).
    const R = (n) => (n.extra.roofline && typeof n.extra.roofline === "object" ? n.extra.roofline : null);
    ctx.R = R;
    ctx.ceilingOf = (n) => (R(n) && isNum(R(n).ceiling_fraction) ? R(n).ceiling_fraction : null);
    /** Whether the classifier flagged the node's fraction as above a probably under-measured roof. */
    ctx.suspect = (n) => !!(R(n) && R(n).roof_suspect === true);
    ctx.suspectReason = (n) => (R(n) && R(n).roof_suspect_reason) || "above the measured roof";
    /** A roof fraction of node ``n``: "188.0 %?" when its roof is suspect, never a plain number then. */
    ctx.roofPct = (n, v, digits) => (isNum(v) && ctx.suspect(n) ? U.pct(v, digits) + "?" : U.pct(v, digits));
    /** Intensity on unique bytes (each gathered row once): only for gather nodes with unique bytes. */
    ctx.uniqueIntensity = (n) => {
      const r = R(n);
      if (!r || r.roof !== "gather" || !isNum(r.achieved_flops) || !(r.achieved_unique_bytes_per_s > 0)) return null;
      return r.achieved_flops / r.achieved_unique_bytes_per_s;
    };
    /** The classifier's reason, with the suspect-roof reason beside it. */
    const why = (n) => {
      const ex = n.extra;
      const text = [ex.bound_reason, ex.bound_basis ? "basis: " + ex.bound_basis : null].filter(Boolean).join(" · ");
      return ctx.suspect(n) && !text.includes(ctx.suspectReason(n)) ? text + " [? " + ctx.suspectReason(n) + "]" : text;
    };
    ctx.boundBadge = (n) => {
      const ex = n.extra;
      if (!ex.bound) return el("span", { class: "faint", title: why(n) || null, text: "-" });
      return el("span", { class: "badge " + ex.bound, title: why(n), text: String(ex.bound) });
    };
    ctx.ceilingCell = (n) => {
      const r = R(n), f = ctx.ceilingOf(n);
      if (f === null) return "-";
      const uniq = n.extra.bound_basis === "unique bytes";
      const bad = ctx.suspect(n);
      const title = "of a " + U.flopRate(r.ceiling_flops) + " ceiling on " + (n.extra.bound_basis || "requested bytes") +
        (r.roof_dtype ? "; " + r.roof_dtype + " roof" : "") + (bad ? "; ? " + ctx.suspectReason(n) : "");
      return el("span", { class: "nowrap" + (bad ? " suspect" : ""), title },
        ctx.roofPct(n, f), uniq ? el("span", { class: "basis", title: "on unique bytes (hot rows served from cache)", text: "u" }) : null,
        r.roof_dtype ? el("span", { class: "dtype", title: "roof taken for " + r.roof_dtype, text: r.roof_dtype }) : null,
        ctx.provTag(ctx.provOf(n, "roofline")));
    };
    ctx.roofText = (r) => {
      const g = r.gather;
      const turn = g && g.footprint_bytes > g.table_bytes ? ", " + U.bytes(g.footprint_bytes) + " of tables read in turn; one table alone " + U.byteRate(g.one_table_bytes_per_s) : "";
      return r.roof + " " + U.byteRate(r.roof_bytes_per_s) + (g ? " (" + U.bytes(g.row_bytes) + " rows, " + U.bytes(g.table_bytes) + " tables" + turn + ")" : "");
    };
    /** Tooltip rows with a node's roofline figures (nothing when it was not classified). */
    ctx.roofRows = (n) => {
      const r = R(n), ex = n.extra;
      if (!r) return [];
      const rows = [["bound", ex.bound ? ex.bound + (ex.bound_basis ? " (on " + ex.bound_basis + ")" : "") : "none"], ["why", ex.bound_reason]];
      if (ctx.suspect(n)) rows.push(["? roof suspect", ctx.suspectReason(n)]);
      if (!isNum(r.achieved_bytes_per_s)) return rows;
      const p = (v) => ctx.roofPct(n, v);
      rows.push(
        ["of ceiling", p(r.ceiling_fraction) + " of " + U.flopRate(r.ceiling_flops)],
        ["achieved", U.flopRate(r.achieved_flops)],
        ["intensity, requested bytes", U.intensity(r.intensity)],
        ["intensity, unique bytes", U.intensity(ctx.uniqueIntensity(n))],
        ["bandwidth, requested bytes", U.byteRate(r.achieved_bytes_per_s) + " = " + p(r.memory_fraction_requested) + " of roof"],
        ["bandwidth, unique bytes", isNum(r.achieved_unique_bytes_per_s) ? U.byteRate(r.achieved_unique_bytes_per_s) + " = " + p(r.memory_fraction_unique) + " of roof" : null],
        ["memory roof", ctx.roofText(r)],
        ["compute", p(r.compute_fraction) + " of " + U.flopRate(r.peak_flops) + (r.roof_dtype ? " (" + r.roof_dtype + " roof)" : "")],
        ["time per call", U.time(r.per_call_s)]);
      if (r.partial) rows.push(["partial", "some ops below have no cost formula"]);
      return rows;
    };
    /** The step's time by bound class, from the stages' bounds and times: [{bound, share}] largest first
     * (bound null: stages the classifier left unclassified), and the run's bound read from it: a class
     * holding at least two thirds of the classified time, else "mixed". Null without classified stages. */
    ctx.boundShares = () => {
      const stages = root.children.filter((n) => n.level === "stage" && isNum(n.time_s) && n.time_s > 0);
      const total = stages.reduce((s, n) => s + n.time_s, 0);
      if (!total || !stages.some((n) => n.extra.bound)) return null;
      const by = new Map();
      for (const n of stages) by.set(n.extra.bound || null, (by.get(n.extra.bound || null) || 0) + n.time_s / total);
      const shares = [...by.entries()].map(([bound, share]) => ({ bound, share })).sort((a, b) => b.share - a.share);
      const classified = shares.filter((s) => s.bound).reduce((s, x) => s + x.share, 0);
      const top = shares.find((s) => s.bound);
      return { shares, bound: top.share >= (2 / 3) * classified ? top.bound : "mixed" };
    };
    /** "memory 52 % · compute 47 % · unclassified 1 %" of the step's time. */
    ctx.boundSharesText = (b) => b.shares.filter((s) => s.bound || s.share >= 0.001)
      .map((s) => (s.bound || "unclassified") + " " + U.pct(s.share, s.share < 0.1 ? 1 : 0)).join(" · ");
    /** Tooltip rows with every figure of a node. */
    ctx.nodeRows = (n) => {
      const rows = [
        ["level", n.level],
        ["stage", n.stage || "-"],
        ["time / step", U.time(n.time_s) + " (" + (ctx.provOf(n, "time_s") || "") + ")"],
        ["share of step", U.pct(ctx.share(n))],
        ["self time", U.time(n.self_time_s)],
        ["calls / step", U.count(n.calls)],
      ];
      if (syntheticNote(n)) rows.push(["what", syntheticNote(n)]);
      if (isNum(n.extra.time_s_p10)) rows.push(["p10 – p90", U.time(n.extra.time_s_p10) + " – " + U.time(n.extra.time_s_p90)]);
      if (isNum(n.flops)) rows.push(["FLOPs", U.flops(n.flops)]);
      if (isNum(n.bytes)) rows.push(["bytes", U.bytes(n.bytes) + (isNum(n.extra.bytes_read) ? " (read " + U.bytes(n.extra.bytes_read) + ", written " + U.bytes(n.extra.bytes_written) + ")" : "")]);
      if (isNum(n.intensity)) rows.push(["intensity", U.intensity(n.intensity)]);
      if (n.extra.uncovered) rows.push(["cost", "uncovered: " + (n.extra.uncovered_reason || "no formula")]);
      if (n.extra.cost_in_parent) rows.push(["cost", "counted at the enclosing op"]);
      rows.push(...ctx.roofRows(n));
      const mem = n.extra.memory_peak;  // the memory pass (profile --memory): measured, and predicted for zoo models
      if (mem && isNum(mem.peak_bytes)) rows.push(["memory peak", U.bytes(mem.peak_bytes) + " measured (" + mem.device + " allocator, above the step's start)" + (isNum(mem.predicted_peak_bytes) ? ", " + U.bytes(mem.predicted_peak_bytes) + " predicted" : "") + (isNum(mem.saved_for_backward_bytes) ? "; " + U.bytes(mem.saved_for_backward_bytes) + " saved for backward" : "")]);
      if (n.extra.module_type) rows.push(["module type", String(n.extra.module_type)]);
      if (isNum(n.extra.distinct_shapes)) rows.push(["distinct shapes", String(n.extra.distinct_shapes)]);
      if (n.label && n.label !== n.name) rows.push(["name", n.name]);
      rows.push(["path", n.path]);
      return rows;
    };
    return ctx;
  }

  /** Build the page into ``app``: every registered section in order, then what they left for the end. */
  function render(app) {
    const ctx = context(app);
    for (const s of sections) s.fn(ctx);
    for (const fn of ctx.ready) fn();
  }

  /** Re-build the page showing rank ``r``'s tree (null: the critical path, the profile's own root). */
  function showRank(app, r) {
    shownRank = r;
    RS.clear(app);
    render(app);
  }

  return { section, render, showRank, ancestors, shortName, syntheticNote };
})();
