"""Roofline classification of every node of a Profile against measured machine figures.

``classify(profile, machine)`` is pure with respect to the outside world: it
reads the Profile's cost fields (``flops``, ``bytes``, ``intensity``, and for
embedding ops ``extra["unique_bytes"]``) and a machine dict
(:mod:`recstack.hardware.machine`), and mutates the tree:

* every node gets ``extra["bound"]`` (``"memory"``, ``"compute"``,
  ``"overhead"`` or None), ``extra["bound_basis"]`` (``"requested bytes"`` /
  ``"unique bytes"`` or None), ``extra["bound_reason"]`` and
  ``extra["roofline"]`` with the figures below;
* the profile gets ``extra["machine"]``: the compact machine figures used
  (roofs at the profile's thread count and dtype, thresholds).

Figures per node (``extra["roofline"]``): ``achieved_flops`` (flops/time_s),
``achieved_bytes_per_s`` (bytes/time_s), ``achieved_unique_bytes_per_s``,
``intensity`` (flops/bytes), ``roof`` (``stream`` or ``gather``),
``roof_bytes_per_s``, ``peak_flops``, ``ceiling_flops`` (min(peak, I x bandwidth)
on the basis bytes), ``ceiling_fraction`` (achieved over ceiling; equals
max(compute_fraction, memory fraction on the basis)), ``compute_fraction``,
``memory_fraction_requested``, ``memory_fraction_unique``, ``per_call_s``,
``roof_dtype`` (the dtype of the GEMM roof: the dtype the node's ops ran in,
:func:`node_dtype`), ``roof_key`` (the roof of the ceiling: ``gemm.<dtype>``,
``stream`` or ``gather``), ``roof_suspect`` (ceiling fraction above
:data:`ROOF_SUSPECT_FRACTION`) with ``roof_suspect_reason``, and, for
gathers, ``gather`` (row bytes, table bytes, where they came from).

Which bandwidth: an op is *gather-like* when its name is an embedding/gather
op (:data:`GATHER_OP_PATTERN`) or it carries the cost model's lookups or
unique bytes; a module, stage or run when its outermost embedding/gather ops
take at least :data:`GATHER_DOMINANCE` of the op time in its subtree
(:func:`gather_share`, :func:`is_gather_like`).
Gather-like nodes are held to the measured random-gather bandwidth (uniform
indices: every lookup a fresh row) interpolated at their row size and table
footprint (:func:`gather_point`; log-log in both, linear in threads); every
other node to the streaming bandwidth (best of copy and triad).

Cost-model fields are read from ``extra[key]`` or ``extra["cost_detail"][key]``
(:func:`cost_extra`): ``unique_bytes``, ``lookups`` and ``table_bytes``
(requested row bytes, lookups x row size).

Basis: when a gather node's requested bytes per second exceed the gather
roof (possible only because skewed lookups hit hot rows in cache) and it
carries unique bytes (its own, or for a module or stage whose outermost
embedding ops all carry them, its bytes with those ops' requested bytes
replaced by their unique bytes), the memory fraction is taken on unique bytes (the
traffic that had to come from memory at least once): ``bound_basis =
"unique bytes"``. Otherwise on requested bytes. Both fractions are stored.

Bound: ``overhead`` when the node moves no bytes and does no FLOPs (views,
no-ops), when the time per call is below :data:`OVERHEAD_PER_CALL_S`
or the node reaches less than :data:`OVERHEAD_ROOF_FRACTION` of both roofs
(compute, and memory on both bases); else ``compute`` when its compute
fraction exceeds its memory fraction (it sits right of the ridge), else
``memory``. Nodes with null ``flops`` or ``bytes`` get ``bound = None`` and a reason.

Roof values use the best repeat of each machine figure (:data:`ROOF_STATISTIC`,
as STREAM does: interference only ever lowers a rate).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recstack.errors import DataError
from recstack.hardware.bench import ROOF_STATISTIC
from recstack.hardware.machine import latency_trusted, validate_machine
from recstack.hardware.measure_checks import is_contended
from recstack.tree import Node, Profile
from recstack.units import binary

TURN_TAPER_LOG2 = 2.0  # in-turn penalty tapers to none at 2**-2 of the smallest in-turn cell's table size
OVERHEAD_PER_CALL_S = 5e-6
OVERHEAD_ROOF_FRACTION = 0.10
GATHER_DOMINANCE = 0.5
ROOF_SUSPECT_FRACTION = 1.05  # a ceiling fraction above this is a roof problem, not a fast node
ROOF_SUSPECT_REASON = "above the measured roof; the roof is probably under-measured"
UNIQUE_BASIS_WHEN_REQUESTED_ABOVE = 1.0
DEFAULT_ROW_BYTES = 128
GATHER_OP_PATTERN = re.compile(r"embedding|index_select|gather|\btake\b", re.IGNORECASE)
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
THRESHOLDS = {
    "overhead_per_call_s": OVERHEAD_PER_CALL_S,
    "overhead_roof_fraction": OVERHEAD_ROOF_FRACTION,
    "gather_dominance": GATHER_DOMINANCE,
    "unique_basis_when_requested_above": UNIQUE_BASIS_WHEN_REQUESTED_ABOVE,
    "roof_statistic": ROOF_STATISTIC,
    "roof_suspect_fraction": ROOF_SUSPECT_FRACTION,
}


# -- machine figures --------------------------------------------------------------
def interp_threads(by_threads: dict[int, float], threads: int) -> float:
    """Linear interpolation over measured thread counts, clamped at both ends."""
    ts = sorted(by_threads)
    return float(np.interp(threads, ts, [by_threads[t] for t in ts]))


def _value(stat: dict[str, Any]) -> float:
    return float(stat[ROOF_STATISTIC])


@dataclass
class Roofs:
    """The roofs for one profile: peak FLOP/s, stream and gather bandwidth at its threads and dtype."""

    device: str
    threads: int
    dtype: str
    peak_flops: float
    peak_label: str
    stream_bw: float
    stream_label: str
    gather_points: dict[tuple[int, int], float]  # (row bytes, table bytes) -> bytes/s (uniform, one table)
    compute_roofs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # (row bytes, table bytes) -> (bytes/s, footprint bytes): uniform cells with tables read in turn
    gather_turn_points: dict[tuple[int, int], tuple[float, int]] = field(default_factory=dict)

    def peak_for(self, dtype: str) -> tuple[float, str, str]:
        """(FLOP/s, label, dtype used) of the GEMM roof for ``dtype``; the main peak when the
        machine has no figure for it."""
        for r in self.compute_roofs:
            if r["dtype"] == dtype:
                where = f" at {self.threads} thread(s)" if self.device == "cpu" else ""
                return float(r["flops"]), f"{r['label']}{where}", dtype
        return self.peak_flops, self.peak_label, self.dtype if self.dtype in self.dtypes() else "fp32"

    def dtypes(self) -> set[str]:
        return {str(r["dtype"]) for r in self.compute_roofs}

    def gather_bw(self, row_bytes: float, table_bytes: float, footprint_bytes: float | None = None) -> float:
        """Gather bandwidth at (row, table), log-log interpolated over the grid and clamped to it.

        With ``footprint_bytes`` (the sum of the tables read in turn) above
        ``table_bytes`` and tables-in-turn cells in the grid, the one-table
        figure is lowered by the measured in-turn *penalty* (log of in-turn over
        one-table bandwidth at the cells' table sizes, interpolated between
        them and clamped above the largest), scaled linearly in
        log(footprint / table) up to the cells' footprint. Below the smallest
        in-turn cell's table size the penalty tapers (linearly in log size) to
        none at a quarter of that size: nothing was measured there, and
        smaller tables' page-table entries fit the caches better.
        """
        lt = math.log2(max(table_bytes, 1.0))

        def one_table_at(r: int, log_table: float) -> float:
            pts = sorted((t, bw) for (rr, t), bw in self.gather_points.items() if rr == r)
            return float(np.interp(log_table, [math.log2(t) for t, _ in pts], [math.log2(bw) for _, bw in pts]))

        def one_table(r: int) -> float:
            return one_table_at(r, lt)

        def in_turn(r: int, base: float) -> float:
            pts = sorted((t, v) for (rr, t), v in self.gather_turn_points.items() if rr == r)
            if not pts or footprint_bytes is None or footprint_bytes <= table_bytes:
                return base
            xs = [math.log2(t) for t, _ in pts]
            # below the smallest cell's tables the penalty tapers to none at a quarter of their size
            taper = max(0.0, 1.0 - (xs[0] - lt) / TURN_TAPER_LOG2) if lt < xs[0] else 1.0
            if taper <= 0.0:
                return base
            penalties = [min(0.0, math.log2(v[0]) - one_table_at(r, x)) for x, (_t, v) in zip(xs, pts, strict=True)]
            penalty = taper * float(np.interp(lt, xs, penalties))
            cell_fp = math.log2(max(v[1] for _, v in pts))
            span = cell_fp - lt
            w = 1.0 if span <= 0 else min(1.0, max(0.0, (math.log2(footprint_bytes) - lt) / span))
            return base + w * penalty

        rows = sorted({r for r, _ in self.gather_points})
        ys = [in_turn(r, one_table(r)) for r in rows]
        return float(2 ** np.interp(math.log2(max(row_bytes, 1.0)), [math.log2(r) for r in rows], ys))


def build_roofs(machine: dict[str, Any], run: dict[str, Any]) -> Roofs:
    """Roofs for a profile's ``run`` (threads, dtype, device) from a validated machine dict."""
    dtype = str(run.get("dtype") or "fp32")
    device = str(run.get("device") or "cpu")
    notes: list[str] = []
    if device == "cuda":
        return _gpu_roofs(machine, run, dtype)
    measured = sorted(int(t) for t in machine["gemm_flops"]["fp32"]["by_threads"])
    threads = int(run.get("threads") or max(measured))
    if threads > max(measured):
        notes.append(f"profile ran at {threads} threads; figures measured up to {max(measured)} (clamped)")
    compute_roofs = []
    for dt, entry in machine["gemm_flops"].items():
        if not isinstance(entry, dict) or "by_threads" not in entry:
            continue
        bt = {int(t): _value(s) for t, s in entry["by_threads"].items()}
        label = f"{dt} GEMM" + (" (emulated)" if entry.get("emulated") else "")
        compute_roofs.append({"dtype": dt, "label": label, "flops": interp_threads(bt, threads)})
    peak_dtype = dtype if dtype in machine["gemm_flops"] else "fp32"
    if peak_dtype != dtype:
        notes.append(f"machine has no {dtype} GEMM figure; fp32 peak used")
    peak = next(r for r in compute_roofs if r["dtype"] == peak_dtype)
    for r in compute_roofs:
        r["main"] = r["dtype"] == peak_dtype
    stream_bt: dict[int, float] = {}
    for t, kinds in machine["stream_bandwidth"]["by_threads"].items():
        stream_bt[int(t)] = max(_value(kinds["copy"]), _value(kinds["triad"]))
    cells: dict[tuple[int, int], dict[int, float]] = {}
    turn: dict[tuple[int, int], dict[int, float]] = {}
    turn_fp: dict[tuple[int, int], int] = {}
    for c in machine["gather_bandwidth"]["grid"]:
        if c["dist"] != "uniform":
            continue
        key = (int(c["row_bytes"]), int(c["table_bytes"]))
        if int(c.get("tables_in_turn", 1)) == 1:
            cells.setdefault(key, {})[int(c["threads"])] = _value(c["bandwidth"])
        else:
            turn.setdefault(key, {})[int(c["threads"])] = _value(c["bandwidth"])
            turn_fp[key] = int(c.get("footprint_bytes") or c["table_bytes"] * int(c["tables_in_turn"]))
    if not cells:
        raise DataError("machine file: gather_bandwidth.grid has no uniform cells")
    gather = machine["gather_bandwidth"]
    if gather.get("native") is False or "index_select" in str(gather.get("kernel", "")):
        why = gather.get("fallback_reason") or "machine file from an older recstack"
        notes.append(
            "gather roof measured with torch.index_select, not recstack's native kernel "
            f"({why}); it is below what embedding operators reach, so gather fractions may exceed 100%"
        )
    return Roofs(
        device="cpu",
        threads=threads,
        dtype=dtype,
        peak_flops=peak["flops"],
        peak_label=f"{peak['label']} at {threads} thread(s)",
        stream_bw=interp_threads(stream_bt, threads),
        stream_label=f"stream (best of copy, triad) at {threads} thread(s)",
        gather_points={k: interp_threads(v, threads) for k, v in cells.items()},
        compute_roofs=compute_roofs,
        notes=notes,
        gather_turn_points={k: (interp_threads(v, threads), turn_fp[k]) for k, v in turn.items()},
    )


