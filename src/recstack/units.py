"""Numbers with units, as text: the one place recstack formats figures for people.

Every terminal table, log line and label formats through these functions, so a
figure reads the same everywhere (the report page's script has the same rules
in ``report/assets/units.js``). They format; they never compute a figure.

* :func:`sig` -- a plain number to ``digits`` significant digits, never in
  exponent notation: ``sig(0.012345) == "0.0123"``, ``sig(452.9, 4) == "452.9"``.
* :func:`si` -- a value with an SI prefix (k, M, G, T, P) and a unit:
  ``si(2.5e9, "FLOP") == "2.50 GFLOP"``, ``si(512, "B") == "512 B"``; decimal
  prefixes, as for rates and counts.
* :func:`count` -- a count with an SI prefix and no unit: ``count(1.5e6) == "1.50M"``.
* :func:`binary` -- a size in bytes with a binary prefix (KiB, MiB, GiB, TiB),
  trailing zeros dropped: ``binary(32768) == "32 KiB"``; for memory sizes that
  are powers of two (caches, buffers, tables).
* :func:`seconds` -- a time with the unit chosen by magnitude (s, ms, us, ns):
  ``seconds(0.01388) == "13.88 ms"``.
* :func:`percent` -- a fraction as a percentage: ``percent(0.456) == "46%"``.

``None`` (and NaN or infinity) print as ``missing`` (``"-"`` unless told).
"""

from __future__ import annotations

import math

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def _finite(v: float | None) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def sig(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant digits without an exponent; integers of that many digits or more stay whole."""
    if v == 0:
        return "0"
    a = abs(v)
    decimals = max(0, digits - 1 - math.floor(math.log10(a)))
    text = f"{v:.{decimals}f}"
    # Rounding can carry into a new digit (9.996 -> "10.00"); drop the extra decimal it leaves.
    if decimals and len(text.replace("-", "").replace(".", "").lstrip("0")) > digits:
        text = f"{v:.{decimals - 1}f}"
    return text


def _strip(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def si(v: float | None, unit: str = "", *, digits: int = 3, missing: str = "-", space: str = " ") -> str:
    """``v`` with an SI prefix and ``unit``, ``digits`` significant digits: ``"2.50 GFLOP"``, ``"27.0 GB/s"``.

    Below 1000 there is no prefix; whole numbers print whole (``"512 B"``), others to ``digits``.
    ``space`` goes between the number and the prefixed unit (``""`` for counts: ``"1.50M"``).
    """
    if not _finite(v):
        return missing
    assert v is not None
    a = abs(v)
    for div, prefix in _SI:
        if a >= div * (1 - 0.5 * 10 ** -max(digits, 3)):  # 999.96 k prints "1.00 M", not "1000 k"
            return f"{sig(v / div, digits)}{space}{prefix}{unit}"
    text = str(int(v)) if float(v).is_integer() else sig(v, digits)
    return f"{text}{space}{unit}" if unit else text


def count(v: float | None, *, digits: int = 3, missing: str = "-") -> str:
    """A count with an SI prefix and no unit: ``"1.50M"``, ``"12.0k"``, ``"26"``."""
    return si(v, "", digits=digits, missing=missing, space="")


def binary(nbytes: float | None, *, digits: int = 3, missing: str = "-") -> str:
    """Bytes with a binary prefix, trailing zeros dropped: ``"32 KiB"``, ``"1.5 MiB"``, ``"195 MiB"``, ``"640 B"``."""
    if not _finite(nbytes):
        return missing
    assert nbytes is not None
    a = abs(nbytes)
    for div, unit in _BINARY:
        if a >= div:
            return f"{_strip(sig(nbytes / div, digits))} {unit}"
    return f"{_strip(sig(nbytes, digits))} B"


def seconds(s: float | None, *, digits: int = 4, missing: str = "-") -> str:
    """Seconds with the unit chosen by magnitude, ``digits`` significant digits: ``"1.234 s"``, ``"461.6 us"``."""
    if not _finite(s):
        return missing
    assert s is not None
    if s == 0:
        return "0 s"
    a = abs(s)
    for div, unit in _TIME:
        if a >= div * (1 - 0.5 * 10 ** -max(digits, 3)):  # 0.99996 s prints "1.000 s", not "1000 ms"
            return f"{sig(s / div, digits)} {unit}"
    return f"{sig(s / 1e-9, digits)} ns"


def percent(fraction: float | None, *, decimals: int = 0, missing: str = "-", signed: bool = False) -> str:
    """A fraction as a percentage with ``decimals`` decimals: ``percent(1.88) == "188%"``; ``signed``: ``+12%``."""
    if not _finite(fraction):
        return missing
    assert fraction is not None
    return f"{100 * fraction:{'+' if signed else ''}.{decimals}f}%"


def milliseconds(s: float | None, *, decimals: int = 3, width: int = 0, missing: str = "-") -> str:
    """Seconds as a fixed-point number of milliseconds (no unit), right-aligned in ``width`` for a table column."""
    if not _finite(s):
        return missing
    assert s is not None
    return f"{s * 1e3:{width}.{decimals}f}"


def ratio(v: float | None, *, decimals: int = 2, missing: str = "-") -> str:
    """A ratio (a speedup) with ``decimals`` decimals and an ``x``: ``ratio(1.234) == "1.23x"``."""
    if not _finite(v):
        return missing
    assert v is not None
    return f"{v:.{decimals}f}x"
