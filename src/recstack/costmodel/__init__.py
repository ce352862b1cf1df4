"""Analytic cost model: FLOPs and bytes per op, counted at dispatch and attached to the profile tree.

    with CostCounter(model) as cc:
        step()                                   # one step, outside the timed passes
    summary = attach_costs(profile.root, cc.counts, steps=1)

or, for a profiled model, ``attach_model_costs(profile, model, step)`` (the same, plus
``profile.cost_model = summary``).

See docs/cost-model.md for every formula and how costs are attached. The names load lazily: the
formulas, sums and attach rules need no torch (an imported trace is priced without it); the counter does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.costmodel.attach import attach_costs, attach_model_costs
    from recstack.costmodel.counter import CostCounter
    from recstack.costmodel.formulas import OpCost, TensorMeta, has_formula, op_cost
    from recstack.costmodel.sums import BACKWARD, OpCount

_LAZY = {"attach_costs": "attach", "attach_model_costs": "attach", "BACKWARD": "sums", "CostCounter": "counter",
         "OpCount": "sums", "OpCost": "formulas", "TensorMeta": "formulas", "has_formula": "formulas",
         "op_cost": "formulas"}
__all__ = ["BACKWARD", "CostCounter", "OpCost", "OpCount", "TensorMeta", "attach_costs", "attach_model_costs", "has_formula", "op_cost"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"recstack.costmodel.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'recstack.costmodel' has no attribute {name!r}")
