"""Attach counted costs to a profile tree: FLOPs, bytes and intensity on every node that has them.

    summary = attach_costs(profile.root, counter.counts, steps=1)

Where costs land ("cost sites"). Walking each module's op nodes from the top:

* the first op node whose name the counter executed is a site: the counter
  saw that op run, and everything nested under it in the profile
  (``aten::copy_`` inside ``aten::_embedding_bag``, ``fbgemm::..._cpu``
  inside its ``pt2_wrapper``) is part of its work: those nodes stay null and
  get ``extra['cost_in_parent'] = True``;
* ops that run above the counter are walked through: CompositeImplicit ops
  (``aten::linear``, ``aten::gru``: decomposed by the counter or by
  autograd) and autograd-only custom ops (FBGEMM's
  ``split_embedding_codegen_lookup_*_function``), as are profiler ranges and
  autograd nodes (``evaluate_function`` wrappers, ``Optimizer.step``); such a
  node without children did no work (0), except a range, which is no op;
* a view or metadata op the counter did not see is free (0); any other op
  it did not see is a site that stays null with ``uncovered: true``.

So work is counted once, at the innermost op that does it as the dispatcher
sees it, and every other node (op, module, stage, run) holds the sum of its
children.

Matching counter entries to sites, most specific first (the first level that
pairs them wins; a level's cost is split over its sites by their ``calls``
share):

0. forward: same module path, same chain of decomposed ops, same op name;
   backward: same forward stage (the stage holding the module that created
   the autograd node: exact, from autograd sequence numbers), same autograd
   node, same chain, same op;
1. forward: same module and op; backward: same autograd node, chain and op in
   any backward stage;
2. backward: same op name anywhere in backward;
3. same op name anywhere (left-overs only; the node says ``cost_match: name``).

In-place and out-of-place names match each other (``aten::add_`` =
``aten::add``): under a dispatch mode composite kernels pick out-of-place
variants. Entries that match nothing are reported as ``unplaced``; sites the
counter never saw stay null with ``uncovered: true``.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recstack.costmodel import op_kernels
from recstack.costmodel.ops_memory import NO_DATA_OPS, VIEW_OPS
from recstack.costmodel.sums import BACKWARD, CostSum, OpCount
from recstack.tree import Node, Profile

if TYPE_CHECKING:
    from torch import nn

FREE_OPS = frozenset(VIEW_OPS) | frozenset(NO_DATA_OPS)

EVALUATE = "autograd::engine::evaluate_function: "
LEVELS = ("exact", "scope", "backward", "name")
NON_DEFAULT_OVERLOAD = re.compile(r"out|[Dd]imname|names")
OP_NAME = re.compile(r"[A-Za-z_]\w*::[\w.]+")  # a dispatcher op (not a profiler range or an autograd node)
ADDITIVE_EXTRAS = ("matmul_flops", "int_ops", "lookups", "unique_rows", "unique_bytes", "table_bytes")
COST_KEYS = ("bytes_read", "bytes_written", "cost_detail", "uncovered", "uncovered_reason", "cost_in_parent",
             "cost_match", "covered_time_share", "uncovered_calls_share", "provenance", "partial")


def normalize(name: str) -> str:
    """``aten::add_`` -> ``aten::add`` (in-place and out-of-place variants match)."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


@dataclass
class _Site:
    node: Node
    keys: tuple[Any, ...]
    acc: CostSum = field(default_factory=CostSum)
    level: int | None = None


@dataclass
class _Record:
    keys: tuple[Any, ...]
    cost: CostSum
    module: str
    op: str