def _gpu_roofs(machine: dict[str, Any], run: dict[str, Any], dtype: str) -> Roofs:
    gpu = machine.get("gpu")
    if gpu and gpu.get("error"):
        raise DataError(
            f"the machine file's GPU measurement failed ({gpu['error']}); re-measure with --refresh"
        )
    if not gpu:
        raise DataError(
            "the profile ran on cuda but the machine file has no GPU figures (measure on that host)"
        )
    gemm = gpu["gemm_flops"]
    compute_roofs = [
        {"dtype": k, "label": f"{k} GEMM", "flops": _value(v), "main": k == dtype} for k, v in gemm.items()
    ]
    if dtype not in gemm:
        raise DataError(f"machine file: gpu.gemm_flops has no {dtype!r} figure")
    cells = {
        (int(c["row_bytes"]), int(c["table_bytes"])): _value(c["bandwidth"])
        for c in gpu["gather_bandwidth"]["grid"]
        if c["dist"] == "uniform"
    }
    return Roofs(
        device="cuda",
        threads=int(run.get("threads") or 1),
        dtype=dtype,
        peak_flops=_value(gemm[dtype]),
        peak_label=f"{dtype} GEMM on {gpu.get('name', 'GPU')}",
        stream_bw=_value(gpu["hbm_bandwidth"]["copy"]),
        stream_label="HBM (device copy)",
        gather_points=cells,
        compute_roofs=compute_roofs,
    )


