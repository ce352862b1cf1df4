"""Compare two profiles node by node: time, FLOPs and bytes, each time change judged against noise.

Matching (``DiffResult.matched_level``):

* ``"op"``: both runs have the same module tree (the same set of module
  paths), so every node (run, stages, modules, ops, kernels) is matched by its
  ``path``; nodes in only one run are listed as ``added`` / ``removed``.
* ``"stage"``: the module trees differ (two backends, two models) or a run has
  no op pass, so only the run and its stages (matched by stage name) are
  compared. ``match_note`` says why.

Noise rule (:class:`recstack.noise.NoiseRule`, :func:`recstack.noise.judge`), for each matched pair of times (A = baseline, B = candidate):

* **Spread known** (run and stage nodes carry ``time_s_p10`` / ``time_s_p90``
  over the timed steps): the change is *real* when the two p10-p90 intervals do
  not overlap **and** the medians differ by more than ``min_change_pct``
  (default 2 %); otherwise it is noise.
* **Apportioned** (module and op times are their stage's measured time split
  in op-pass proportions, so they carry at least their stage's noise): each
  run's interval is the node's time scaled by its stage's relative spread
  (``time * stage_p10 / stage_median`` .. ``time * stage_p90 / stage_median``).
  The change is real when those intervals do not overlap **and** the relative
  change exceeds ``fixed_noise_pct`` (default 10 %, for the noise of the short op
  pass's proportions) **and** the absolute change is at least ``min_abs_share``
  (default 0.5 %) of run A's step time, so tiny ops cannot flag large percentages.
* **No spread at all** (a profile without p10/p90): real when the relative
  change exceeds ``fixed_noise_pct`` and the absolute change ``min_abs_share``
  of run A's step time.

Two different models (``run.model``) are refused (a DataError) unless
``allow_different_models``: their trees are unrelated, and a "99 % improvement"
between them would mean nothing. When the two profiles' figures were measured
under different schema versions (version 1 stored medians, version 2
interquartile means), ``DiffResult.notes`` says so.

A real slowdown is a ``regression``, a real speed-up an ``improvement``.
FLOPs and bytes come from formulas, not timers, so any difference in them is
reported as a change without a noise judgement. ``DiffResult.failures(pct)``
lists the run/stage regressions whose median slowed by more than ``pct``
percent: the CI gate of ``recstack diff --fail-on-regression``.

:func:`diff_profiles` is pure: it reads two Profiles and returns data;
renderers (:mod:`recstack.report.diff_render`) only format it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from recstack.errors import DataError
from recstack.noise import NoiseRule, judge
from recstack.report.diff_ranks import rank_comparison
from recstack.tree import Node, Profile

VERDICTS = ("regression", "improvement", "noise", "added", "removed")
LEVELS = ("op", "stage")


@dataclass
class NodeDelta:
    """One matched (or unmatched) node: A is the baseline, B the candidate; times in seconds per step."""

    path: str
    name: str
    level: str
    stage: str | None
    time_a: float | None
    time_b: float | None
    spread_a: tuple[float, float] | None = None
    spread_b: tuple[float, float] | None = None
    basis: str = "noise floor"
    verdict: str = "noise"
    flops_a: float | None = None
    flops_b: float | None = None
    bytes_a: float | None = None
    bytes_b: float | None = None

    @property
    def delta_s(self) -> float | None:
        if self.time_a is None or self.time_b is None:
            return None
        return self.time_b - self.time_a

    @property
    def rel(self) -> float | None:
        """Relative change of time, (B - A) / A; None when unmatched or A is zero."""
        d = self.delta_s
        if d is None or not self.time_a:
            return None
        return d / self.time_a

    @property
    def cost_changed(self) -> bool:
        return _changed(self.flops_a, self.flops_b) or _changed(self.bytes_a, self.bytes_b)

    @property
    def real(self) -> bool:
        return self.verdict in ("regression", "improvement")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(delta_s=self.delta_s, rel=self.rel, cost_changed=self.cost_changed)
        return d


@dataclass
class DiffResult:
    """The whole comparison. ``nodes`` holds levels below stage and is empty when ``matched_level == "stage"``."""

    label_a: str
    label_b: str
    run_a: dict[str, Any]
    run_b: dict[str, Any]
    matched_level: str
    match_note: str
    rule: NoiseRule
    run: NodeDelta
    stages: list[NodeDelta]
    nodes: list[NodeDelta] = field(default_factory=list)
    setting_changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ranks: dict[str, Any] | None = None  # recstack.report.diff_ranks.rank_comparison: multi-rank sides

    def all(self) -> list[NodeDelta]:
        return [self.run, *self.stages, *self.nodes]

    def regressions(self) -> list[NodeDelta]:
        return [d for d in self.all() if d.verdict == "regression"]

    def improvements(self) -> list[NodeDelta]:
        return [d for d in self.all() if d.verdict == "improvement"]

    def failures(self, pct: float) -> list[NodeDelta]:
        """The run or stages that regressed (beyond noise) by more than ``pct`` percent of their A time."""
        return [
            d
            for d in [self.run, *self.stages]
            if d.verdict == "regression" and d.rel is not None and d.rel * 100 > pct
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "label_a": self.label_a,
            "label_b": self.label_b,
            "run_a": self.run_a,
            "run_b": self.run_b,
            "matched_level": self.matched_level,
            "match_note": self.match_note,
            "rule": asdict(self.rule) | {"text": self.rule.describe()},
            "run": self.run.to_dict(),
            "stages": [d.to_dict() for d in self.stages],
            "nodes": [d.to_dict() for d in self.nodes],
            "setting_changes": [list(c) for c in self.setting_changes],
            "notes": list(self.notes),
            "ranks": self.ranks,
            "counts": {
                "regressions": len(self.regressions()),
                "improvements": len(self.improvements()),
                "cost_changes": sum(1 for d in self.all() if d.cost_changed),
            },
        }


def _changed(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return not math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)


def _spread(n: Node) -> tuple[float, float] | None:
    lo, hi = n.time_s_p10, n.time_s_p90
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return (float(min(lo, hi)), float(max(lo, hi)))
    return None


def _scaled(n: Node, stage: Node | None) -> tuple[float, float] | None:
    """``n``'s time with its stage's relative p10-p90 spread (for apportioned module/op times)."""
    sp = _spread(stage) if stage is not None else None
    if sp is None or not stage or stage.time_s <= 0:
        return None
    return (n.time_s * sp[0] / stage.time_s, n.time_s * sp[1] / stage.time_s)


def _pair(
    a: Node | None, b: Node | None, run_time_a: float, rule: NoiseRule,
    stage_a: Node | None = None, stage_b: Node | None = None,
) -> NodeDelta:
    """Match ``a`` with ``b``; with ``stage_a``/``stage_b`` given, times are apportioned within those stages."""
    ref = a or b
    assert ref is not None
    apportioned = stage_a is not None or stage_b is not None
    d = NodeDelta(
        path=ref.path,
        name=ref.name,
        level=ref.level,
        stage=ref.stage,
        time_a=a.time_s if a else None,
        time_b=b.time_s if b else None,
        spread_a=(_scaled(a, stage_a) if apportioned else _spread(a)) if a else None,
        spread_b=(_scaled(b, stage_b) if apportioned else _spread(b)) if b else None,
        flops_a=a.flops if a else None,
        flops_b=b.flops if b else None,
        bytes_a=a.bytes if a else None,
        bytes_b=b.bytes if b else None,
    )
    if a is None:
        d.verdict, d.basis = "added", "-"
    elif b is None:
        d.verdict, d.basis = "removed", "-"
    else:
        d.verdict, d.basis = judge(
            a.time_s, b.time_s, d.spread_a, d.spread_b, run_time_a, rule, apportioned=apportioned
        )
    return d


def _modules(p: Profile) -> set[str]:
    return {n.path for n in p.nodes() if n.level == "module"}


def choose_level(a: Profile, b: Profile) -> tuple[str, str]:
    """("op", note) when both module trees are the same set of paths, else ("stage", note saying why)."""
    ma, mb = _modules(a), _modules(b)
    if not ma or not mb:
        which = " and ".join(x for x, m in (("A", ma), ("B", mb)) if not m)
        return "stage", f"run {which} has no module tree (op pass not run): matched run and stages only"
    if ma == mb:
        return "op", f"same module tree ({len(ma)} modules): every node matched by path"
    return "stage", (
        f"module trees differ ({len(ma - mb)} modules only in A, {len(mb - ma)} only in B): "
        "matched run and stages only"
    )


def label_of(p: Profile) -> str:
    bits = [str(p.run.get("model") or p.root.name)]
    for key in ("backend", "mode", "dtype"):
        if p.run.get(key):
            bits.append(str(p.run[key]))
    bits.append(p.run_id)
    return " · ".join(bits)


def _settings(p: Profile) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for section, d in (("run", p.run), ("environment", p.environment)):
        for k, v in d.items():
            flat[f"{section}.{k}"] = v
    return flat


def setting_changes(a: Profile, b: Profile) -> list[tuple[str, Any, Any]]:
    """Run settings and environment facts that differ between the two runs, as (key, A, B)."""
    sa, sb = _settings(a), _settings(b)
    out = []
    for k in sorted(set(sa) | set(sb)):
        va, vb = sa.get(k), sb.get(k)
        if json.dumps(va, sort_keys=True, default=str) != json.dumps(vb, sort_keys=True, default=str):
            out.append((k, va, vb))
    return out


def model_of(p: Profile) -> str:
    return str(p.run.get("model") or p.root.name)


def version_notes(a: Profile, b: Profile) -> list[str]:
    """A note when the two profiles were written under different schema versions, saying whether
    their run and stage times are the same statistic."""
    va, vb = a.stats_version, b.stats_version
    if va == vb and a.time_statistic == b.time_statistic:
        return []
    text = f"A was written under profile schema version {va} and B under {vb}"
    if a.time_statistic != b.time_statistic:
        text += (
            f": A's run and stage times are {a.time_statistic}s, B's {b.time_statistic}s, "
            "so the two sides' times are different statistics"
        )
    else:
        text += f"; both sides' run and stage times are {a.time_statistic}s"
    return [text]


def contention_notes(a: Profile, b: Profile) -> list[str]:
    """A note per side whose run was contended: its times (and so the diff) are not the model's alone."""
    notes = []
    for side, prof in (("A", a), ("B", b)):
        rec = (prof.environment or {}).get("contention")
        if isinstance(rec, dict) and rec.get("detected"):
            why = (rec.get("evidence") or ["see its contention record"])[0]
            notes.append(f"{side} was contended while it ran ({why}); differences may come from the host, not the model")
    return notes


