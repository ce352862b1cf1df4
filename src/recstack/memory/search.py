"""The largest batch and the largest table scale whose predicted peak fits a memory limit (bisection).

The predicted peak grows with the batch (activations, inputs, sparse gradients; the in-batch score matrix
as its square) and with the rows (tables, optimizer state, dense table gradients), so both searches bisect
on the prediction: integers for the batch, two significant digits for the scale (rounded down, so that the
figure returned really fits).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from recstack.config.limits import BATCH_SIZE_MAX
from recstack.zoo.footprint.predict import Prediction, Shape, predict


def largest_batch(shape: Shape, limit: int, **opts: object) -> int:
    """The largest batch size (1 .. BATCH_SIZE_MAX) whose predicted peak is within ``limit``; 0 if none."""
    def fits(b: int) -> bool:
        return predict(shape, batch_size=b, **opts).peak <= limit  # type: ignore[arg-type]

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= BATCH_SIZE_MAX and fits(hi):
        lo, hi = hi, hi * 2
    if hi > BATCH_SIZE_MAX:
        return lo if not fits(BATCH_SIZE_MAX) else BATCH_SIZE_MAX
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _two_digits_down(x: float) -> float:
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.floor(x / step + 1e-9) * step, 12)


def largest_scale(shape: Shape, limit: int, batch_size: int, *, max_factor: float = 1e6, base: float = 1.0,
                  **opts: object) -> float | None:
    """The largest ``base x factor`` on the current table rows that fits ``limit`` at ``batch_size``, rounded
    down to two significant digits (``base``: the scale the shape already has, so that the figure returned is
    a ``--scale``); None if even one row per table does not fit."""
    def peak(f: float) -> Prediction:
        return predict(shape.scaled(f), batch_size=batch_size, **opts)  # type: ignore[arg-type]

    fits: Callable[[float], bool] = lambda f: peak(f).peak <= limit  # noqa: E731
    tiny = 1.0 / max(t.rows for t in shape.tables)
    if not fits(tiny):
        return None
    lo, hi = tiny, tiny
    while hi < max_factor and fits(hi):
        lo, hi = hi, hi * 4
    if hi >= max_factor and fits(max_factor):
        return max_factor * base
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        if hi / lo < 1.001:
            break
    f = _two_digits_down(lo * base)
    while f > tiny * base and not fits(f / base):
        f = _two_digits_down(f * 0.99)
    return f