# -- gather detection -------------------------------------------------------------
def _top_gather_ops(node: Node) -> Iterator[Node]:
    """Outermost embedding/gather op nodes in ``node``'s subtree (nested ones are not counted twice)."""
    if node.level == "op" and GATHER_OP_PATTERN.search(node.name):
        yield node
        return
    for c in node.children:
        yield from _top_gather_ops(c)


def _top_ops(node: Node) -> Iterator[Node]:
    """Outermost op nodes in ``node``'s subtree (``node`` itself if it is an op)."""
    if node.level == "op":
        yield node
        return
    for c in node.children:
        yield from _top_ops(c)


def gather_share(node: Node) -> float:
    """Share of the op time in ``node``'s subtree (outermost ops) spent in embedding/gather ops.

    Op time, not node time: module hooks and Python glue between ops are
    not work of either kind, and at small scales they are a large part of
    an embedding stage's time."""
    total = sum(o.time_s for o in _top_ops(node))
    if total <= 0:
        return 0.0
    return min(1.0, sum(g.time_s for g in _top_gather_ops(node)) / total)


def is_gather_like(node: Node, share: float | None = None) -> bool:
    """An embedding/gather op (by name, or carrying the cost model's lookups or unique bytes), or a
    non-op node whose outermost embedding/gather ops take at least :data:`GATHER_DOMINANCE` of its op time.

    Unique bytes alone do not make a module, stage or run gather-like: the
    cost model sums them up the tree, so every ancestor of an embedding op carries them."""
    if node.level in ("op", "kernel"):
        return bool(GATHER_OP_PATTERN.search(node.name)) or (
            node.level == "op"
            and (cost_extra(node, "unique_bytes") is not None or bool(cost_extra(node, "lookups")))
        )
    return (gather_share(node) if share is None else share) >= GATHER_DOMINANCE


