"""The statistics of ``correlate``: rank correlations resampled over models, and a ridge regression.

With a dozen models the independent units are the models, not the points (a model's batch sizes and
backends share its architecture features exactly), so every interval resamples models with replacement and
takes all their points. See docs/correlate.md for the method and its limits.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recstack.correlate.points import NUMERIC_FEATURES, Point
from recstack.units import sig

BOOTSTRAP = 1000
CONFIDENCE = 0.95
DOMINANT_TOP_SHARE = 0.8  # a feature dominates a metric when it is the top |rho| in >= 80% of model resamples
MIN_MODELS = 4  # a metric needs this many models with a value (and some spread) to be analysed
ALPHAS = tuple(10.0 ** k for k in range(-3, 4))


def signed(v: float | None, digits: int = 2) -> str:
    """``v`` with its sign to ``digits`` significant digits (+0.0012, not +0.00); empty for NaN."""
    if v is None or v != v:
        return ""
    return "0" if v == 0 else ("-" if v < 0 else "+") + sig(abs(v), digits)


@dataclass
class MetricResult:
    """One bottleneck metric against every feature."""

    metric: str
    models: int
    points: int
    rho: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    top_share: dict[str, float]  # fraction of resamples where the feature has the largest |rho|
    top: str
    dominant: bool
    ridge_alpha: float | None = None
    cv_r2: float | None = None  # leave-one-model-out R^2 of the ridge fit
    coefficients: dict[str, float] = field(default_factory=dict)  # standardised, fit on all points


@dataclass
class Correlation:
    features: list[str]
    metrics: list[MetricResult]
    models: list[str]
    points: int
    bootstrap: int
    seed: int
    skipped: dict[str, str] = field(default_factory=dict)  # metric -> why it was not analysed

    def findings(self) -> list[str]:
        """Sentences stated from the results: what carries each metric, and whether one feature dominates."""
        out = []
        for m in self.metrics:
            r, lo, hi = m.rho[m.top], m.low[m.top], m.high[m.top]
            excl = lo > 0 or hi < 0
            verdict = (
                f"dominated by {m.top} (top in {m.top_share[m.top]:.0%} of model resamples)"
                if m.dominant
                else f"no single feature dominates (the top, {m.top}, leads in {m.top_share[m.top]:.0%} of model resamples)"
            )
            fit = f"; ridge fit, leave-one-model-out R^2 {m.cv_r2:.2f}" if m.cv_r2 is not None else ""
            out.append(
                f"{m.metric}: strongest with {m.top} (rho {signed(r)}, {CONFIDENCE:.0%} interval [{signed(lo)}, {signed(hi)}]"
                f"{'' if excl else ', includes 0'}); {verdict}{fit}."
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": self.features,
            "models": self.models,
            "points": self.points,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "confidence": CONFIDENCE,
            "metrics": [m.__dict__ for m in self.metrics],
            "skipped": self.skipped,
            "findings": self.findings(),
        }


def feature_matrix(points: list[Point]) -> tuple[list[str], np.ndarray]:
    """Numeric features, then one indicator per interaction type present (``interaction=dcn``, ...)."""
    kinds = sorted({p.interaction for p in points if p.interaction})
    names = list(NUMERIC_FEATURES) + [f"interaction={k}" for k in kinds]
    rows = [[p.features.get(f, math.nan) for f in NUMERIC_FEATURES] + [float(p.interaction == k) for k in kinds]
            for p in points]
    return names, np.asarray(rows, dtype=np.float64)


def weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average ranks of ``values`` [n] in each multiset ``weights`` [B, n] (point i taken weights[b, i] times).

    For integer weights this equals ranking the resampled points themselves (ties share their average
    rank), so one vectorised pass covers every bootstrap resample.
    """
    uniq, inv = np.unique(values, return_inverse=True)
    onehot = np.zeros((values.size, uniq.size))
    onehot[np.arange(values.size), inv] = 1.0
    per_value = weights @ onehot  # [B, distinct values]: copies of each value
    below = np.cumsum(per_value, axis=1) - per_value
    return (below + (per_value + 1.0) / 2.0)[:, inv]


def weighted_spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho [B, features] of each column of ``x`` [n, F] with ``y`` [n] in each weighted multiset.

    nan where a feature (or the metric) is constant in that multiset.
    """
    w = weights
    total = w.sum(axis=1, keepdims=True)
    ry = weighted_ranks(y, w)
    ry = ry - (w * ry).sum(axis=1, keepdims=True) / total
    vy = (w * ry * ry).sum(axis=1)
    out = np.empty((w.shape[0], x.shape[1]))
    for j in range(x.shape[1]):
        rx = weighted_ranks(x[:, j], w)
        rx = rx - (w * rx).sum(axis=1, keepdims=True) / total
        den = np.sqrt((w * rx * rx).sum(axis=1) * vy)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, j] = np.where(den > 1e-12, (w * rx * ry).sum(axis=1) / np.where(den > 1e-12, den, 1.0), np.nan)
    return out


def _ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Ridge on standardised columns: (mean, scale, coefficients, intercept); closed form."""
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    z = (x - mu) / sd
    ym = y.mean()
    coef = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - ym))
    return mu, sd, coef, ym


