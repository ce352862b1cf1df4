"""Analytic cost model: FLOPs and bytes per op, counted at dispatch and attached to the profile tree.

    with CostCounter(model) as cc:
        step()                                   # one step, outside the timed passes
    summary = attach_costs(profile.root, cc.counts, steps=1)

or, for a profiled model, ``attach_model_costs(profile, model, step)`` (the same, plus
``profile.extra["cost_model"] = summary``).

See docs/cost-model.md for every formula and how costs are attached.
"""

from recstack.costmodel.attach import attach_costs, attach_model_costs
from recstack.costmodel.counter import BACKWARD, CostCounter, OpCount
from recstack.costmodel.formulas import OpCost, TensorMeta, has_formula, op_cost

__all__ = ["BACKWARD", "CostCounter", "OpCost", "OpCount", "TensorMeta", "attach_costs", "attach_model_costs", "has_formula", "op_cost"]