def _shape_point(op: Node, elem: int) -> tuple[float, float, float] | None:
    """(row bytes, table bytes, lookups) from an op's recorded shapes when its first argument is 2-D."""
    shapes = op.shapes
    if not isinstance(shapes, list) or not shapes:
        return None
    first = shapes[0]
    if not isinstance(first, list) or len(first) < 2:
        return None
    w, idx = first[0], first[1]
    if not (isinstance(w, list) and len(w) == 2 and all(isinstance(x, int) for x in w)):
        return None
    lookups = float(idx[0]) if isinstance(idx, list) and len(idx) == 1 and isinstance(idx[0], int) else 1.0
    return float(w[1] * elem), float(w[0] * w[1] * elem), max(lookups, 1.0)


def tables_point(tables: Any) -> tuple[float, float, float] | None:
    """(row bytes, per-table bytes, summed table bytes) from the profile's ``embedding_tables``
    (:func:`recstack.zoo.embedding.table_stats`: row bytes include int8 rows' scale and bias).

    Row and per-table bytes are weighted by lookups (each lookup reads one row of one table);
    tables without lookups count once each when no table has any."""
    if not isinstance(tables, list):
        return None
    rows = [
        (float(t["row_bytes"]), float(t["table_bytes"]), max(0.0, float(t.get("lookups") or 0)))
        for t in tables
        if isinstance(t, dict) and _num(t.get("row_bytes")) and _num(t.get("table_bytes"))
    ]
    if not rows:
        return None
    if sum(w for *_x, w in rows) <= 0:
        rows = [(r, tb, 1.0) for r, tb, _w in rows]
    weight = sum(w for *_x, w in rows)
    row = sum(r * w for r, _tb, w in rows) / weight
    per_table = sum(tb * w for _r, tb, w in rows) / weight
    return row, per_table, float(sum(tb for _r, tb, _w in rows))