def rank_notes(a: Profile, b: Profile) -> list[str]:
    """A note per multi-rank side: its ranks, sharding, critical rank, imbalance and waiting (the trees
    compared are the critical paths)."""
    notes = []
    for side, prof in (("A", a), ("B", b)):
        dist = prof.distributed
        if not isinstance(dist, dict):
            continue
        imb = dist.get("imbalance") or {}
        step = (imb.get("totals") or {}).get("time_s")
        compute = (imb.get("totals") or {}).get("compute_s")
        notes.append(
            f"{side} ran {dist['world_size']} ranks ({dist['sharding']}); its tree here is the critical path "
            f"(rank {dist['critical_rank']}); compute imbalance max/mean {compute or 0:.3f}, step {step or 0:.3f}, "
            f"longest wait {1e3 * float(imb.get('max_wait_s') or 0):.3f} ms per step"
        )
    return notes


def diff_profiles(
    a: Profile,
    b: Profile,
    *,
    rule: NoiseRule | None = None,
    level: str | None = None,
    labels: tuple[str, str] | None = None,
    allow_different_models: bool = False,
) -> DiffResult:
    """Compare baseline ``a`` with candidate ``b`` (see the module docstring).

    ``level`` forces the matching level (``"op"`` or ``"stage"``); by default it is
    chosen by :func:`choose_level`. ``labels`` names the two runs in the output
    (default: model, backend, mode, dtype and run id). Two different models raise
    DataError unless ``allow_different_models``.
    """
    if model_of(a) != model_of(b) and not allow_different_models:
        raise DataError(
            f"A is model {model_of(a)!r} and B is model {model_of(b)!r}: their trees are unrelated, so the "
            "changes would mean nothing; pass --allow-different-models to compare them anyway"
        )
    rule = rule or NoiseRule()
    auto_level, note = choose_level(a, b)
    if level is None:
        level = auto_level
    elif level not in LEVELS:
        raise DataError(f"diff level must be one of {', '.join(LEVELS)} (got {level!r})")
    elif level != auto_level:
        note = f"level {level} requested ({note})"
    run_time_a = a.root.time_s
    run = _pair(a.root, b.root, run_time_a, rule)
    run.path = "run"
    stages_a = {c.name: c for c in a.root.children}
    stages_b = {c.name: c for c in b.root.children}
    order = list(stages_a) + [s for s in stages_b if s not in stages_a]
    stages = [_pair(stages_a.get(s), stages_b.get(s), run_time_a, rule) for s in order]
    nodes: list[NodeDelta] = []
    if level == "op":
        by_a = {n.path: (n, st) for st in a.root.children for c in st.children for n in c.walk()}
        by_b = {n.path: (n, st) for st in b.root.children for c in st.children for n in c.walk()}
        paths = list(by_a) + [p for p in by_b if p not in by_a]
        none = (None, None)
        for p in paths:
            (na, sa), (nb, sb) = by_a.get(p, none), by_b.get(p, none)
            nodes.append(_pair(na, nb, run_time_a, rule, sa or sb, sb or sa))
    la, lb = labels or (label_of(a), label_of(b))
    return DiffResult(
        label_a=la,
        label_b=lb,
        run_a=dict(a.run, run_id=a.run_id),
        run_b=dict(b.run, run_id=b.run_id),
        matched_level=level,
        match_note=note,
        rule=rule,
        run=run,
        stages=stages,
        nodes=nodes,
        setting_changes=setting_changes(a, b),
        notes=version_notes(a, b) + contention_notes(a, b) + rank_notes(a, b),
        ranks=rank_comparison(a, b),
    )