def attach_costs(root: Node, counts: Mapping[tuple[str, str], OpCount], steps: int = 1,
                 regions: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Write ``flops``, ``bytes``, ``intensity`` (and cost ``extra`` keys) onto ``root``'s tree.

    ``regions``: module paths of compiled regions (``recstack profile --compile``). Their op nodes are
    not the eager ops the counter saw (fused kernels have no events; only extern kernels such as
    ``aten::addmm`` show), so a region's module node is one site holding the counted forward work of
    every module inside it (same computation, so the same FLOPs; bytes are the eager ops' traffic, an
    upper bound for fused code), and its ops stay null. Matching those records to the visible extern
    ops by name would pile every eager GEMM's FLOPs onto the few that show and read above the roof.
    A whole-model compile (region ``""``) has one such site, the run node, and no stage figures (its
    stages are hidden inside the one compiled region). Backward work that a compiled region created has
    no site: it stays unplaced (reported), never placed on ops by name.

    ``counts`` is :attr:`CostCounter.counts` for ``steps`` counted steps (its
    sums are divided by ``steps``: the tree holds per-step figures). Returns
    ``{"uncovered_ops": [{"name", "time_s", "calls", "reason"}], "uncovered_time_share",
    "covered_time_share", "unplaced": [{"module", "op", "calls", "flops", "bytes"}], "formula_errors",
    "flops", "bytes"}`` (per step; the shares are of the time spent in ops).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps})")
    executed = {normalize(n) for (_, n), c in counts.items() if c.calls > 0}
    decomposed = {normalize(n) for (_, n), c in counts.items() if c.decomposed_calls > 0}
    _reset(root)
    sites, leaf_noops = _find_sites(root, executed, decomposed, regions)
    records = _records(counts, _module_stages(root), steps, regions)
    unplaced = _match(sites, records)
    unplaced_rows = [
        {"module": r.module, "op": r.op, "calls": r.cost.calls / steps, "flops": r.cost.flops, "bytes": r.cost.bytes}
        for r in unplaced
    ]
    return _finish(root, sites, leaf_noops, unplaced_rows, sum(c.errors for c in counts.values()))


def _finish(root: Node, sites: list[_Site], leaf_noops: list[Node], unplaced: list[dict[str, Any]],
            errors: int) -> dict[str, Any]:
    """Write the sites' costs, sum them up the tree, mark coverage and provenance; the ``cost_model`` summary."""
    _write_sites(sites, leaf_noops)
    _sum_up(root)
    site_ids = {id(s.node) for s in sites} | {id(n) for n in leaf_noops}
    uncovered, op_time, uncovered_time = _coverage(root, site_ids)
    _provenance(root)
    return {
        "uncovered_ops": uncovered,
        "uncovered_time_share": (uncovered_time / op_time) if op_time > 0 else 0.0,
        "covered_time_share": root.covered_time_share,
        "unplaced": unplaced,
        "formula_errors": errors,
        "flops": root.flops,
        "bytes": root.bytes,
    }


def attach_model_costs(profile: Profile, model: nn.Module, run_step: Callable[[], Any]) -> dict[str, Any]:
    """Count one ``run_step()`` of ``model`` under :class:`CostCounter`, attach the costs to ``profile``'s
    tree (:func:`attach_costs`) and store the summary as ``profile.cost_model``; return it.

    This runs the model, so it is a collecting step (the runner calls it, outside the timed passes);
    the analyses of :mod:`recstack.analysis.pipeline` read what it wrote."""
    from recstack.costmodel.counter import CostCounter

    with CostCounter(model) as counter:
        run_step()
    compiled = ((profile.run or {}).get("compile") or {}).get("compile") or {}
    regions = frozenset(r["module_path"] for r in compiled.get("regions") or [])
    summary = attach_costs(profile.root, counter.counts, steps=1, regions=regions)
    profile.cost_model = summary
    return summary


# --- walking the tree ------------------------------------------------------------------------


def _op_children(n: Node) -> list[Node]:
    return [c for c in n.children if c.level == "op"]


def _reset(root: Node) -> None:
    for n in root.walk():
        if n.level == "kernel":
            continue
        n.flops = n.bytes = n.intensity = None
        n.drop(*COST_KEYS)