def tables_footprint(node: Node, elem: int) -> float | None:
    """Sum of the table bytes ``node``'s outermost embedding/gather ops read (one table per op node,
    from its 2-D weight shape), or None when no op recorded one."""
    sizes = [
        p[1]
        for op in _top_gather_ops(node)
        if "backward" not in op.name and (p := _shape_point(op, elem)) is not None
    ]  # backward ops' first argument is a gradient, not a table
    return float(sum(sizes)) if sizes else None


def _own(node: Node, key: str) -> float | None:
    """A figure set on the node itself under ``key``, outside the schema (docs/machine.md): it wins over
    what the roofline derives."""
    return _num(node.extra.get(key))


def cost_extra(node: Node, key: str) -> float | None:
    """A cost-model figure of ``node``: ``extra[key]``, else ``cost_detail[key]`` (where
    :mod:`recstack.costmodel` puts ``lookups``, ``table_bytes`` = lookups x row bytes, ``unique_bytes``)."""
    v = _own(node, key)
    if v is None:
        detail = node.cost_detail
        if isinstance(detail, dict):
            v = _num(detail.get(key))
    return v


def gather_point(
    node: Node,
    run: dict[str, Any],
    roofs: Roofs,
    stage_footprint: tuple[float, str] | None = None,
    tables: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Row bytes and table footprint for a gather node, each with where it came from.

    Row bytes: the node's own figure where it has one (``extra["row_bytes"]``,
    else the cost model's requested bytes over its lookups, exact per op,
    int8 rows included); else the one figure the profile carries for its
    tables (``tables``: the profile's ``embedding_tables``, lookup-weighted,
    see :func:`tables_point`); else, for profiles without table statistics
    (models outside the zoo), the 2-D weight shapes of the outermost
    embedding ops; else :data:`DEFAULT_ROW_BYTES`. Footprint (the table a
    lookup walks), in order: ``extra["table_footprint_bytes"]``; the weight
    shapes (weighted by lookups); the profile's tables (lookup-weighted);
    else the largest measured table (treated as far beyond the cache).

    The footprint is per table, weighted by lookups, not the sum over tables:
    every lookup walks one table (per-table embedding_bag calls, and FBGEMM's
    table-batched kernel also works table by table), so the working set that
    decides cache and TLB behaviour within a call is one table's; reading
    other tables in between evicts its page-table entries, so a stage cycling
    through many tables sits between the per-table roof and the
    summed-footprint roof, much nearer the former (measured figures:
    benchmarks/LOG.md, "Machine roofline"). The machine's *tables in turn* cells measure exactly
    that pattern, so the roof also takes the footprint (``footprint_bytes``,
    the sum of the tables read in turn): ``extra["footprint_bytes"]``; else
    ``stage_footprint`` (the enclosing stage's tables, passed by
    :func:`classify`, so that an op is held to the pattern it runs in);
    else the node's own ops' tables; else the profile's tables
    (see :meth:`Roofs.gather_bw`).
    """
    elem = ELEMENT_BYTES.get(str(run.get("table_dtype") or "fp32"), 4)
    pts = [(p, op.path) for op in _top_gather_ops(node) if (p := _shape_point(op, elem)) is not None]
    mc = tables_point(tables)
    row, row_src = _own(node, "row_bytes"), "node"
    if row is None:
        req, looks = cost_extra(node, "table_bytes"), cost_extra(node, "lookups")
        if req and looks:
            row, row_src = req / looks, "cost model (requested row bytes / lookups)"
    if row is None and mc is not None:
        row, row_src = mc[0], "embedding tables"
    if row is None and pts:
        looks_total = sum(p[2] for p, _ in pts)
        row, row_src = sum(p[0] * p[2] for p, _ in pts) / looks_total, "op shapes"
    if row is None:
        row, row_src = float(DEFAULT_ROW_BYTES), "default"
    table, table_src = _own(node, "table_footprint_bytes"), "node"
    if table is None and pts:
        looks_total = sum(p[2] for p, _ in pts)
        table, table_src = sum(p[1] * p[2] for p, _ in pts) / looks_total, "op shapes"
    if table is None and mc is not None:
        table, table_src = mc[1], "embedding tables"
    if table is None:
        table, table_src = float(max(t for _, t in roofs.gather_points)), "default (largest measured table)"
    foot, foot_src = _own(node, "footprint_bytes"), "node"
    if foot is None and stage_footprint is not None:
        foot, foot_src = stage_footprint
    if foot is None and (own := tables_footprint(node, elem)) is not None:
        foot, foot_src = own, "op shapes (sum of tables)"
    if foot is None and mc is not None:
        foot, foot_src = mc[2], "embedding tables (sum of tables)"
    if foot is None:
        foot, foot_src = table, "table"
    return {
        "row_bytes": row,
        "row_source": row_src,
        "table_bytes": table,
        "table_source": table_src,
        "footprint_bytes": max(foot, table),
        "footprint_source": foot_src,
    }


def summed_unique_bytes(node: Node) -> float | None:
    """Unique bytes of a node that carries none itself but whose outermost embedding ops all do:
    the node's bytes with each op's requested bytes replaced by its unique bytes. None otherwise."""
    if node.level == "op":
        return None
    ops = list(_top_gather_ops(node))
    total = _num(node.bytes)
    if not ops or total is None:
        return None
    req = [_num(o.bytes) for o in ops]
    uni = [cost_extra(o, "unique_bytes") for o in ops]
    if any(v is None for v in req + uni):
        return None
    return max(0.0, total - sum(req) + sum(uni))  # type: ignore[arg-type]


# -- classification ---------------------------------------------------------------
def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _major_dtype(counts: Any) -> str | None:
    if not isinstance(counts, dict) or not counts:
        return None
    return str(max(counts, key=lambda k: counts[k]))


def node_dtype(node: Node) -> str | None:
    """The dtype ``node``'s work ran in: an op's most frequent floating input dtype (``extra["dtypes"]``,
    recorded by the op pass); for other nodes, the dtype of most of the FLOPs of their outermost ops
    (by call count where no op has FLOPs). None when no op recorded dtypes."""
    if node.level == "op":
        return _major_dtype(node.dtypes)
    flops: dict[str, float] = {}
    calls: dict[str, float] = {}
    for op in _top_ops(node):
        dt = _major_dtype(op.dtypes)
        if dt is not None:
            flops[dt] = flops.get(dt, 0.0) + (_num(op.flops) or 0.0)
            calls[dt] = calls.get(dt, 0.0) + float(op.calls or 1)
    if not calls:
        return None
    by = flops if max(flops.values()) > 0 else calls
    return max(by, key=lambda k: by[k])


def classify_node(
    node: Node,
    roofs: Roofs,
    run: dict[str, Any],
    stage_footprint: tuple[float, str] | None = None,
    tables: list[dict[str, Any]] | None = None,
) -> None:
    """Annotate one node (see the module docstring for keys and rules); ``stage_footprint`` is the
    enclosing stage's summed table bytes and where they came from (see :func:`gather_point`);
    ``tables`` the profile's ``embedding_tables``."""
    flops, nbytes, t = _num(node.flops), _num(node.bytes), _num(node.time_s)
    unique, unique_source = cost_extra(node, "unique_bytes"), "cost model"
    if unique is None:
        unique, unique_source = summed_unique_bytes(node), "summed from embedding ops"
    share = gather_share(node)
    is_gather = is_gather_like(node, share)
    peak, peak_label, roof_dtype = roofs.peak_for(node_dtype(node) or roofs.dtype)
    info: dict[str, Any] = {"roof": "gather" if is_gather else "stream", "peak_flops": peak, "roof_dtype": roof_dtype}
    node.roofline = info
    node.bound = None
    node.bound_basis = None
    missing = [k for k, v in (("flops", flops), ("bytes", nbytes)) if v is None]
    if missing:
        if node.cost_in_parent:
            node.bound_reason = "its cost is counted at the enclosing op (cost_in_parent)"
        elif node.uncovered:
            node.bound_reason = (
                f"no cost figures: {node.uncovered_reason or 'not covered by the cost model'}"
            )
        else:
            node.bound_reason = f"no cost figures ({' and '.join(missing)} null): run the cost model"
        return
    if node.partial:
        info["partial"] = True  # the cost sums over a subtree with unpriced parts
    assert flops is not None and nbytes is not None
    if t is None or t <= 0:
        node.bound_reason = "no time measured for this node"
        return
    if is_gather:
        gp = gather_point(node, run, roofs, stage_footprint, tables)
        gp["share"] = share
        info["gather"] = gp
        bw = roofs.gather_bw(gp["row_bytes"], gp["table_bytes"], gp["footprint_bytes"])
        gp["one_table_bytes_per_s"] = roofs.gather_bw(gp["row_bytes"], gp["table_bytes"])
    else:
        bw = roofs.stream_bw
    calls = max(1, int(node.calls or 1))
    ach_f, ach_b = flops / t, nbytes / t
    ach_u = unique / t if unique is not None else None
    frac_c = ach_f / peak if peak > 0 else 0.0
    frac_req = ach_b / bw if bw > 0 else 0.0
    frac_uni = ach_u / bw if ach_u is not None and bw > 0 else None
    basis = "requested bytes"
    frac_mem, basis_bytes = frac_req, nbytes
    if frac_uni is not None and frac_req > UNIQUE_BASIS_WHEN_REQUESTED_ABOVE:
        basis, frac_mem, basis_bytes = "unique bytes", frac_uni, float(unique or 0.0)
    intensity = _num(node.intensity)
    if intensity is None and nbytes > 0:
        intensity = flops / nbytes
    basis_intensity = flops / basis_bytes if basis_bytes > 0 else None
    ceiling = min(peak, basis_intensity * bw) if basis_intensity is not None else None
    memory_ceiling = basis_intensity is not None and basis_intensity * bw < peak
    if unique is not None:
        info["unique_bytes_source"] = unique_source
    info.update(
        achieved_flops=ach_f,
        achieved_bytes_per_s=ach_b,
        achieved_unique_bytes_per_s=ach_u,
        intensity=intensity,
        roof_bytes_per_s=bw,
        ridge_intensity=peak / bw if bw > 0 else None,
        ceiling_flops=ceiling,
        ceiling_fraction=max(frac_c, frac_mem),
        roof_key=info["roof"] if memory_ceiling else f"gemm.{roof_dtype}",
        compute_fraction=frac_c,
        memory_fraction_requested=frac_req,
        memory_fraction_unique=frac_uni,
        per_call_s=t / calls,
    )
    node.bound_basis = basis
    info["roof_suspect"] = info["ceiling_fraction"] > ROOF_SUSPECT_FRACTION
    if info["roof_suspect"]:
        info["roof_suspect_reason"] = ROOF_SUSPECT_REASON
    per_call = t / calls
    best_mem = max(frac_req, frac_uni or 0.0)
    if flops == 0 and nbytes == 0:
        node.bound = "overhead"
        node.bound_reason = "0 FLOPs and 0 bytes (a view, metadata or no-op): its time is dispatch overhead"
    elif per_call < OVERHEAD_PER_CALL_S:
        node.bound = "overhead"
        node.bound_reason = (
            f"{per_call * 1e6:.2f} us per call is below the {OVERHEAD_PER_CALL_S * 1e6:.0f} us floor "
            "where dispatch and launch cost dominate"
        )
    elif frac_c < OVERHEAD_ROOF_FRACTION and best_mem < OVERHEAD_ROOF_FRACTION:
        node.bound = "overhead"
        node.bound_reason = (
            f"reaches {frac_c:.1%} of peak FLOP/s and {best_mem:.1%} of the {info['roof']} bandwidth: below "
            f"{OVERHEAD_ROOF_FRACTION:.0%} of both roofs"
        )
    elif frac_c > frac_mem:
        node.bound = "compute"
        node.bound_reason = f"{frac_c:.0%} of {peak_label}; intensity right of the ridge"
    else:
        node.bound = "memory"
        node.bound_reason = f"{frac_mem:.0%} of the {info['roof']} bandwidth on {basis}" + (
            f" (requested bytes at {frac_req:.0%}: hot rows served from cache)"
            if basis == "unique bytes"
            else ""
        )
    if info["roof_suspect"]:
        node.bound_reason += f" ({ROOF_SUSPECT_REASON})"


