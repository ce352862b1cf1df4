"""Each what-if against the baseline: alternating rounds in one process, a 95 % interval, the noise rule.

Every arm (the baseline and each what-if) is built once in this process (its own model, batches and stage
discovery, as ``recstack profile`` does); then in each round every arm runs ``iters / rounds`` timed steps
in turn (the order reversed every other round), so a host's drift hits all arms alike. Times are per sample
(step time / batch size), so batch-size levers compare like with like.

Judgement is :func:`recstack.report.diff.judge`, the rule ``recstack diff`` uses for run and stage times,
with each arm's 95 % bootstrap interval of its median (:func:`recstack.noise.bootstrap_ci`) in
place of the p10-p90 spread: a what-if is an improvement when the two intervals do not overlap and the
medians differ by more than ``NoiseRule.min_change_pct`` (2 %). The speedup's interval is the 95 % percentile
bootstrap interval of the ratio of the two medians (the arms resampled independently).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from recstack.config.run import RunConfig
from recstack.noise import NoiseRule, bootstrap_ci, judge
from recstack.profiling.stats import median
from recstack.profiling.timing import CALLER, split_caller_key

NOISE_RULE = NoiseRule()


@dataclass
class Arm:
    label: str
    cfg: RunConfig
    options: dict[str, Any] = field(default_factory=dict)  # factory keyword options
    setup: Any = None
    build_s: float = 0.0
    step_samples: list[float] = field(default_factory=list)  # seconds per sample, per timed step
    stage_samples: dict[str, list[float]] = field(default_factory=dict)
    outputs: dict[str, torch.Tensor] | None = None
    loss: float | None = None  # training: the loss after loss_steps steps (recstack.advisor.loss)
    loss_steps: int = 0

    @property
    def batch_size(self) -> int:
        return self.cfg.batch_size

    @property
    def resident_bytes(self) -> int | None:
        """Resident bytes of the model: parameters, buffers and FBGEMM's tables, each storage once
        (:func:`recstack.memory.measure.resident`); optimizer state is not counted."""
        from recstack.memory.measure import resident

        if self.setup is None:
            return None
        params, buffers, _ = resident(self.setup.loaded.model, None)
        return params + buffers


def _loader(options: dict[str, Any]) -> Any:
    """A compile-analysis loader (:func:`recstack.compilation.model.load`), with a factory's options bound."""
    from recstack.compilation.model import Loaded, load
    from recstack.usercode import call_factory, load_factory, make_batches

    if not options:
        return load

    def load_with(cfg: RunConfig) -> Loaded:
        name = cfg.model or ""
        factory = functools.partial(load_factory(name), **options)
        model, batch_fn = call_factory(factory, name, cfg.batch_size, cfg.seed)
        return Loaded(name, model, lambda bs, n: make_batches(batch_fn, bs, n), None)

    return load_with


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def build(arm: Arm, capture: bool) -> Arm:
    """Build the arm's model and batches, warm up and discover its stages; ``capture``: keep its outputs on the
    first batch (before any timed step: in training those move the weights)."""
    from recstack.compilation import numerics
    from recstack.compilation.session import prepare

    t0 = time.perf_counter()
    with threads(arm.cfg.threads):
        arm.setup = prepare(arm.cfg, _loader(arm.options))
        if capture:
            got = numerics.capture(arm.setup.step, arm.setup.batches[:1])
            arm.outputs = {k: v for k, v in got.items() if ".out" in k}
            from recstack.advisor.loss import record_loss

            record_loss(arm)
    arm.build_s = time.perf_counter() - t0
    return arm


def _time_once(arm: Arm, steps: int, keep: bool = True) -> None:
    from recstack.profiling.passes import timing_pass
    from recstack.profiling.timing import cuda_sync

    s = arm.setup
    with threads(arm.cfg.threads):
        res = timing_pass(s.loaded.model, s.step, s.batches, s.found.roots, steps, cuda_sync())
    if not keep:
        return
    bs = arm.batch_size
    arm.step_samples += [t / bs for t in res.plain]
    n = len(res.plain)
    merged: dict[str, list[float]] = {}
    for k, xs in res.stage_samples.items():
        key = CALLER if split_caller_key(k) else k
        cur = merged.setdefault(key, [0.0] * n)
        for i, x in enumerate(xs[:n]):
            cur[i] += x / bs
    for k, xs in merged.items():
        arm.stage_samples.setdefault(k, []).extend(xs)


def rounds(arms: list[Arm], iters: int, count: int, deadline: float | None = None) -> int:
    """Time ``arms`` in ``count`` alternating rounds of ``iters / count`` steps each (order reversed every
    other round), after one untimed step each; stops early (after at least two rounds) past ``deadline`` (``time.perf_counter``).
    Returns the rounds run."""
    per = max(2, iters // max(count, 1))
    for arm in arms:  # one untimed step each first: caches and pools warm again after the other arms' builds
        _time_once(arm, 1, keep=False)
    done = 0
    for r in range(count):
        for arm in (arms if r % 2 == 0 else list(reversed(arms))):
            _time_once(arm, per)
        done += 1
        if deadline is not None and done >= 2 and time.perf_counter() > deadline:
            break
    return done


def ratio_ci(base: list[float], what: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of median(base) / median(what), the arms resampled independently."""
    a, b = np.asarray(base, dtype=float), np.asarray(what, dtype=float)
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, (n, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (n, b.size))], axis=1)
    if np.any(mb <= 0):
        return None
    lo, hi = np.percentile(ma / mb, [2.5, 97.5])
    return float(lo), float(hi)


def compare(base: list[float], what: list[float]) -> dict[str, Any]:
    """Speedup of ``what`` over ``base`` (per-sample times), its 95 % interval and the noise rule's verdict."""
    if not base or not what:
        return {"speedup": None, "interval": None, "verdict": "unmeasured", "basis": "no samples"}
    mb, mw = median(base), median(what)
    verdict, _ = judge(mb, mw, bootstrap_ci(base), bootstrap_ci(what), mb, NOISE_RULE)
    ci = ratio_ci(base, what)
    return {"speedup": mb / mw if mw > 0 else None, "interval": list(ci) if ci else None, "verdict": verdict,
            "base_s": mb, "what_if_s": mw,
            "basis": "verdict: 95% bootstrap intervals of the two medians; interval: bootstrap of their ratio"}


def stage_compare(base: Arm, what: Arm, stage: str) -> dict[str, Any]:
    return compare(base.stage_samples.get(stage, []), what.stage_samples.get(stage, []))


def deviation(base: Arm, what: Arm) -> dict[str, Any] | None:
    """Output deviation of ``what`` against the baseline on the same first batch (max abs and relative,
    :func:`recstack.compilation.numerics.compare`); None when either has no outputs or the batch differs."""
    from recstack.compilation import numerics

    if base.outputs is None or what.outputs is None or base.batch_size != what.batch_size:
        return None
    got = numerics.compare(base.outputs, what.outputs)
    return {"max_abs": got["max_abs_err"], "max_rel": got["max_rel_err"], "compared": got["compared"]}


__all__ = ["NOISE_RULE", "Arm", "build", "compare", "deviation", "rounds", "stage_compare", "threads"]