def ridge_leave_one_model_out(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Ridge regression on standardised features: the alpha (of ALPHAS) with the best leave-one-model-out R^2,
    that R^2 (predictions for each model from a fit without it), and the coefficients fit on every point."""
    keep = x.std(axis=0) > 0
    xs = x[:, keep]
    ss = float(((y - y.mean()) ** 2).sum())
    best: tuple[float, float] | None = None
    for alpha in ALPHAS:
        pred = np.empty_like(y)
        for g in np.unique(groups):
            test = groups == g
            mu, sd, coef, ym = _ridge(xs[~test], y[~test], alpha)
            pred[test] = ((xs[test] - mu) / sd) @ coef + ym
        r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else math.nan
        if best is None or r2 > best[1]:
            best = (alpha, r2)
    assert best is not None
    coef = np.zeros(x.shape[1])
    coef[keep] = _ridge(xs, y, best[0])[2]
    return best[0], best[1], coef


def correlate(points: list[Point], *, bootstrap: int = BOOTSTRAP, seed: int = 0) -> Correlation:
    """Spearman rho of every feature with every metric, intervals over model resamples, ridge per metric."""
    names, x = feature_matrix(points)
    models = sorted({p.model for p in points})
    model_of = np.array([models.index(p.model) for p in points])
    metric_names = sorted({k for p in points for k in p.metrics})
    alpha = (1 - CONFIDENCE) / 2
    results, skipped = [], {}
    for metric in metric_names:
        y = np.array([p.metrics.get(metric, math.nan) for p in points])
        ok = np.isfinite(y)
        have = sorted(set(model_of[ok].tolist()))
        if len(have) < MIN_MODELS or np.nanstd(y) == 0:
            skipped[metric] = f"{len(have)} models with a value" if len(have) < MIN_MODELS else "constant"
            continue
        xm, ym, gm = x[ok], y[ok], model_of[ok]
        rho = weighted_spearman(xm, ym, np.ones((1, ym.size)))[0]
        if not np.isfinite(rho).any():
            skipped[metric] = "no feature varies where the metric is known"
            continue
        # resample models with replacement: each point weighs as often as its model was drawn
        draws = np.random.default_rng(seed).integers(0, len(have), (bootstrap, len(have)))
        copies = np.zeros((bootstrap, len(have)))
        np.add.at(copies, (np.repeat(np.arange(bootstrap), len(have)), draws.ravel()), 1.0)
        boot = weighted_spearman(xm, ym, copies[:, np.searchsorted(have, gm)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a feature constant in every resample: nan
            lo = np.nanquantile(boot, alpha, axis=0)
            hi = np.nanquantile(boot, 1 - alpha, axis=0)
        absb = np.where(np.isfinite(boot), np.abs(boot), -1.0)
        top_idx = absb.argmax(axis=1)
        valid = absb.max(axis=1) >= 0
        share = np.bincount(top_idx[valid], minlength=len(names)) / max(1, int(valid.sum()))
        top = int(np.nanargmax(np.abs(rho)))
        res = MetricResult(
            metric=metric, models=len(have), points=int(ok.sum()),
            rho=dict(zip(names, rho.tolist(), strict=True)),
            low=dict(zip(names, lo.tolist(), strict=True)),
            high=dict(zip(names, hi.tolist(), strict=True)),
            top_share=dict(zip(names, share.tolist(), strict=True)),
            top=names[top],
            dominant=bool(share[top] >= DOMINANT_TOP_SHARE and (lo[top] > 0 or hi[top] < 0)),
        )
        if len(have) >= MIN_MODELS:
            a, r2, coef = ridge_leave_one_model_out(np.nan_to_num(xm), ym, gm)
            res.ridge_alpha, res.cv_r2 = a, r2
            res.coefficients = dict(zip(names, coef.tolist(), strict=True))
        results.append(res)
    return Correlation(names, results, models, len(points), bootstrap, seed, skipped)


def nan_free(x: object) -> object:
    """NaN (a rho where a feature does not vary) as JSON null."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: nan_free(v) for k, v in x.items()}
    if isinstance(x, list):
        return [nan_free(v) for v in x]
    return x
