"""Numerical agreement of compiled against eager on identical inputs and weights.

Per compared tensor (outputs; in train mode also the loss and every parameter gradient):
``max_abs_err = max |c - e|`` and ``max_rel_err = max |c - e| / max(max |e|, 1e-12)`` (normwise, so that
values near zero do not blow it up). ``ok`` when every element satisfies ``|c - e| <= atol + rtol * |e|``
(torch.allclose's rule) with the tolerance of the compute dtype (:data:`TOLERANCE`).
"""

from __future__ import annotations

from typing import Any

import torch

TOLERANCE = {"fp32": (1e-4, 1e-3), "bf16": (1e-2, 2e-2)}  # (atol, rtol)


def _flatten(out: Any, prefix: str = "out") -> dict[str, torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return {prefix: out}
    items: list[tuple[Any, Any]] = []
    if isinstance(out, (list, tuple)):
        items = list(enumerate(out))
    elif isinstance(out, dict):
        items = list(out.items())
    elif hasattr(out, "values") and callable(out.values) and hasattr(out, "keys"):
        items = list(zip(out.keys(), out.values(), strict=False))
    flat: dict[str, torch.Tensor] = {}
    for k, v in items:
        flat.update(_flatten(v, f"{prefix}.{k}"))
    return flat


def capture(step: Any, batches: list[Any]) -> dict[str, torch.Tensor]:
    """Outputs (and in train mode loss and gradients, without an optimizer step) of ``step`` on ``batches``."""
    from recstack.profiling.runner import call_model

    got: dict[str, torch.Tensor] = {}
    model = step.model
    for i, b in enumerate(batches):
        if not step.train:
            # The grad mode of the step itself: another one would be a different graph (a guard on dispatch keys).
            with torch.inference_mode() if step.grad_mode == "inference_mode" else torch.no_grad():
                got.update(_flatten(call_model(model, b), f"b{i}.out"))
            continue
        if step.fused:  # a fused optimizer updates tables in backward: forwards only (grad mode on, as in training)
            got.update(_flatten(call_model(model, b), f"b{i}.out"))
            continue
        model.zero_grad(set_to_none=True)
        out = call_model(model, b)
        loss = step._loss(out, b)
        loss.backward()
        got.update(_flatten(out, f"b{i}.out"))
        got[f"b{i}.loss"] = loss
        for n, p in model.named_parameters():
            if p.grad is not None:
                g = p.grad.to_dense() if p.grad.is_sparse else p.grad
                got[f"b{i}.grad.{n}"] = g
        model.zero_grad(set_to_none=True)
    return {k: v.detach().float().clone() for k, v in got.items()}


def compare(eager: dict[str, torch.Tensor], compiled: dict[str, torch.Tensor], dtype: str = "fp32") -> dict[str, Any]:
    atol, rtol = TOLERANCE.get(dtype, TOLERANCE["fp32"])
    max_abs = max_rel = 0.0
    worst, ok, missing = None, True, sorted(set(eager) ^ set(compiled))
    for k, e in eager.items():
        c = compiled.get(k)
        if c is None or c.shape != e.shape:
            ok = False
            continue
        diff = (c - e).abs()
        a = float(diff.max()) if diff.numel() else 0.0
        r = a / max(float(e.abs().max()) if e.numel() else 0.0, 1e-12)
        if not bool(torch.all(diff <= atol + rtol * e.abs())):
            ok = False
        if a > max_abs:
            worst = k
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
    return {"max_abs_err": max_abs, "max_rel_err": max_rel, "ok": ok and not missing, "worst": worst,
            "compared": len(eager), "mismatched_keys": missing, "atol": atol, "rtol": rtol,
            "provenance": "computed: |c-e| <= atol + rtol*|e| elementwise; rel = max|c-e| / max|e|"}


__all__ = ["TOLERANCE", "capture", "compare"]