def _module_stages(root: Node) -> dict[str, str]:
    """Module path -> forward stage holding it (for placing backward work)."""
    out: dict[str, str] = {}
    for stage in root.children:
        if stage.level != "stage" or stage.name == "backward":
            continue
        for n in stage.walk():
            if n.level == "module":
                out.setdefault(n.name, stage.name)
    return out


def _find_sites(root: Node, executed: set[str], decomposed: set[str],
                regions: frozenset[str] = frozenset()) -> tuple[list[_Site], list[Node]]:
    sites: list[_Site] = []
    noops: list[Node] = []
    if "" in regions:  # a whole-model compile: the run is the one site of all counted forward work
        sites.append(_Site(root, (("region", ""), None, None, None)))
        _mark_inside(root.children)
        return sites, noops
    if regions:
        for n in root.walk():
            if n.level == "module" and n.name in regions:  # the region's counted work lands here
                sites.append(_Site(n, (("region", n.name), None, None, None)))
                _mark_inside(n.children)
    for stage in root.children:
        if stage.level != "stage":
            continue
        if stage.name == "backward":
            for sub in stage.children:
                if sub.level == "stage":
                    for c in sub.children:
                        _visit(c, ("b", sub.name, None), (), executed, decomposed, sites, noops)
                else:
                    _visit(sub, ("b", None, None), (), executed, decomposed, sites, noops)
        else:
            for c in stage.children:
                _visit(c, ("f", ""), (), executed, decomposed, sites, noops)
    return sites, noops


def _visit(n: Node, scope: tuple[Any, ...], chain: tuple[str, ...], executed: set[str], decomposed: set[str],
           sites: list[_Site], noops: list[Node]) -> None:
    if n.level == "module":
        if any(s.node is n for s in sites):  # a compiled region (a site of its own)
            return
        for c in n.children:
            _visit(c, ("f", n.name), (), executed, decomposed, sites, noops)
        return
    if n.level != "op":
        return
    if scope[0] == "b" and n.name.startswith(EVALUATE):
        scope = ("b", scope[1], n.name[len(EVALUATE) :])
    norm = normalize(n.name)
    kids = _op_children(n)
    is_op = OP_NAME.fullmatch(n.name) is not None
    if norm in executed:
        sites.append(_Site(n, _site_keys(scope, chain, norm)))
        _mark_inside(kids)
    elif norm in decomposed or (is_op and not _kernels(n.name)[0] and (kids or _kernels(n.name)[1])):
        # decomposed by the counter (it is in the chain), or run above the mode (it is not)
        inner_chain = (*chain, norm) if norm in decomposed else chain
        if not kids:
            noops.append(n)  # dispatched nothing (aten::to to its own dtype): no work
        for c in kids:
            _visit(c, scope, inner_chain, executed, decomposed, sites, noops)
    elif not is_op:  # a profiler range or an autograd node: walk through; empty, it is no op at all
        for c in kids:
            _visit(c, scope, chain, executed, decomposed, sites, noops)
    elif n.name in FREE_OPS:
        noops.append(n)  # a view or metadata op: free whatever its arguments
        _mark_inside(kids)
    else:
        sites.append(_Site(n, _site_keys(scope, chain, norm)))  # an op the counter never saw
        _mark_inside(kids)


def _mark_inside(kids: list[Node]) -> None:
    for inner in kids:
        for x in inner.walk():
            if x.level == "op":
                x.cost_in_parent = True


@functools.lru_cache(maxsize=512)
def _kernels(name: str) -> tuple[bool, bool]:
    """(has a kernel of its own, is CompositeImplicit in every overload) for dispatcher op ``name``.

    Looks at the overloads a model calls (not ``out=`` or named-dimension
    ones). An op without a kernel of its own (CompositeImplicit, or an
    autograd-only custom op such as FBGEMM's ``split_embedding_codegen_lookup_*_function``)
    runs above the counter: its work is done by the ops it calls. Torch's dispatcher answers when torch
    is loaded (it knows the extensions loaded, FBGEMM's ops too); else the table generated from it
    (:mod:`recstack.costmodel.op_kernels`: torch's own ops), so that pricing a trace needs no torch.
    """
    if "torch" in sys.modules:
        return kernels_from_torch(name)
    return name not in op_kernels.NO_OWN_KERNEL, name in op_kernels.COMPOSITE_IMPLICIT


