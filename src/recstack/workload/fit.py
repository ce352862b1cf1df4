"""Fitting a workload spec from a CSV of real data (``recstack workload fit``).

Column rules (each column is read as text; empty cells are kept):

- a *label* column (named label / click / clk / is_click / clicked / target / y, with
  only 0/1 values) gives ``labels.click_rate``; it is not a feature unless listed in
  ``columns``;
- a column whose cells contain ``delimiter_in_cells`` (default ``^``) is a *multi-hot*
  list (e.g. Taobao's ``click_sequence``): the IDs are the items, the pooling is the
  empirical distribution of per-row item counts (empty cell = length 0);
- a numeric column with non-integer-formatted values (``260.0``, ``3.9``) is *dense*;
  an integer-formatted column is categorical (IDs often are numbers), except when it
  belongs to a numbered family (``I1 .. I13``) whose other members are mostly dense,
  or is named in ``dense_columns``;
- anything else is *categorical*; an empty cell is one more category.

A categorical (or multi-hot) column becomes a :class:`FeatureSpec` with its observed
cardinality and a heavy-hitter ID distribution: values taking at least 1% of the
lookups (at most 16; all values when there are at most 16) keep their exact shares,
and the rest follow a Zipf-like tail fitted by maximum likelihood on the
rank-frequency curve (uniform when the tail is flat). The Zipf exponent fitted on the
whole curve is recorded in ``observed``. Dense columns become lognormal
(``log1p`` of non-negative values) or normal statistics with their missing rate.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from recstack.errors import DataError
from recstack.workload.distributions import Empirical, Fixed, LogNormal, Normal
from recstack.workload.spec import (
    DenseFeature,
    DenseSpec,
    FeatureSpec,
    FitSource,
    HeavyHitterIds,
    LabelSpec,
    Observed,
    UniformIds,
    WorkloadSpec,
    ZipfIds,
)

LABEL_NAMES = frozenset({"label", "click", "clk", "is_click", "clicked", "target", "y"})
HOT_SHARE = 0.01
MAX_HOT = 16
MIN_TAIL_S = 0.05
MIN_FIT_VALUES = 10  # distinct values needed to report a whole-curve Zipf exponent
MIN_TAIL_VALUES = 10  # distinct tail values needed to fit a Zipf tail (else uniform)
_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(nan|inf|infinity)$", re.IGNORECASE)
_FAMILY_RE = re.compile(r"^(.*?\D)(\d+)$")
BINARY_SNIFF_BYTES = 65536  # a NUL byte in the first 64 KiB means a binary file, not CSV
_Q_GRID = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)


# ---------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------
def read_columns(path: str | Path) -> tuple[list[str], list[Counter[str]], int]:
    """Header, per-column Counter of cell values, and the number of data rows.

    Raises DataError naming the file for: a missing/unreadable file, no header, an
    empty or duplicate column name, a ragged row (with its line number), no data rows.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: file not found")
    if not p.is_file():
        raise DataError(f"{p}: not a file")
    try:
        with p.open("rb") as fh:
            head = fh.read(BINARY_SNIFF_BYTES)
    except OSError as exc:
        raise DataError(f"{p}: cannot read file ({exc.__class__.__name__}: {exc.strerror or exc})") from None
    nul = head.find(b"\x00")
    if nul >= 0:
        raise DataError(f"{p}: holds NUL bytes (the first at byte {nul}); a binary file, not CSV text")
    try:
        with p.open("r", encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or not any(h.strip() for h in header):
                raise DataError(f"{p}: empty file; expected a header line with column names")
            header = [h.strip() for h in header]
            if all(_INT_RE.match(h) or _FLOAT_RE.match(h) for h in header if h):
                raise DataError(
                    f"{p}: no header row: line 1 holds values ({', '.join(header[:4])}, ...); "
                    "add a first line with the column names"
                )
            empty = [i + 1 for i, h in enumerate(header) if not h]
            if empty:
                raise DataError(f"{p}: header has an empty column name at position {empty[0]}")
            dups = sorted({h for h in header if header.count(h) > 1})
            if dups:
                raise DataError(f"{p}: duplicate column names in the header: {', '.join(dups)}")
            counters: list[Counter[str]] = [Counter() for _ in header]
            rows = 0
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataError(
                        f"{p}: line {reader.line_num}: {len(row)} fields, but the header has {len(header)}"
                    )
                for counter, cell in zip(counters, row, strict=True):
                    counter[cell] += 1
                rows += 1
    except UnicodeDecodeError as exc:
        raise DataError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise DataError(f"{p}: malformed CSV: {exc}") from None
    except OSError as exc:
        raise DataError(f"{p}: cannot read file ({exc.__class__.__name__}: {exc.strerror or exc})") from None
    if rows == 0:
        raise DataError(f"{p}: no data rows after the header")
    return header, counters, rows


# ---------------------------------------------------------------------------------------------------------
# Skew fitting
# ---------------------------------------------------------------------------------------------------------
def fit_zipf(counts: np.ndarray, rank_offset: int = 0) -> tuple[float, float]:
    """Maximum-likelihood Zipf-like (s, q) for descending ``counts`` at ranks offset+1, offset+2, ...

    Model: P(rank k) proportional to (k + q) ** -s over the observed ranks. q is chosen on
    a grid, s by golden-section search in [0.01, 6] (the log-likelihood is concave in s).
    """
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    c = c[c > 0]
    if c.size < 2:
        return 0.01, 0.0
    k = np.arange(rank_offset + 1, rank_offset + 1 + c.size, dtype=np.float64)
    n = c.sum()
    best = (-math.inf, 0.01, 0.0)
    for q in _Q_GRID:
        logk = np.log(k + q)
        a = float(np.dot(c, logk))

        def ll(s: float, logk: np.ndarray = logk, a: float = a) -> float:
            m = -s * logk
            top = m.max()
            return -s * a - n * (top + math.log(np.exp(m - top).sum()))

        lo, hi = 0.01, 6.0
        g = (math.sqrt(5) - 1) / 2
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        f1, f2 = ll(x1), ll(x2)
        for _ in range(60):
            if f1 < f2:
                lo, x1, f1 = x1, x2, f2
                x2 = lo + g * (hi - lo)
                f2 = ll(x2)
            else:
                hi, x2, f2 = x2, x1, f1
                x1 = hi - g * (hi - lo)
                f1 = ll(x1)
        s = (lo + hi) / 2
        val = ll(s)
        if val > best[0] + 1e-9:
            best = (val, s, q)
    return round(best[1], 4), best[2]


def categorical_ids(counts: np.ndarray) -> tuple[UniformIds | ZipfIds | HeavyHitterIds, Observed]:
    """ID distribution (heavy hitters + tail) and observations from descending value counts."""
    c = np.sort(np.asarray(counts, dtype=np.int64))[::-1]
    total = float(c.sum())
    shares = c / total
    if c.size <= MAX_HOT:
        n_hot = c.size
    else:
        n_hot = int(min(MAX_HOT, np.count_nonzero(shares >= HOT_SHARE)))
    s_all, q_all = fit_zipf(c) if c.size >= MIN_FIT_VALUES else (None, None)
    tail_counts = c[n_hot:]
    tail: UniformIds | ZipfIds = UniformIds()
    if tail_counts.size >= MIN_TAIL_VALUES:
        s_tail, q_tail = fit_zipf(tail_counts, rank_offset=n_hot)
        if s_tail >= MIN_TAIL_S:
            tail = ZipfIds(kind="zipf", s=s_tail, q=q_tail)
    ids: UniformIds | ZipfIds | HeavyHitterIds
    if n_hot:
        hot = [round(float(x), 6) for x in shares[:n_hot]]
        ids = HeavyHitterIds(kind="heavy_hitters", hot=hot, tail=tail)
    else:
        ids = tail
    observed = Observed(
        rows=0,
        distinct=int(c.size),
        top1_share=round(float(shares[0]), 6),
        top10_share=round(float(shares[:10].sum()), 6),
        zipf_s=s_all,
        zipf_q=q_all,
        mean_length=1.0,
    )
    return ids, observed


# ---------------------------------------------------------------------------------------------------------
# Column classification
# ---------------------------------------------------------------------------------------------------------
def _numeric_kind(counter: Counter[str]) -> str | None:
    """'int' / 'float' when every non-empty cell is numeric, else None."""
    keys = [k.strip() for k in counter if k.strip()]
    if not keys:
        return None
    if all(_INT_RE.match(k) for k in keys):
        return "int"
    if all(_INT_RE.match(k) or _FLOAT_RE.match(k) for k in keys):
        return "float"
    return None


def _family_dense(header: list[str], kinds: dict[str, str | None]) -> set[str]:
    """Integer columns of a numbered family (I1..I13) whose other members are mostly float columns."""
    families: dict[str, list[str]] = {}
    for name in header:
        m = _FAMILY_RE.match(name)
        if m:
            families.setdefault(m.group(1), []).append(name)
    out: set[str] = set()
    for members in families.values():
        if len(members) < 3:
            continue
        floats = sum(1 for m in members if kinds[m] == "float")
        if floats * 2 > len(members):
            out.update(m for m in members if kinds[m] == "int")
    return out


def _dense_feature(name: str, counter: Counter[str], rows: int, path: Path) -> DenseFeature:
    cells = [(k.strip(), v) for k, v in counter.items() if k.strip()]
    try:
        values = np.array([float(k) for k, _ in cells], dtype=np.float64)
    except ValueError:
        bad = next(k for k, _ in cells if not (_INT_RE.match(k) or _FLOAT_RE.match(k)))
        raise DataError(
            f"{path}: column {name!r} was asked to be dense but holds non-numeric value {bad!r}"
        ) from None
    weights = np.array([v for _, v in cells], dtype=np.float64)
    finite = np.isfinite(values)
    values, weights = values[finite], weights[finite]
    present = float(weights.sum())
    missing = 1.0 - present / rows
    dist: Fixed | Normal | LogNormal
    if present == 0:
        dist = Fixed(kind="fixed", value=0.0)
    elif values.min() >= 0:
        logs = np.log1p(values)
        mu = float(np.average(logs, weights=weights))
        sigma = float(math.sqrt(max(np.average((logs - mu) ** 2, weights=weights), 0.0)))
        dist = LogNormal(kind="lognormal", mu=round(mu, 6), sigma=round(sigma, 6), shift=1.0, min=0.0)
    else:
        mean = float(np.average(values, weights=weights))
        std = float(math.sqrt(max(np.average((values - mean) ** 2, weights=weights), 0.0)))
        dist = Normal(kind="normal", mean=round(mean, 6), std=round(std, 6))
    return DenseFeature(name=name, dist=dist, missing_rate=round(missing, 6))


def _list_feature(name: str, counter: Counter[str], rows: int, delimiter: str) -> FeatureSpec:
    items: Counter[str] = Counter()
    lengths: Counter[int] = Counter()
    for cell, count in counter.items():
        parts = [x.strip() for x in cell.split(delimiter)] if cell.strip() else []
        parts = [x for x in parts if x]
        lengths[len(parts)] += count
        for x in parts:
            items[x] += count
    lens = sorted(lengths)
    pooling = Empirical(
        kind="empirical",
        values=[float(v) for v in lens],
        probs=[round(lengths[v] / rows, 6) for v in lens],
    )
    mean_len = sum(v * lengths[v] for v in lens) / rows
    if not items:
        ids: UniformIds | ZipfIds | HeavyHitterIds = UniformIds()
        observed = Observed(rows=rows, distinct=0, top1_share=0.0, top10_share=0.0, mean_length=0.0)
        return FeatureSpec(name=name, cardinality=1, ids=ids, pooling=pooling, observed=observed)
    ids, observed = categorical_ids(np.array(list(items.values())))
    observed = observed.model_copy(update={"rows": rows, "mean_length": round(mean_len, 6)})
    return FeatureSpec(name=name, cardinality=len(items), ids=ids, pooling=pooling, observed=observed)


def _categorical_feature(name: str, counter: Counter[str], rows: int) -> FeatureSpec:
    ids, observed = categorical_ids(np.array(list(counter.values())))
    observed = observed.model_copy(update={"rows": rows})
    return FeatureSpec(name=name, cardinality=len(counter), ids=ids, pooling=None, observed=observed)


# ---------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------
def fit_csv(
    path: str | Path,
    columns: list[str] | None = None,
    delimiter_in_cells: str = "^",
    *,
    dense_columns: list[str] | None = None,
    name: str | None = None,
) -> WorkloadSpec:
    """Fit a workload spec (explicit features) from a CSV file with a header line.

    ``columns``: the columns to fit (default: all but label columns); unknown names are a
    DataError listing the available ones. ``dense_columns``: numeric columns to treat as
    dense whatever their format. Returns a spec whose features keep the file's column
    order; write it with ``spec.to_yaml(path)``.
    """
    p = Path(path)
    if not delimiter_in_cells:
        raise DataError("delimiter_in_cells must be a non-empty string")
    header, counters, rows = read_columns(p)
    by_name = dict(zip(header, counters, strict=True))
    for label, asked in (("columns", columns), ("dense columns", dense_columns)):
        unknown = [c for c in (asked or []) if c not in by_name]
        if unknown:
            raise DataError(
                f"{p}: unknown {label} {', '.join(map(repr, unknown))}; the file has: {', '.join(header)}"
            )
    label_col = next(
        (
            h
            for h in header
            if h.lower() in LABEL_NAMES and {k.strip() for k in by_name[h] if k.strip()} <= {"0", "1"}
        ),
        None,
    )
    selected = list(columns) if columns else [h for h in header if h != label_col]
    kinds = {h: _numeric_kind(by_name[h]) for h in header}
    family = _family_dense(header, kinds)
    forced = set(dense_columns or [])
    features: list[FeatureSpec] = []
    dense: list[DenseFeature] = []
    skipped: list[str] = []
    for col in selected:
        counter = by_name[col]
        if not any(k.strip() for k in counter):
            skipped.append(col)
            continue
        is_list = any(delimiter_in_cells in k for k in counter)
        if col in forced or (not is_list and (kinds[col] == "float" or col in family)):
            dense.append(_dense_feature(col, counter, rows, p))
        elif is_list:
            features.append(_list_feature(col, counter, rows, delimiter_in_cells))
        else:
            features.append(_categorical_feature(col, counter, rows))
    if not features:
        raise DataError(f"{p}: no categorical columns to fit among {', '.join(selected)}")
    click_rate = 0.25
    if label_col is not None:
        lc = by_name[label_col]
        click_rate = round(lc.get("1", 0) / max(lc.get("0", 0) + lc.get("1", 0), 1), 6)
    return WorkloadSpec(
        name=name or p.stem,
        description=f"fitted from {p.name} ({rows} rows) by recstack workload fit",
        features=features,
        dense=DenseSpec(features=dense),
        labels=LabelSpec(click_rate=click_rate),
        fitted_from=FitSource(file=str(p), rows=rows, label_column=label_col, skipped=skipped),
    )


def fit_summary(spec: WorkloadSpec) -> list[dict[str, Any]]:
    """One row per fitted column (features, then dense) for a short report."""
    out: list[dict[str, Any]] = []
    for f in spec.features or []:
        obs = f.observed
        hot = f.ids.hot if isinstance(f.ids, HeavyHitterIds) else []
        tail = f.ids.tail if isinstance(f.ids, HeavyHitterIds) else f.ids
        out.append(
            {
                "column": f.name,
                "type": "multi-hot" if f.pooling is not None else "categorical",
                "distinct": f.cardinality,
                "top1_share": obs.top1_share if obs else None,
                "zipf_s": obs.zipf_s if obs else None,
                "hot": len(hot),
                "hot_mass": round(sum(hot), 4),
                "tail": tail.kind if isinstance(tail, UniformIds) else f"zipf s={tail.s:g} q={tail.q:g}",
                "mean_length": obs.mean_length if obs else None,
            }
        )
    for d in spec.dense.features:
        out.append(
            {
                "column": d.name,
                "type": "dense",
                "distinct": None,
                "top1_share": None,
                "zipf_s": None,
                "hot": None,
                "hot_mass": None,
                "tail": f"{d.dist.kind} (missing {d.missing_rate:.0%})",
                "mean_length": None,
            }
        )
    return out
