"""bf16 against fp32, per stage: the measured time ratio and which oneDNN kernels ran.

In a bf16 run (a zoo model whose dense layers were converted with
``set_dense_dtype``), :func:`add_bf16_findings` times the forward pass of
every stage again in both dtypes, outside the profile's timed passes:

* blocks of ``steps`` forward steps, bf16 / fp32 / bf16 (the model's dense
  layers converted between blocks, one untimed step after each conversion);
  a stage's time per step is its best step in that dtype (bf16 pooled over
  both of its blocks, so a slow drift of the host affects both dtypes
  alike; the best, because interference and the occasional kernel
  compilation only ever lengthen a step);
* stage time = wall time inside the stage root modules' forward calls
  (forward hooks); forward only, in eval mode with gradients off, also for a
  training run (no optimizer state or running statistic is touched;
  bf16 -> fp32 -> bf16 is exact, so the model ends as it began);
* one more bf16 forward with oneDNN's verbose output on
  (:mod:`recstack.hardware.onednn`), the lines attributed to the stage whose
  forward was running (markers written through the same C ``stdout``), as
  evidence of the kernels (AMX, AVX512-BF16 or neither).

Each stage that runs in bf16 (:func:`stages_in_bf16`) gets a finding in ``profile.findings``:
``{"kind": "bf16_speedup", "stage", "text", "value"}`` with ``value`` =
bf16 time / fp32 time (below 1: bf16 is faster), and
``bf16 = {"bf16_s", "fp32_s", "ratio", "kernels", "amx", "avx512_bf16"}``
on the stage node.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from recstack.tree import Profile

FINDING = "bf16_speedup"
STEPS = 5  # timed forward steps per block
MARK = "recstack_stage"


@contextlib.contextmanager
def _stage_clock(model: nn.Module, roots: dict[str, str], acc: dict[str, int], clock: Callable[[], int]) -> Iterator[None]:
    """Add each stage root's forward wall time (ns) to ``acc[stage]`` while the context is open."""
    mods = dict(model.named_modules())
    starts: dict[int, list[int]] = {}
    handles = []
    for path, stage in roots.items():
        mod = mods.get(path)
        if mod is None:
            continue

        def pre(m: nn.Module, _a: Any) -> None:
            starts.setdefault(id(m), []).append(clock())

        def post(m: nn.Module, _a: Any, _o: Any, _s: str = stage) -> None:
            acc[_s] = acc.get(_s, 0) + clock() - starts[id(m)].pop()

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def time_stages(
    model: nn.Module,
    forward: Callable[[], Any],
    roots: dict[str, str],
    steps: int = STEPS,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> dict[str, list[float]]:
    """Seconds per step of every stage over ``steps`` forward steps (after one untimed step)."""
    with torch.no_grad():
        forward()
        out: dict[str, list[float]] = {}
        for _ in range(steps):
            acc: dict[str, int] = {}
            with _stage_clock(model, roots, acc, clock):
                forward()
            for s, ns in acc.items():
                out.setdefault(s, []).append(ns * 1e-9)
    return out


def stage_kernels(model: nn.Module, forward: Callable[[], Any], roots: dict[str, str]) -> dict[str, dict[str, Any]]:
    """oneDNN kernel evidence per stage from one forward step (empty without oneDNN lines)."""
    import ctypes

    from recstack.hardware import onednn

    if not torch.backends.mkldnn.is_available():  # no oneDNN lines to attribute; the markers would reach stdout
        return {}
    try:
        libc = ctypes.CDLL(None)
        puts = libc.puts
    except (OSError, AttributeError):
        return {}
    def mark(what: str, stage: str) -> None:  # a hook must return None (a value replaces the input/output)
        puts(f"{MARK},{what},{stage}".encode())

    mods = dict(model.named_modules())
    handles = []
    for path, stage in roots.items():
        if (mod := mods.get(path)) is not None:
            handles.append(mod.register_forward_pre_hook(lambda _m, _a, _s=stage: mark("enter", _s)))
            handles.append(mod.register_forward_hook(lambda _m, _a, _o, _s=stage: mark("exit", _s)))
    try:
        with torch.no_grad():
            text = onednn.capture(forward)
    finally:
        for h in handles:
            h.remove()
    per_stage: dict[str, list[str]] = {}
    stack: list[str] = []
    for line in text.splitlines():
        if line.startswith(MARK + ","):
            _m, what, stage = line.split(",", 2)
            if what == "enter":
                stack.append(stage)
            elif stack:
                stack.pop()
        elif stack:
            per_stage.setdefault(stack[-1], []).append(line)
    return {s: onednn.evidence("\n".join(lines)) for s, lines in per_stage.items()}


def bf16_findings(bf16_s: dict[str, float], fp32_s: dict[str, float]) -> list[dict[str, Any]]:
    """One ``bf16_speedup`` finding per stage timed in both dtypes."""
    out = []
    for stage in sorted(set(bf16_s) & set(fp32_s)):
        b, f = bf16_s[stage], fp32_s[stage]
        if b <= 0 or f <= 0:
            continue
        ratio = b / f
        verdict = f"{1 / ratio:.2f}x faster in bf16" if ratio < 1 else f"{ratio:.2f}x slower in bf16"
        out.append(
            {
                "kind": FINDING,
                "stage": stage,
                "text": f"{stage}: {b * 1e3:.3g} ms per step in bf16 vs {f * 1e3:.3g} ms in fp32 (forward): {verdict}",
                "value": ratio,
                "unit": "ratio",
            }
        )
    return out


def stages_in_bf16(profile: Profile, model: nn.Module, roots: dict[str, str]) -> set[str]:
    """Stages whose work runs in bf16: a root module holding bf16 parameters, or a stage whose ops the
    op pass saw mostly in bf16 (an interaction without parameters); embedding stages stay fp32."""
    from recstack.analysis.roofline import node_dtype

    mods = dict(model.named_modules())
    out = {
        stage
        for path, stage in roots.items()
        if (m := mods.get(path)) is not None and any(p.dtype == torch.bfloat16 for p in m.parameters())
    }
    out |= {st.name for st in profile.root.children if node_dtype(st) == "bf16"}
    return out


def add_bf16_findings(
    profile: Profile, model: nn.Module, forward: Callable[[], Any], steps: int = STEPS, kernels: bool = True
) -> None:
    """Measure bf16 vs fp32 per stage and record the findings (see the module docstring).

    Does nothing unless ``model`` is a zoo model running its dense layers in bf16."""
    if not hasattr(model, "set_dense_dtype") or getattr(model, "dense_dtype", None) != torch.bfloat16:
        return
    roots = {p: v["stage"] for p, v in (profile.run.get("stage_roots") or {}).items() if isinstance(v, dict)}
    if not roots:
        return
    bf16_stages = stages_in_bf16(profile, model, roots)
    was_training = model.training
    model.eval()  # no running statistics updated, no dropout drawn: the model ends as it began
    try:
        first = time_stages(model, forward, roots, steps)
        model.set_dense_dtype(torch.float32)
        try:
            fp32 = time_stages(model, forward, roots, steps)
        finally:
            model.set_dense_dtype(torch.bfloat16)
        second = time_stages(model, forward, roots, steps)
        evidence = stage_kernels(model, forward, roots) if kernels else {}
    finally:
        model.train(was_training)
    # best step per dtype: interference only lengthens a step (the roofs' statistic, too)
    bf16_s = {s: min(first.get(s, []) + second.get(s, [])) for s in set(first) | set(second)}
    fp32_s = {s: min(v) for s, v in fp32.items()}
    findings = [f for f in bf16_findings(bf16_s, fp32_s) if f["stage"] in bf16_stages]
    profile.findings = (profile.findings or []) + findings
    for f in findings:
        node = next((n for n in profile.root.children if n.name == f["stage"]), None)
        if node is None:
            continue
        ev = evidence.get(f["stage"], {})
        node.bf16 = {
            "bf16_s": bf16_s[f["stage"]],
            "fp32_s": fp32_s[f["stage"]],
            "ratio": f["value"],
            "kernels": ev.get("kernels", []),
            "amx": bool(ev.get("amx")),
            "avx512_bf16": bool(ev.get("avx512_bf16")),
        }
