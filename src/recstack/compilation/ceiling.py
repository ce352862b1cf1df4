"""The Amdahl ceiling on a stage's compiled speedup, from the eager op pass.

Inductor on CPU does not generate its own GEMMs, convolutions or embedding-bag kernels: it calls the
same library kernels eager runs (oneDNN/MKL through ``aten::mm``/``addmm``/..., as extern kernels), and
fuses what lies between them. So the time a stage spends in those ops is time compilation keeps; at
best everything else takes zero time, and the stage's speedup is bounded by

    ceiling_speedup = stage_s / library_s = 1 / library_share

where ``stage_s`` is the stage's eager time in the op pass (its range: ops, Python and framework time
between them) and ``library_s`` the time of the outermost library ops inside it (:data:`LIBRARY_OPS`,
an op nested in another library op counted once). Forward stages only: in training the backward and
optimizer are stages of their own, as in the timing table.
"""

from __future__ import annotations

import re
from typing import Any

from recstack.profiling.oppass import Folder, RawNode
from recstack.stage_names import FORWARD_STAGES

FORMULA = ("ceiling_speedup = stage_s / library_s (Amdahl: every op but the library kernels inductor calls "
           "as eager does takes zero time); stage_s: the stage's eager time in the op pass, library_s: its "
           "outermost ops among " + ", ".join(("mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "convolution",
                                              "embedding_bag")) + " and their backward, FBGEMM embedding kernels")

LIBRARY_OPS = re.compile(
    r"aten::(mm|addmm|bmm|baddbmm|addbmm|linear|matmul|_?convolution\w*|conv[123]d|conv_transpose[123]d"
    r"|mkldnn_convolution|mkldnn_linear\w*|_?embedding_bag\w*|linear_backward|mm_backward)"
    r"|mkldnn::\w+|mkl::\w+|fbgemm::\w*(embedding|tbe|split_embedding)\w*",
)


def library_us(node: RawNode) -> float:
    """Time (us) of the outermost library ops under ``node`` (a library op's children are not walked)."""
    if node.level == "op" and LIBRARY_OPS.fullmatch(node.name):
        return node.us
    return sum(library_us(c) for c in node.children.values())


def stage_ceilings(root: RawNode, steps: int) -> dict[str, dict[str, Any]]:
    """{stage: {stage_s, library_s, library_share, ceiling_speedup}} per forward stage of an eager op-pass
    tree of ``steps`` steps (times per step; ``ceiling_speedup`` None where no library op ran: no bound)."""
    steps = max(1, steps)
    out: dict[str, dict[str, Any]] = {}
    for (level, name), st in root.children.items():
        if level != "stage" or name not in FORWARD_STAGES:
            continue
        lib, total = library_us(st), Folder.stage_exclusive_us(st)  # nested stage ranges hold their own ops
        share = (lib / total) if total > 0 else None
        out[name] = {"stage_s": total * 1e-6 / steps, "library_s": lib * 1e-6 / steps, "library_share": share,
                     "ceiling_speedup": (1 / share) if share else None}
    return out


__all__ = ["FORMULA", "LIBRARY_OPS", "library_us", "stage_ceilings"]
