"""Training what-ifs: the loss after N steps, baseline and lever, on the same seeds and batches (a cost).

A lever that changes the arithmetic (bf16, another backend or its fused optimizer, a factory option) may give
the same outputs on one batch yet train differently. So in ``--mode train`` every arm whose outputs are
compared also runs :data:`LOSS_STEPS` further training steps right after its build, from the same seed
(``torch.manual_seed(cfg.seed)``) over the same batches (its own, built from the same seed), and records the
last step's loss. The relative deviation of the lever's loss from the baseline's is a cost like the output
deviation: above ``--tolerance`` the lever is never recommended (docs/advise.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch

LOSS_STEPS = 20


def record_loss(arm: Any, steps: int = LOSS_STEPS) -> None:
    """In training, run ``steps`` training steps of the built ``arm`` and keep the last loss as ``arm.loss``."""
    from recstack.profiling.loss import TrainLoss

    step = arm.setup.step
    if not step.train or steps <= 0 or step.loss is None:
        return
    seen: list[torch.Tensor] = []
    chosen = step.loss

    def keep(out: Any, batch: Any) -> torch.Tensor:
        seen.append(loss := chosen(out, batch))
        return loss

    step.loss = TrainLoss(keep, chosen.info)  # the step's own loss, its value kept
    torch.manual_seed(arm.cfg.seed)
    try:
        for i in range(steps):
            step.run(arm.setup.batches[i % len(arm.setup.batches)])
    finally:
        step.loss = chosen
    arm.loss = float(seen[-1].detach().float())
    arm.loss_steps = steps


def loss_cost(base: Any, arm: Any) -> dict[str, Any] | None:
    """``{steps, base, what_if, rel_dev}``: both arms' loss after the same steps; None outside training or when
    the batches differ (a batch-size lever trains on other data)."""
    if base.loss is None or arm.loss is None or base.batch_size != arm.batch_size or not math.isfinite(base.loss):
        return None
    if not math.isfinite(arm.loss):  # diverged: no deviation to state, never advised
        return {"steps": arm.loss_steps, "base": base.loss, "what_if": None, "rel_dev": None}
    rel = abs(arm.loss - base.loss) / max(abs(base.loss), 1e-12)
    return {"steps": arm.loss_steps, "base": base.loss, "what_if": arm.loss, "rel_dev": rel}


def loss_within(loss: dict[str, Any] | None, tolerance: float) -> bool | None:
    return None if loss is None else (loss["rel_dev"] is not None and loss["rel_dev"] <= tolerance)


def loss_gate(verdict: tuple[bool, str], loss: dict[str, Any] | None, tolerance: float) -> tuple[bool, str]:
    """The recommendation after the loss check: a lever whose loss deviates beyond ``tolerance`` is not advised."""
    recommended, reason = verdict
    if loss_within(loss, tolerance) is not False or not recommended:
        return recommended, reason
    if loss["rel_dev"] is None:
        return False, f"faster, but its training loss after {loss['steps']} steps is not finite"
    return False, (f"faster, but its training loss after {loss['steps']} steps deviates {loss['rel_dev']:.2g} "
                   f"(relative) > tolerance {tolerance:g}")


__all__ = ["LOSS_STEPS", "loss_cost", "loss_gate", "loss_within", "record_loss"]