def kernels_from_torch(name: str) -> tuple[bool, bool]:
    """:func:`_kernels` as torch's dispatcher answers it (imports torch)."""
    import torch

    try:
        schemas = torch._C._jit_get_schemas_for_operator(name)
    except Exception:
        return True, False
    own, cia = [], []
    for sch in schemas:
        if NON_DEFAULT_OVERLOAD.search(sch.overload_name):
            continue
        full = f"{name}.{sch.overload_name}" if sch.overload_name else name
        try:
            has = functools.partial(torch._C._dispatch_has_kernel_for_dispatch_key, full)
            # (not CUDA: FBGEMM registers its autograd-only lookup functions there as kernels)
            own.append(any(has(k) for k in ("CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")))
            cia.append(has("CompositeImplicitAutograd"))
        except RuntimeError:
            continue  # a TorchScript-only overload
    if not own:
        return True, False
    return any(own), all(c and not o for c, o in zip(cia, own, strict=True))


def _site_keys(scope: tuple[Any, ...], chain: tuple[str, ...], norm: str) -> tuple[Any, ...]:
    if scope[0] == "f":
        return (("f", scope[1], chain, norm), ("f", scope[1], norm), None, ("any", norm))
    _, stage, node = scope
    return (("b", stage, node, chain, norm), ("b", node, chain, norm), ("b", norm), ("any", norm))


# --- counter entries -------------------------------------------------------------------------------


def _region_of(path: str | None, regions: frozenset[str]) -> str | None:
    if path is None or not regions:  # path "": ops of the root module's own forward
        return None
    return next((r for r in regions if r == "" or path == r or path.startswith(r + ".")), None)


def _records(counts: Mapping[tuple[str, str], OpCount], stages: dict[str, str], steps: int,
             regions: frozenset[str] = frozenset()) -> list[_Record]:
    out: list[_Record] = []
    for (path, name), c in counts.items():
        if c.calls == 0:
            continue
        norm = normalize(name)
        for ctx, cs in c.contexts.items():
            chain = tuple(normalize(x) for x in ctx.chain)
            region = _region_of(ctx.origin if path == BACKWARD else path, regions)
            if region is not None:  # compiled: only the region's own site (forward), else unplaced
                keys: tuple[Any, ...] = ((("region", region) if path != BACKWARD else None), None, None, None)
            elif path == BACKWARD:
                stage = stages.get(ctx.origin) if ctx.origin else None
                keys = (
                    ("b", stage, ctx.node, chain, norm) if stage else None,
                    ("b", ctx.node, chain, norm),
                    ("b", norm),
                    ("any", norm),
                )
            else:
                keys = (("f", path, chain, norm), ("f", path, norm), None, ("any", norm))
            out.append(_Record(keys, _scaled(cs, 1.0 / steps), path, name))
    return out


def _scaled(cs: CostSum, f: float) -> CostSum:
    return CostSum(
        calls=cs.calls,
        covered_calls=cs.covered_calls,
        flops=cs.flops * f,
        bytes_read=cs.bytes_read * f,
        bytes_written=cs.bytes_written * f,
        extra={k: v * f for k, v in cs.extra.items()},
    )


