/* recstack report section: shapes seen: input shapes per op over the op pass, filterable, with the
 * dynamic-shape signal. */
"use strict";

REPORT.section("shapes", (ctx) => {
  const { el, clear, isNum } = RS;
  const U = UNITS;
  const { nodes } = ctx;
  const { shortName } = REPORT;
  const ops = nodes.filter((n) => n.level === "op" && isNum(n.extra.distinct_shapes));
  const dyn = ops.filter((n) => n.extra.distinct_shapes > 1).length;
  const box = RS.card("shapes", "Shapes seen", "Input shapes per op over the op pass. More than one distinct shape means the op saw dynamic shapes (variable bag sizes, sequence lengths): a signal for padding, bucketing or recompilation cost.");
  if (!ops.length) {
    box.appendChild(RS.note("No op shapes in this profile (the op pass did not run).", "info"));
    ctx.main.appendChild(box);
  } else {
    box.appendChild(el("p", { class: "small" }, el("b", { text: String(dyn) }), " of " + ops.length + " op nodes saw more than one input shape."));
    const search = el("input", { type: "search", placeholder: "filter by op or module…", "aria-label": "filter shapes" });
    const onlyDyn = el("input", { type: "checkbox", id: "only-dynamic" });
    box.appendChild(el("div", { class: "toolbar" }, search, el("label", null, onlyDyn, " only ops with more than one shape")));
    const fmtShape = (sh) => (Array.isArray(sh) ? sh.map((a) => (Array.isArray(a) ? (a.length ? a.join("×") : "·") : RS.valueText(a))).join(", ") : RS.valueText(sh));
    const cols = [
      { key: "op", label: "op", get: (n) => n.name, fmt: (n) => el("span", { class: "mono", text: n.name }) },
      { key: "where", label: "module / stage", get: (n) => (n.parent ? n.parent.path : ""), fmt: (n) => el("span", { class: "small muted", text: n.parent ? shortName(n.parent) + (n.stage ? " · " + n.stage : "") : "" }) },
      { key: "calls", label: "calls / step", num: true, get: (n) => n.calls, fmt: (n) => U.count(n.calls) },
      { key: "time", label: "time / step", num: true, get: (n) => n.time_s, fmt: (n) => ctx.fig(U.time(n.time_s), ctx.provOf(n, "time_s")) },
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
      clear(holder).appendChild(RS.sortableTable(cols, rows, { sortKey: null }));
    };
    search.addEventListener("input", draw);
    onlyDyn.addEventListener("change", draw);
    draw();
    box.appendChild(holder);
    ctx.main.appendChild(box);
  }
});