def _ns_to_s(ns: float | None) -> float | None:
    return ns * 1e-9 if ns is not None else None


def classify(profile: Profile, machine: dict[str, Any]) -> None:
    """Classify every node of ``profile`` against ``machine`` (mutates; see the module docstring)."""
    validate_machine(machine, "machine")
    run = profile.run or {}
    roofs = build_roofs(machine, run)
    elem = ELEMENT_BYTES.get(str(run.get("table_dtype") or "fp32"), 4)
    tables = profile.embedding_tables
    tables = tables if isinstance(tables, list) else None
    classify_node(profile.root, roofs, run, tables=tables)
    for stage in profile.root.children:
        fp = tables_footprint(stage, elem)
        footprint = (fp, f"stage {stage.name}: op shapes (sum of tables)") if fp else None
        for node in stage.walk():
            classify_node(node, roofs, run, footprint, tables)
    gather_roofs: dict[float, dict[str, Any]] = {}
    for stage in profile.root.children:
        g = (stage.roofline or {}).get("gather")
        bw = (stage.roofline or {}).get("roof_bytes_per_s")
        if g and bw:
            label = f"gather {g['row_bytes']:.0f} B rows, {binary(g['table_bytes'])}"
            if g.get("footprint_bytes", 0) > g["table_bytes"]:
                label += f" tables, {binary(g['footprint_bytes'])} in turn"
            label += f" ({stage.name})"
            gather_roofs.setdefault(round(bw, -6), {"label": label, "bytes_per_s": bw})
    gvals = list(roofs.gather_points.values())
    profile.machine = {
        "host": machine.get("host"),
        "cpu_model": machine.get("cpu_model"),
        "measured_at": machine.get("measured_at"),
        "mode": machine.get("mode", "quick" if machine.get("quick") else "full"),
        "device": roofs.device,
        "threads": roofs.threads,
        "dtype": roofs.dtype,
        "peak_flops": roofs.peak_flops,
        "peak_label": roofs.peak_label,
        "compute_roofs": roofs.compute_roofs,
        "stream_bandwidth": roofs.stream_bw,
        "stream_label": roofs.stream_label,
        "gather_bandwidth_range": [min(gvals), max(gvals)],
        "gather_roofs": list(gather_roofs.values()),
        # only a native measurement (a Python-loop figure is shown by `recstack machine`, never used)
        "dram_latency_s": _ns_to_s(_num(machine["latency_ns"]["dram"].get("median")))
        if latency_trusted(machine)
        else None,
        "ridge_intensity": roofs.peak_flops / roofs.stream_bw if roofs.stream_bw > 0 else None,
        "thresholds": dict(THRESHOLDS),
        "notes": roofs.notes,
        # a machine file measured under contention (recstack machine's checks, or an older file's own load
        # record): named, its roofs are suspect
        "contended": is_contended(machine),
    }