def _match(sites: list[_Site], records: list[_Record]) -> list[_Record]:
    """Pair records with sites level by level; returns the records that matched nothing."""
    left = list(records)
    for level in range(len(LEVELS)):
        groups: dict[Any, list[_Record]] = {}
        rest: list[_Record] = []
        for r in left:
            k = r.keys[level]
            (groups.setdefault(k, []) if k is not None else rest).append(r)
        if not groups:
            continue
        free: dict[Any, list[_Site]] = {}
        every: dict[Any, list[_Site]] = {}
        for s in sites:
            k = s.keys[level]
            if k is None:
                continue
            every.setdefault(k, []).append(s)
            if s.level is None:
                free.setdefault(k, []).append(s)
        for k, recs in groups.items():
            targets = free.get(k) or every.get(k)
            if not targets:
                rest.extend(recs)
                continue
            total = CostSum()
            for r in recs:
                total.merge(r.cost)
            _distribute(total, targets, level)
        left = rest
    # zero-cost entries without a site (profiler::_record_function_* under a range node) lose nothing
    return [r for r in left if r.cost.flops or r.cost.bytes or r.cost.covered_calls < r.cost.calls]


def _distribute(total: CostSum, targets: list[_Site], level: int) -> None:
    weights = [float(s.node.calls) for s in targets]
    if sum(weights) <= 0:
        weights = [max(0.0, s.node.time_s) for s in targets]
    if sum(weights) <= 0:
        weights = [1.0] * len(targets)
    norm = sum(weights)
    for s, w in zip(targets, weights, strict=True):
        part = _scaled(total, w / norm)
        part.calls = total.calls
        part.covered_calls = total.covered_calls
        if s.acc.calls:
            merged = CostSum(s.acc.calls, s.acc.covered_calls, s.acc.flops, s.acc.bytes_read, s.acc.bytes_written,
                             dict(s.acc.extra))
            merged.merge(part)
            s.acc = merged
        else:
            s.acc = part
        s.level = level if s.level is None else min(s.level, level)


# --- writing ------------------------------------------------------------------------------------------


def _set_cost(n: Node, flops: float, read: float, written: float, detail: dict[str, float]) -> None:
    n.flops = float(flops)
    n.bytes = float(read + written)
    n.intensity = (n.flops / n.bytes) if n.bytes > 0 else None
    n.bytes_read = float(read)
    n.bytes_written = float(written)
    if detail:
        n.cost_detail = detail


def _write_sites(sites: list[_Site], noops: list[Node]) -> None:
    for s in sites:
        n, acc = s.node, s.acc
        del n.cost_in_parent
        if acc.calls == 0 and (n.name in FREE_OPS or _kernels(n.name)[1]):
            _set_cost(n, 0.0, 0.0, 0.0, {})  # free whatever its arguments: no need to have seen it
            continue
        if acc.calls == 0:
            n.uncovered = True
            n.uncovered_reason = "not seen by the cost counter"
            continue
        if acc.covered_calls == 0:
            n.uncovered = True
            n.uncovered_reason = "no formula"
            continue
        detail = {k: v for k, v in acc.extra.items() if k in ADDITIVE_EXTRAS or k == "approximate"}
        _set_cost(n, acc.flops, acc.bytes_read, acc.bytes_written, detail)
        if acc.covered_calls < acc.calls:
            n.uncovered_calls_share = 1.0 - acc.covered_calls / acc.calls
        if s.level is not None:
            n.cost_match = LEVELS[s.level]
    for n in noops:  # dispatched nothing (aten::to to its own dtype), or a view/metadata op: no work
        _set_cost(n, 0.0, 0.0, 0.0, {})


def _sum_up(n: Node) -> tuple[bool, bool]:
    """Post-order sums; returns (subtree has priced work, subtree has unknown work).

    A node that is not a site holds the sum of its children that have
    figures, except when all it knows is free ops (views, no-ops) beside
    unknown ones: then it stays null, as 0 would claim the unknown work is
    free. A sum over a subtree with unknown parts says ``partial``.
    """
    if n.uncovered:
        return False, True
    if n.cost_in_parent:
        return False, False
    if n.flops is not None:  # a site
        priced = bool(n.flops or n.bytes)
        return priced, bool(n.uncovered_calls_share)
    priced = unknown = False
    for c in n.children:
        if c.level != "kernel":
            p, u = _sum_up(c)
            priced, unknown = priced or p, unknown or u
    kids = [c for c in n.children if c.level != "kernel" and c.flops is not None]
    if not kids or (unknown and not priced):
        return priced, unknown
    detail: dict[str, float] = {}
    for c in kids:
        for k, v in (c.cost_detail or {}).items():
            if k in ADDITIVE_EXTRAS:
                detail[k] = detail.get(k, 0.0) + v
    _set_cost(
        n,
        sum(c.flops or 0.0 for c in kids),
        sum(c.bytes_read or 0.0 for c in kids),
        sum(c.bytes_written or 0.0 for c in kids),
        detail,
    )
    if unknown:
        n.partial = True
    return priced, unknown


