"""Whether two imported profiles hold the same tree: old vs new code on one trace.

    python benchmarks/import_same.py OLD.json NEW.json

Same nodes (path, level, name, stage, calls, shapes, dtypes, labels), the same costs (FLOPs, bytes,
cost detail, coverage), the same run, import and cost-model summaries; times (and every other float)
equal to a relative 1e-9 (float rounding of the same sums in another order). The run id and the
environment are ignored. Prints the first differences; exit 1 if there is one.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

IGNORED = {"run_id", "environment"}
REL = 1e-9


def diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    """Append to ``out`` where ``a`` and ``b`` differ beyond float rounding."""
    if len(out) >= 20:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if where == "" and k in IGNORED:
                continue
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'new' if k in b else 'old'}")
            else:
                diff(a[k], b[k], f"{where}/{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            diff(x, y, f"{where}[{i}]", out)
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and math.isclose(a, b, rel_tol=REL, abs_tol=1e-15)):
            out.append(f"{where}: {a!r} vs {b!r}")
    elif a != b:
        out.append(f"{where}: {a!r} vs {b!r}")


def main() -> int:
    old, new = (json.load(open(p)) for p in sys.argv[1:3])
    out: list[str] = []
    diff(old, new, "", out)
    for line in out:
        print(line)
    print("same tree" if not out else f"differs ({len(out)}{'+' if len(out) >= 20 else ''} differences)")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