def _iter_sites(n: Node, site_ids: set[int]) -> Iterator[Node]:
    """The cost sites under ``n`` (they never nest)."""
    for c in n.children:
        if id(c) in site_ids:
            yield c
        elif c.level != "kernel":
            yield from _iter_sites(c, site_ids)


def _uncovered_share(n: Node) -> float:
    return 1.0 if n.uncovered else float(n.uncovered_calls_share or 0.0)


def _coverage(root: Node, site_ids: set[int]) -> tuple[list[dict[str, Any]], float, float]:
    by_name: dict[tuple[str, str], dict[str, Any]] = {}
    for n in _iter_sites(root, site_ids):
        share = _uncovered_share(n)
        if share <= 0:
            continue
        reason = str(n.uncovered_reason or "no formula for some calls")
        e = by_name.setdefault((n.name, reason), {"name": n.name, "time_s": 0.0, "calls": 0, "reason": reason})
        e["time_s"] += n.time_s * share
        e["calls"] += n.calls
    for n in root.walk():
        if n.level in ("run", "stage"):
            op_t, unc_t = _op_times(n, site_ids)
            n.covered_time_share = (1.0 - unc_t / op_t) if op_t > 0 else None
    op_time, uncovered_time = _op_times(root, site_ids)
    return sorted(by_name.values(), key=lambda e: -e["time_s"]), op_time, uncovered_time


def _op_times(n: Node, site_ids: set[int]) -> tuple[float, float]:
    total = unc = 0.0
    for s in _iter_sites(n, site_ids):
        total += s.time_s
        unc += s.time_s * _uncovered_share(s)
    return total, unc


def _provenance(root: Node) -> None:
    for n in root.walk():
        if n.level == "kernel":
            continue
        if n.level == "run" or (n.level == "stage" and n.path == n.name and n.name != "other"):
            time_p = "measured"
        else:
            time_p = "derived"  # apportioned: measured stage time x op-pass proportion (or a difference)
        has = n.flops is not None
        n.provenance = {
            "time_s": time_p,
            "flops": "formula" if has else None,
            "bytes": "formula" if has else None,
            "intensity": "derived" if n.intensity is not None else None,
        }


def attach_priced_costs(root: Node, priced: Callable[[Node], CostSum | None]) -> dict[str, Any]:
    """Write costs onto a tree whose ops were priced one by one (an imported trace's recorded shapes).

    ``priced(node)``: the per-step CostSum of an op node (``calls``: its calls per step; ``covered_calls``:
    those a formula priced), or None when nothing is known of its arguments. The sites are chosen as for a
    counted run (the outermost op that has a formula; the ops inside it are ``cost_in_parent``), the sums,
    coverage and provenance are the same; ``unplaced`` is empty (nothing was counted apart from the tree).
    Returns the ``cost_model`` summary.
    """
    from recstack.costmodel.formulas import has_formula

    _reset(root)
    executed = {normalize(n.name) for n in root.walk() if n.level == "op" and has_formula(n.name)}
    sites, leaf_noops = _find_sites(root, executed, set())
    errors = 0
    for s in sites:
        acc = priced(s.node)
        if acc is not None:
            s.acc = acc
            errors += int(acc.extra.pop("formula_errors", 0))
        elif s.node.calls:
            s.acc = CostSum(calls=s.node.calls)  # seen, never priced: no formula or no shapes
    return _finish(root, sites, leaf_noops, [], errors)
